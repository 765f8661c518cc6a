package gpu_test

import (
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/google/go-cmp/cmp"

	"github.com/miglayout/miglayout/pkg/mig"
	"github.com/miglayout/miglayout/pkg/mig/gpu/gputest"
	"github.com/miglayout/miglayout/pkg/mig/nvmlsim"
)

// TestProfileTableWithMIGModeOff: a GPU whose MIG mode is off and whose
// table was never read gets the table NVML gives with MIG mode off, where
// the driver answers then (580: NVML's values and placements reported
// before MIG mode is turned on), read once while MIG mode stays off and
// again once it is on; where the driver answers NOT_SUPPORTED with MIG mode
// off (nvml.h), the GPU has no table (the catalog's values) and no "NVML
// does not offer it" mismatch, and NVML is not asked again, until MIG mode
// is on.
func TestProfileTableWithMIGModeOff(t *testing.T) {
	want := []mig.NVMLProfileValues{{Profile: "3g.40gb", MemoryMiB: 40600, Multiprocessors: 60, CopyEngines: 3, Decoders: 3, JPEG: 3}}
	for name, tc := range map[string]struct {
		wrap    func(nvml.Interface, *int) nvml.Interface
		wantOff []mig.NVMLProfileValues
	}{
		"driver answering with MIG mode off": {
			wrap:    func(l nvml.Interface, n *int) nvml.Interface { return gputest.ProfileReads{Interface: l, Calls: n} },
			wantOff: want,
		},
		"driver answering only in MIG mode": {
			wrap: func(l nvml.Interface, n *int) nvml.Interface {
				return gputest.ProfileReads{Interface: l, Calls: n, OnlyInMIGMode: true}
			},
		},
	} {
		t.Run(name, func(t *testing.T) {
			sim, err := nvmlsim.New(nvmlsim.Config{Spec: "1xH100-SXM5-80GB", Catalog: driverCatalog(t)})
			if err != nil {
				t.Fatal(err)
			}
			calls := 0
			m := managerOver(t, tc.wrap(sim, &calls), nil, "")
			list := func(step string, want []mig.NVMLProfileValues) {
				t.Helper()
				gpus, err := m.GPUs(t.Context())
				if err != nil {
					t.Fatal(err)
				}
				g := gpus[0]
				if diff := cmp.Diff(want, g.ProfileValues); diff != "" {
					t.Errorf("%s: profile values (-want +got):\n%s", step, diff)
				}
				if want == nil && len(g.CatalogMismatches) > 0 {
					t.Errorf("%s: mismatches %q, want none", step, g.CatalogMismatches)
				}
			}
			list("MIG off", tc.wantOff)
			if calls == 0 {
				t.Fatal("no profile read reached NVML with MIG mode off")
			}
			before := calls
			list("MIG off again", tc.wantOff)
			if calls > before {
				t.Errorf("the second MIG-off listing read NVML's profiles again (%d reads)", calls-before)
			}
			if _, err := m.SetMIGMode(t.Context(), 0, true); err != nil {
				t.Fatal(err)
			}
			before = calls
			list("MIG on", want)
			if calls == before {
				t.Error("the table was not read again once MIG mode was on")
			}
		})
	}
}
