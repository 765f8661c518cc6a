package mig

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestCatalogCoversGuideGPUs: the MIG User Guide's "Supported GPUs" table
// lists "H100 on GH200" (96GB) and "H200 NVL" (141GB), and "Supported MIG
// Profiles" > "H100 MIG Profiles" has the profile names of "the H100 96GB
// product (H100 on GH200)": 1g.12gb (7), 1g.12gb+me (1), 1g.24gb (4),
// 2g.24gb (3), 3g.48gb (2), 4g.48gb (1), 7g.96gb (1). "H200 MIG Profiles"
// covers the "H200 141GB product" (SXM and NVL). NVML names the boards
// "NVIDIA GH200 480GB" and "NVIDIA H200 NVL".
func TestCatalogCoversGuideGPUs(t *testing.T) {
	c := DefaultCatalog()
	for name, want := range map[string][]string{
		"NVIDIA GH200 480GB": {"1g.12gb", "1g.12gb+me", "1g.24gb", "2g.24gb", "3g.48gb", "4g.48gb", "7g.96gb"},
		"NVIDIA H200 NVL":    {"1g.18gb", "1g.18gb+me", "1g.35gb", "2g.35gb", "3g.71gb", "4g.71gb", "7g.141gb"},
	} {
		m, err := c.Model(name)
		if err != nil {
			t.Errorf("Model(%q): %v", name, err)
			continue
		}
		if got := m.ProfileNames(); !slices.Equal(got, want) {
			t.Errorf("%s profiles = %v, want %v", name, got, want)
		}
	}
}

// TestEngineTotalsSurviveDroppedFullProfile: the GPU's NVJPG/OFA totals are
// the GPU's, whatever profiles a variant keeps: where NVML does not offer the
// full-size profile (WithNVMLPlacements), an H100 still has 7 JPEG decoders
// ("H100 MIG Profiles": 1g 1 JPEG, 3g 3, 4g 4, 7g 7), so seven 1g.10gb and
// 4g.40gb+3g.40gb stay valid.
func TestEngineTotalsSurviveDroppedFullProfile(t *testing.T) {
	m := mustModel(t, "H100-SXM5-80GB")
	v, err := m.WithNVMLPlacements(nil, []string{"7g.80gb"})
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range []string{
		"1g.10gb@0,1g.10gb@1,1g.10gb@2,1g.10gb@3,1g.10gb@4,1g.10gb@5,1g.10gb@6",
		"4g.40gb@0,3g.40gb@4",
	} {
		if err := m.Validate(MustParseLayout(l)); err != nil {
			t.Fatalf("catalog model refuses %s: %v", l, err)
		}
		if err := v.Validate(MustParseLayout(l)); err != nil {
			t.Errorf("variant without 7g.80gb refuses %s: %v", l, err)
		}
	}
	if _, err := v.Fit(FitRequest{Want: map[string]int{"1g.10gb": 7}}); err != nil {
		t.Errorf("variant without 7g.80gb: Fit of seven 1g.10gb: %v", err)
	}
}

// TestCatalogMemoryMatchesPublishedLGIP: the catalog's H100 memory values
// are those of the `nvidia-smi mig -lgip` outputs hopper.yaml cites as
// [lgip] (an H100 80GB HBM3 and an H100 NVL) and [lgip-h100pcie]. nvidia-smi
// prints GiB to two decimals, so 6 MiB are allowed.
func TestCatalogMemoryMatchesPublishedLGIP(t *testing.T) {
	for model, want := range map[string]map[string]int64{
		"H100-PCIE-80GB": { // 9.75, 19.62, 39.50, 79.25 GiB
			"1g.10gb": 9984, "1g.10gb+me": 9984, "1g.20gb": 20096, "2g.20gb": 20096, "3g.40gb": 40448, "4g.40gb": 40448, "7g.80gb": 81152,
		},
		"H100-SXM5-80GB": { // 9.75, 19.62, 39.50, 79.25 GiB
			"1g.10gb": 9984, "1g.20gb": 20096, "3g.40gb": 40448, "4g.40gb": 40448, "7g.80gb": 81152,
		},
		"H100-NVL-94GB": { // 10.75, 21.62, 46.38, 93.12 GiB
			"1g.12gb": 11008, "1g.24gb": 22144, "2g.24gb": 22144, "3g.47gb": 47488, "7g.94gb": 95360,
		},
	} {
		m := mustModel(t, model)
		for name, mib := range want {
			p, err := m.Profile(name)
			if err != nil {
				t.Fatal(err)
			}
			if d := p.MemoryMiB - mib; d < -6 || d > 6 {
				t.Errorf("%s %s: memoryMiB %d, nvidia-smi reports %d", model, name, p.MemoryMiB, mib)
			}
		}
	}
}

// TestH100PCIeMultiprocessors: the H100 PCIe's 114 multiprocessors are not
// split as the H100 SXM's 132 are scaled: [lgip-h100pcie] gives 14, 14, 14,
// 30, 46, 62 and 114.
func TestH100PCIeMultiprocessors(t *testing.T) {
	m := mustModel(t, "H100-PCIE-80GB")
	got := map[string]int{}
	for _, p := range m.Profiles {
		got[p.Name] = p.Multiprocessors
	}
	want := map[string]int{"1g.10gb": 14, "1g.10gb+me": 14, "1g.20gb": 14, "2g.20gb": 30, "3g.40gb": 46, "4g.40gb": 62, "7g.80gb": 114}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("multiprocessors per profile (-want +got):\n%s", diff)
	}
}

// TestB200CopyEngines: "Supported MIG Profiles" > "B200 MIG Profiles" gives
// Copy Engines 2, 2, 2, 3, 6, 8, 16 for 1g.23gb, 1g.23gb+me, 1g.45gb,
// 2g.45gb, 3g.90gb, 4g.90gb, 7g.180gb; where `nvidia-smi mig -lgip` on a
// B200 says otherwise (2g.45gb: 4 on two driver releases, NVIDIA/mig-parted
// PRs #166 and #187), the catalog follows NVML, which the agent publishes.
func TestB200CopyEngines(t *testing.T) {
	m := mustModel(t, "B200-180GB")
	for name, ce := range map[string]int{"1g.23gb": 2, "1g.23gb+me": 2, "1g.45gb": 2, "2g.45gb": 4, "3g.90gb": 6, "4g.90gb": 8, "7g.180gb": 16} {
		p, err := m.Profile(name)
		if err != nil {
			t.Fatal(err)
		}
		if p.CopyEngines != ce {
			t.Errorf("B200 %s: copyEngines %d, the guide says %d", name, p.CopyEngines, ce)
		}
	}
}
