package gpu_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/google/go-cmp/cmp"

	"github.com/miglayout/miglayout/pkg/mig"
	"github.com/miglayout/miglayout/pkg/mig/gpu"
	"github.com/miglayout/miglayout/pkg/mig/gpu/gputest"
	"github.com/miglayout/miglayout/pkg/mig/nvmlsim"
)

// rightHalf3g is the A100's 3g.40gb at memory slices 4+4 only, where the
// catalog has 0+4 and 4+4.
var rightHalf3g = []mig.Placement{{Start: 4, Size: 4}}

// rightHalfSim is one A100-SXM4-80GB whose driver offers 3g.40gb at 4+4
// only, MIG mode off.
func rightHalfSim(t *testing.T) *nvmlsim.Sim {
	t.Helper()
	three := profileOf(t, mig.DefaultCatalog(), "3g.40gb")
	three.Placements = rightHalf3g
	hardware, err := nvmlsim.CatalogWithProfiles(nil, "A100-SXM4-80GB", three)
	if err != nil {
		t.Fatal(err)
	}
	sim, err := nvmlsim.New(nvmlsim.Config{Spec: "1xA100-SXM4-80GB", Catalog: hardware, Seed: t.Name()})
	if err != nil {
		t.Fatal(err)
	}
	return sim
}

func profileOf(t *testing.T, c *mig.Catalog, name string) mig.Profile {
	t.Helper()
	a100, err := c.Model("A100-SXM4-80GB")
	if err != nil {
		t.Fatal(err)
	}
	p, err := a100.Profile(name)
	if err != nil {
		t.Fatal(err)
	}
	return *p
}

// managerOver is a GPU manager over lib with catalog (nil: the default),
// keeping its profile tables at path ("": in memory only): an agent
// started over the same GPUs.
func managerOver(t *testing.T, lib nvml.Interface, catalog *mig.Catalog, path string) *gpu.NVMLManager {
	t.Helper()
	m, err := gpu.NewNVML(lib, catalog)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Shutdown() })
	if path != "" {
		m.KeepProfileTables(t.Context(), path)
	}
	return m
}

// nvmlPlacements lists GPU 0 and returns what it says NVML offers of
// 3g.40gb (nil: the catalog's).
func nvmlPlacements(t *testing.T, m *gpu.NVMLManager) []mig.Placement {
	t.Helper()
	gpus, err := m.GPUs(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return gpus[0].NVMLPlacements["3g.40gb"]
}

// readTableOnce has a manager keeping its tables at path read GPU 0's
// table with MIG mode on, then turn MIG mode off again: an agent that saw
// the GPU in MIG mode once.
func readTableOnce(t *testing.T, sim *nvmlsim.Sim, path string) {
	t.Helper()
	ctx := t.Context()
	m := managerOver(t, sim, nil, path)
	if _, err := m.SetMIGMode(ctx, 0, true); err != nil {
		t.Fatal(err)
	}
	if got := nvmlPlacements(t, m); !cmp.Equal(got, rightHalf3g) {
		t.Fatalf("with MIG on NVML's 3g.40gb placements read as %v, want %v", got, rightHalf3g)
	}
	if _, err := m.SetMIGMode(ctx, 0, false); err != nil {
		t.Fatal(err)
	}
	if err := m.Shutdown(); err != nil {
		t.Fatal(err)
	}
}

// TestProfileTablesKeptAcrossRestarts: a manager keeping its tables in a
// file reports, for a GPU in MIG-off mode, the table NVML gave in the GPU's
// last MIG mode, read by an earlier manager over the same driver; one
// without the file reports none (the catalog's) where the driver answers
// no profile with MIG mode off (nvml.h; gputest.OnlyInMIGMode).
func TestProfileTablesKeptAcrossRestarts(t *testing.T) {
	sim := rightHalfSim(t)
	path := filepath.Join(t.TempDir(), "nvml-profiles.json")
	readTableOnce(t, sim, path)
	lib := gputest.ProfileReads{Interface: sim, OnlyInMIGMode: true}

	gpus, err := managerOver(t, lib, nil, path).GPUs(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if g := gpus[0]; g.MIGMode.Current || !cmp.Equal(g.NVMLPlacements["3g.40gb"], rightHalf3g) || len(g.CatalogMismatches) == 0 {
		t.Errorf("after a restart, MIG off: MIG %+v, 3g.40gb placements %v, mismatches %q; want MIG off with NVML's %v and a mismatch",
			g.MIGMode, g.NVMLPlacements["3g.40gb"], g.CatalogMismatches, rightHalf3g)
	}
	if got := nvmlPlacements(t, managerOver(t, lib, nil, "")); got != nil {
		t.Errorf("a manager not keeping tables reports %v with MIG off: the test does not bite", got)
	}
}

// TestProfileTablesNotTaken: a saved table is not used for a driver other
// than the loaded one, nor where the catalog now describes the GPU's model
// otherwise (the table holds only what differed from the old description),
// nor from a file that is not one of this version; the next table read
// from NVML replaces such a file. The driver answers no profile with MIG
// mode off (nvml.h; gputest.OnlyInMIGMode), so that what the GPU reports
// with MIG mode off comes from the file alone.
func TestProfileTablesNotTaken(t *testing.T) {
	otherDesc := profileOf(t, mig.DefaultCatalog(), "1g.10gb")
	otherDesc.Multiprocessors++
	a100, err := mig.DefaultCatalog().Model("A100-SXM4-80GB")
	if err != nil {
		t.Fatal(err)
	}
	if a100, err = a100.WithProfiles(otherDesc); err != nil {
		t.Fatal(err)
	}
	newerCatalog, err := mig.DefaultCatalog().With(a100)
	if err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		lib     func(*nvmlsim.Sim) nvml.Interface
		catalog *mig.Catalog
		edit    func(t *testing.T, path string)
	}{
		"another driver":          {lib: func(s *nvmlsim.Sim) nvml.Interface { return otherDriver{s} }},
		"the catalog changed":     {catalog: newerCatalog},
		"another file version":    {edit: editTables(func(f map[string]any) { f["version"] = gpu.ProfileTablesVersion + 1 })},
		"a file that is not JSON": {edit: func(t *testing.T, path string) { writeFile(t, path, []byte("{\"version\": 1, \"gpus\": [")) }},
	} {
		t.Run(name, func(t *testing.T) {
			sim := rightHalfSim(t)
			path := filepath.Join(t.TempDir(), "nvml-profiles.json")
			readTableOnce(t, sim, path)
			if tc.edit != nil {
				tc.edit(t, path)
			}
			lib := nvml.Interface(sim)
			if tc.lib != nil {
				lib = tc.lib(sim)
			}
			m := managerOver(t, gputest.ProfileReads{Interface: lib, OnlyInMIGMode: true}, tc.catalog, path)
			if got := nvmlPlacements(t, m); got != nil {
				t.Fatalf("MIG off after a restart: 3g.40gb placements %v, want none (the saved table is not valid here)", got)
			}
			// Read with MIG on, the table replaces what the file held.
			if _, err := m.SetMIGMode(t.Context(), 0, true); err != nil {
				t.Fatal(err)
			}
			nvmlPlacements(t, m)
			if _, err := m.SetMIGMode(t.Context(), 0, false); err != nil {
				t.Fatal(err)
			}
			if got := nvmlPlacements(t, managerOver(t, lib, tc.catalog, path)); !cmp.Equal(got, rightHalf3g) {
				t.Errorf("after the table was read again and another restart: 3g.40gb placements %v, want %v", got, rightHalf3g)
			}
		})
	}
}

// TestSavedProfileTableReadAgainInMIGMode: a saved table is a guess for a
// GPU in MIG-off mode only; in MIG mode NVML's table is read again, as
// nvml.h promises it fixed only for the lifetime of one MIG mode.
func TestSavedProfileTableReadAgainInMIGMode(t *testing.T) {
	sim := rightHalfSim(t)
	path := filepath.Join(t.TempDir(), "nvml-profiles.json")
	readTableOnce(t, sim, path)
	saved := []mig.Placement{{Start: 0, Size: 4}}
	editTables(func(f map[string]any) {
		g := f["gpus"].([]any)[0].(map[string]any)
		g["placements"] = map[string]any{"3g.40gb": saved}
	})(t, path)

	if got := nvmlPlacements(t, managerOver(t, sim, nil, path)); !cmp.Equal(got, saved) {
		t.Fatalf("MIG off: 3g.40gb placements %v, want the saved %v (the edit did not take: the test does not bite)", got, saved)
	}
	// MIG mode turned on by another tool while the agent was away.
	if _, err := managerOver(t, sim, nil, "").SetMIGMode(t.Context(), 0, true); err != nil {
		t.Fatal(err)
	}
	if got := nvmlPlacements(t, managerOver(t, sim, nil, path)); !cmp.Equal(got, rightHalf3g) {
		t.Errorf("started with MIG on: 3g.40gb placements %v, want NVML's %v read again", got, rightHalf3g)
	}
}

// otherDriver is the simulator's NVML reporting another driver version.
type otherDriver struct{ *nvmlsim.Sim }

func (otherDriver) SystemGetDriverVersion() (string, nvml.Return) { return "590.1.2", nvml.SUCCESS }

// editTables rewrites the JSON file at path through edit.
func editTables(edit func(map[string]any)) func(t *testing.T, path string) {
	return func(t *testing.T, path string) {
		t.Helper()
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var f map[string]any
		if err := json.Unmarshal(data, &f); err != nil {
			t.Fatal(err)
		}
		edit(f)
		if data, err = json.Marshal(f); err != nil {
			t.Fatal(err)
		}
		writeFile(t, path, data)
	}
}

func writeFile(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}
