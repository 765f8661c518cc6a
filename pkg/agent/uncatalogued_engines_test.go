package agent

import (
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/google/go-cmp/cmp"

	"github.com/miglayout/miglayout/api/v1alpha1"
	"github.com/miglayout/miglayout/pkg/mig"
	"github.com/miglayout/miglayout/pkg/mig/gpu"
	"github.com/miglayout/miglayout/pkg/mig/nvmlsim"
)

// TestSyncKeptUncataloguedEnginesCount: an A100 holds a GPU instance of a
// newer driver's 1g.10gb+me.all profile (the GPU's one NVJPG and one OFA),
// which the agent's catalog lacks. A spec that keeps it and adds a
// 1g.10gb+me (which needs both engines too) is refused before any change
// (InvalidLayout), rather than destroying devices and then having the
// create refused by NVML (INSUFFICIENT_RESOURCES), GPU half done.
func TestSyncKeptUncataloguedEnginesCount(t *testing.T) {
	allME := mig.Profile{Name: "1g.10gb+me.all", ID: 22, NVMLProfile: nvml.GPU_INSTANCE_PROFILE_1_SLICE_ALL_ME, ComputeSlices: 1, MemorySlices: 1,
		MemoryMiB: 9856, MaxCount: 1, Multiprocessors: 14, CopyEngines: 1, Decoders: 1, JPEGEngines: 1, OFAEngines: 1,
		Placements: []mig.Placement{{Start: 0, Size: 1}, {Start: 1, Size: 1}, {Start: 2, Size: 1}, {Start: 3, Size: 1}, {Start: 4, Size: 1}, {Start: 5, Size: 1}, {Start: 6, Size: 1}}}
	hardware, err := nvmlsim.CatalogWithProfiles(nil, "A100-SXM4-80GB", allME)
	if err != nil {
		t.Fatal(err)
	}
	g := newRigWith(t, nvmlsim.Config{Spec: "1xA100-SXM4-80GB", Catalog: hardware})
	hm, err := gpu.NewNVML(g.sim, hardware)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = hm.Shutdown() })
	ctx := t.Context()
	g.setup(t, 0, "1g.10gb@2,3g.40gb@4")
	if _, err := hm.CreateMIGDevice(ctx, 0, mig.Device{Profile: "1g.10gb+me.all", Start: 0}); err != nil {
		t.Fatal(err)
	}
	before := g.layouts(t)
	res, err := g.r.Sync(ctx, []v1alpha1.GPUSpec{spec(0, "1g.10gb+me.all@0,1g.10gb+me@1,3g.40gb@4")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r := res.Results[0]; r.Phase != v1alpha1.PhaseFailed || r.Reason != v1alpha1.ReasonInvalidLayout {
		t.Errorf("result %+v, want Failed/InvalidLayout", r)
	}
	if diff := cmp.Diff(before, g.layouts(t)); diff != "" {
		t.Errorf("layout changed (-before +after):\n%s", diff)
	}
	for _, p := range g.inv.pubs {
		if len(p.draining) > 0 {
			t.Errorf("drained %v, want nothing touched", p.draining)
		}
	}
}
