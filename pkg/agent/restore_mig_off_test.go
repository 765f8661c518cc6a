package agent

import (
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// TestRestoreHeldMIGModeOff: a GPU back with MIG mode off gets it turned on
// for the devices claims hold only on Hopper and newer (where the mode is
// the driver's and a reboot loses it), and only while nothing holds the
// whole GPU, which the agent publishes while MIG mode is off.
func TestRestoreHeldMIGModeOff(t *testing.T) {
	const held, whole = "gpu-0-mig-3g40gb-9-4", "gpu-0"
	tests := map[string]struct {
		model string
		// allocated, prepared: the whole GPU, in the cache or the plugin.
		allocated, prepared bool
		// disabled: MIG mode turned off by hand after the reboot (Ampere
		// keeps it across one).
		disabled bool
		wantMIG  bool
		// wantLayout: "-" is MIG mode off.
		wantLayout string
		wantReason string
		wantIn     string
	}{
		"Hopper": {
			model: "H100-SXM5-80GB", wantMIG: true, wantLayout: "3g.40gb@4", wantReason: v1alpha1.ReasonDeviceInUse,
		},
		"Hopper, whole GPU allocated": {
			model: "H100-SXM5-80GB", allocated: true, wantLayout: "-", wantReason: v1alpha1.ReasonDeviceInUse,
			wantIn: "in use, not destroyed: gpu-0",
		},
		"Hopper, whole GPU prepared": {
			model: "H100-SXM5-80GB", prepared: true, wantLayout: "-", wantReason: v1alpha1.ReasonDeviceInUse,
			wantIn: "making again gpu-0-mig-3g40gb-9-4, which ResourceClaims hold: in use, MIG mode not turned on: gpu-0",
		},
		"Ampere turned off by hand": {
			model: "A100-SXM4-80GB", disabled: true, wantLayout: "-", wantReason: v1alpha1.ReasonUnknownAllocation,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			g := newRig(t, "1x"+tc.model)
			g.setup(t, 0, "3g.40gb@0,3g.40gb@4")
			g.alloc.cached = sets.New(held)
			g.prep.names.Insert(held)
			want := []v1alpha1.GPUSpec{spec(0, "3g.40gb@0,2g.20gb@4,1g.10gb@6")}
			if _, err := g.r.Sync(t.Context(), want, nil); err != nil {
				t.Fatal(err)
			}
			g.reboot(t, 0)
			if tc.disabled {
				dev, _ := g.sim.DeviceGetHandleByIndex(0)
				if _, ret := dev.SetMigMode(nvml.DEVICE_MIG_DISABLE); ret != nvml.SUCCESS {
					t.Fatal(ret)
				}
			}
			if tc.allocated {
				g.alloc.cached.Insert(whole)
			}
			if tc.prepared {
				g.prep.names.Insert(whole)
			}
			res, err := g.r.Sync(t.Context(), want, nil)
			if err != nil {
				t.Fatal(err)
			}
			if on := g.sim.Snapshot().GPUs[0].MIGCurrent; on != tc.wantMIG {
				t.Errorf("MIG mode on %v, want %v", on, tc.wantMIG)
			}
			g.wantLayouts(t, tc.wantLayout)
			got := res.Results[0]
			if got.Reason != tc.wantReason || !strings.Contains(got.Message, tc.wantIn) {
				t.Errorf("GPU 0: %+v, want reason %s, message with %q", got, tc.wantReason, tc.wantIn)
			}
		})
	}
}
