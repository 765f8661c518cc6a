package agent

import (
	"slices"
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/miglayout/miglayout/api/v1alpha1"
	"github.com/miglayout/miglayout/pkg/mig/nvmlsim"
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

// TestRestoreMIGModeOffFails: where the restore that turned MIG mode on
// fails (NVML refuses a create, or a client holds the GPU so that the mode
// does not change), MIG mode is off again and the whole GPU is published in
// no publication of the pass, nor of the next while the claim holds a
// device of it; the next pass makes the device. A claim released before
// then leaves the GPU whole and published.
func TestRestoreMIGModeOffFails(t *testing.T) {
	const held = "gpu-0-mig-3g40gb-9-4"
	tests := map[string]struct {
		// client: an NVML client holds the GPU through the first pass.
		client bool
		// released: the claim is released after the first pass.
		released   bool
		wantReason string
		wantIn     string
		// wantLayout is GPU 0's after the second pass ("-": MIG mode off).
		wantLayout string
	}{
		"create fails": {
			wantReason: v1alpha1.ReasonNVMLError, wantIn: "creating 3g.40gb@4", wantLayout: "3g.40gb@4",
		},
		"client holds the GPU": {
			client: true, wantReason: v1alpha1.ReasonDeviceInUse, wantIn: "enabling MIG mode", wantLayout: "3g.40gb@4",
		},
		"create fails, claim released": {
			released: true, wantReason: v1alpha1.ReasonNVMLError, wantIn: "creating 3g.40gb@4", wantLayout: "-",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			g := newRig(t, "2xH100-SXM5-80GB")
			g.setup(t, 0, "3g.40gb@0,3g.40gb@4")
			g.setup(t, 1, "7g.80gb@0")
			g.alloc.cached = sets.New(held)
			g.prep.names.Insert(held)
			g.reboot(t, 0)
			var client uint64
			if tc.client {
				id, err := g.sim.OpenClient(g.sim.Snapshot().GPUs[0].UUID)
				if err != nil {
					t.Fatal(err)
				}
				client = id
			} else if err := g.sim.InjectFault(nvmlsim.Fault{Op: "CreateGpuInstanceWithPlacement", Nth: 1, Return: nvml.ERROR_UNKNOWN}); err != nil {
				t.Fatal(err)
			}
			// GPU 1 changes in the same pass: its drain publication and
			// its withdrawal come after GPU 0's failed restore.
			want := []v1alpha1.GPUSpec{spec(1, "3g.40gb@0,3g.40gb@4")}
			res, err := g.r.Sync(t.Context(), want, nil)
			if err != nil {
				t.Fatal(err)
			}
			got := res.Results[0]
			if got.Reason != tc.wantReason || !strings.Contains(got.Message, tc.wantIn) || !res.Retry {
				t.Errorf("GPU 0: %+v (retry %v), want reason %s, message with %q, retried", got, res.Retry, tc.wantReason, tc.wantIn)
			}
			if on := g.sim.Snapshot().GPUs[0].MIGCurrent; on {
				t.Error("MIG mode left on after the failed restore")
			}
			for i, p := range g.inv.pubs {
				if slices.Contains(p.devices, "gpu-0") {
					t.Errorf("publication %d publishes the whole GPU 0 while a claim holds %s: %v", i, held, p.devices)
				}
			}
			if tc.client {
				if err := g.sim.CloseClient(client); err != nil {
					t.Fatal(err)
				}
			}
			if tc.released {
				g.alloc.cached = sets.New[string]()
				g.prep.names.Delete(held)
			}
			if _, err := g.r.Sync(t.Context(), want, nil); err != nil {
				t.Fatal(err)
			}
			g.wantLayouts(t, tc.wantLayout, "3g.40gb@0,3g.40gb@4")
			if wantWhole := tc.wantLayout == "-"; slices.Contains(g.inv.last().devices, "gpu-0") != wantWhole {
				t.Errorf("last publication %v, want the whole GPU 0 published %v", g.inv.last().devices, wantWhole)
			}
		})
	}
}

// TestWithheldWholeOnlyForItsOwnClaims: a claim that holds a MIG device of
// a GPU NVML no longer counts (gpu-7) keeps no other GPU with MIG mode off
// out of the pool; one that holds a MIG device of GPU 1 keeps GPU 1 out.
func TestWithheldWholeOnlyForItsOwnClaims(t *testing.T) {
	tests := map[string]struct {
		held      string
		wantWhole bool
	}{
		"a GPU NVML does not count": {held: "gpu-7-mig-3g40gb-9-4", wantWhole: true},
		"the GPU's own":             {held: "gpu-1-mig-3g40gb-9-4", wantWhole: false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			g := newRig(t, "2xA100-SXM4-80GB")
			g.setup(t, 0, "7g.80gb@0")
			g.alloc.cached = sets.New(tc.held)
			if _, err := g.r.Sync(t.Context(), nil, nil); err != nil {
				t.Fatal(err)
			}
			if got := slices.Contains(g.inv.last().devices, "gpu-1"); got != tc.wantWhole {
				t.Errorf("last publication %v: GPU 1 (MIG mode off) published whole %v, want %v", g.inv.last().devices, got, tc.wantWhole)
			}
		})
	}
}
