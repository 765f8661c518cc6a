package mig

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func mustModel(t testing.TB, name string) *Model {
	t.Helper()
	m, err := DefaultCatalog().Model(name)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func starts(p *Profile) []int {
	out := make([]int, len(p.Placements))
	for i, pl := range p.Placements {
		out[i] = pl.Start
	}
	return out
}

// TestCatalogModels checks that every model the project promises is present
// with the memory-slice axis and profile geometry that the MIG User Guide
// gives for its family.
func TestCatalogModels(t *testing.T) {
	eight := map[string]struct {
		id, compute, memSlices, maxCount int
		starts                           []int
	}{
		// by position in the profile list: 1g, 1g+me, 1g double memory, 2g, 3g, 4g, 7g
		"1g":  {19, 1, 1, 7, []int{0, 1, 2, 3, 4, 5, 6}},
		"1g+": {20, 1, 1, 1, []int{0, 1, 2, 3, 4, 5, 6}},
		"1g2": {15, 1, 2, 4, []int{0, 2, 4, 6}},
		"2g":  {14, 2, 2, 3, []int{0, 2, 4}},
		"3g":  {9, 3, 4, 2, []int{0, 4}},
		"4g":  {5, 4, 4, 1, []int{0}},
		"7g":  {0, 7, 8, 1, []int{0}},
	}
	order := []string{"1g", "1g+", "1g2", "2g", "3g", "4g", "7g"}
	models := map[string][]string{
		"A100-SXM4-40GB":  {"1g.5gb", "1g.5gb+me", "1g.10gb", "2g.10gb", "3g.20gb", "4g.20gb", "7g.40gb"},
		"A100-PCIE-40GB":  {"1g.5gb", "1g.5gb+me", "1g.10gb", "2g.10gb", "3g.20gb", "4g.20gb", "7g.40gb"},
		"A100-SXM4-80GB":  {"1g.10gb", "1g.10gb+me", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"},
		"A100-PCIE-80GB":  {"1g.10gb", "1g.10gb+me", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"},
		"H100-SXM5-80GB":  {"1g.10gb", "1g.10gb+me", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"},
		"H100-PCIE-80GB":  {"1g.10gb", "1g.10gb+me", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"},
		"H100-NVL-94GB":   {"1g.12gb", "1g.12gb+me", "1g.24gb", "2g.24gb", "3g.47gb", "4g.47gb", "7g.94gb"},
		"H200-SXM5-141GB": {"1g.18gb", "1g.18gb+me", "1g.35gb", "2g.35gb", "3g.71gb", "4g.71gb", "7g.141gb"},
		"B200-180GB":      {"1g.23gb", "1g.23gb+me", "1g.45gb", "2g.45gb", "3g.90gb", "4g.90gb", "7g.180gb"},
	}
	for name, profiles := range models {
		t.Run(name, func(t *testing.T) {
			m := mustModel(t, name)
			if m.MemorySlices != 8 || m.ComputeSlices != 7 || m.MaxInstances != 7 {
				t.Errorf("geometry = %d memory slices, %d compute slices, %d instances; want 8, 7, 7", m.MemorySlices, m.ComputeSlices, m.MaxInstances)
			}
			if diff := cmp.Diff(profiles, m.ProfileNames()); diff != "" {
				t.Fatalf("profiles (-want +got):\n%s", diff)
			}
			for i, pn := range profiles {
				p, _ := m.Profile(pn)
				w := eight[order[i]]
				got := struct {
					id, compute, memSlices, maxCount int
					starts                           []int
				}{p.ID, p.ComputeSlices, p.MemorySlices, p.MaxCount, starts(p)}
				if diff := cmp.Diff(w, got, cmp.AllowUnexported(got)); diff != "" {
					t.Errorf("%s (-want +got):\n%s", pn, diff)
				}
			}
		})
	}
	t.Run("A30-24GB", func(t *testing.T) {
		m := mustModel(t, "A30")
		if m.MemorySlices != 4 || m.ComputeSlices != 4 {
			t.Errorf("geometry = %d/%d, want 4/4", m.MemorySlices, m.ComputeSlices)
		}
		want := map[string][]int{"1g.6gb": {0, 1, 2, 3}, "1g.6gb+me": {0, 1, 2, 3}, "2g.12gb": {0, 2}, "2g.12gb+me": {0, 2}, "4g.24gb": {0}}
		got := map[string][]int{}
		for i := range m.Profiles {
			got[m.Profiles[i].Name] = starts(&m.Profiles[i])
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("placements (-want +got):\n%s", diff)
		}
	})
}

func TestCatalogLookup(t *testing.T) {
	c := DefaultCatalog()
	for _, name := range []string{"A100-SXM4-80GB", "NVIDIA A100-SXM4-80GB", "a100-80gb", "NVIDIA H100 80GB HBM3", "H200", "NVIDIA A30"} {
		if _, err := c.Model(name); err != nil {
			t.Errorf("Model(%q): %v", name, err)
		}
	}
	_, err := c.Model("Tesla T4")
	if !errors.Is(err, ErrUnknownModel) || !strings.Contains(err.Error(), `"Tesla T4"`) || !strings.Contains(err.Error(), "A100-SXM4-80GB") {
		t.Errorf("Model(Tesla T4) error = %v, want ErrUnknownModel naming the input and the known models", err)
	}
	m := mustModel(t, "A100-SXM4-80GB")
	if _, err := m.Profile("3g.20gb"); !errors.Is(err, ErrUnknownProfile) || !strings.Contains(err.Error(), "3g.40gb") {
		t.Errorf("Profile(3g.20gb) on 80GB error = %v, want ErrUnknownProfile listing valid profiles", err)
	}
	if p := m.ProfileByID(9); p == nil || p.Name != "3g.40gb" {
		t.Errorf("ProfileByID(9) = %v, want 3g.40gb", p)
	}
}

// TestCatalogProfilesFitModel checks cross-field consistency that the loader
// does not: memory grows with memory slices and SMs with compute slices.
func TestCatalogProfilesFitModel(t *testing.T) {
	for _, m := range DefaultCatalog().Models() {
		for i := range m.Profiles {
			p := &m.Profiles[i]
			n, err := ParseProfileName(p.Name)
			if err != nil {
				t.Errorf("%s: %v", m.Name, err)
				continue
			}
			if n.ComputeSlices != p.ComputeSlices {
				t.Errorf("%s %s: name says %d compute slices, data %d", m.Name, p.Name, n.ComputeSlices, p.ComputeSlices)
			}
			if p.Multiprocessors > m.Multiprocessors {
				t.Errorf("%s %s: %d SMs exceed the GPU's %d", m.Name, p.Name, p.Multiprocessors, m.Multiprocessors)
			}
			share := float64(p.MemorySlices) / float64(m.MemorySlices) * float64(m.MemoryMiB)
			if float64(p.MemoryMiB) > share*1.01 || float64(p.MemoryMiB) < share*0.85 {
				t.Errorf("%s %s: %d MiB is not about %d/%d of %d MiB", m.Name, p.Name, p.MemoryMiB, p.MemorySlices, m.MemorySlices, m.MemoryMiB)
			}
		}
	}
}
