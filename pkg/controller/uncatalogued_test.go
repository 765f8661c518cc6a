package controller

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/utils/ptr"

	"github.com/miglayout/miglayout/api/v1alpha1"
	"github.com/miglayout/miglayout/pkg/mig"
	migslices "github.com/miglayout/miglayout/pkg/slices"
)

// TestCancelKeepsUncataloguedGI: an Auto change that plans away a free GPU
// instance of a profile the catalog lacks is cancelled when a claim takes
// that device before the drain; the cancel writes the layout the GPU
// holds, which the agent accepts (the instance is kept as it stands), so
// the GPU does not stay changing and hold its node's change slot.
func TestCancelKeepsUncataloguedGI(t *testing.T) {
	nml := &v1alpha1.NodeMigLayout{ObjectMeta: metav1.ObjectMeta{Name: "n1"},
		Spec: v1alpha1.NodeMigLayoutSpec{GPUs: []v1alpha1.GPUSpec{{Index: 0, MIGEnabled: true, Layout: "4g.40gb@0,3g.40gb@4"}}},
		Status: v1alpha1.NodeMigLayoutStatus{GPUs: []v1alpha1.GPUStatus{{Index: 0, Model: "A100-SXM4-80GB", MIGEnabled: true, MIGPending: true,
			Layout: "4g.40gb@0,1g.10gb-me@6", InUse: "1g.10gb-me@6", Phase: v1alpha1.PhaseBlocked, Reason: v1alpha1.ReasonDeviceInUse, Message: "in use"}}}}
	c, ok := cancelOf(nml, 0)
	if !ok {
		t.Fatal("no cancel")
	}
	model, err := mig.DefaultCatalog().Model("A100-SXM4-80GB")
	if err != nil {
		t.Fatal(err)
	}
	held := map[mig.Device]mig.HeldInstance{{Profile: "1g.10gb-me", Start: 6}: {Placement: mig.Placement{Start: 6, Size: 1}}} // what NVML says of it
	if err := model.ValidateKeeping(c.To, held); err != nil {
		t.Errorf("cancel writes %q, which the agent refuses: %v", c.To, err)
	}
	// Applied: the GPU holds its spec and is Ready, not changing.
	nml.Spec.GPUs[0].Layout = c.To.String()
	st := &nml.Status.GPUs[0]
	st.Phase, st.Reason, st.Message = v1alpha1.PhaseReady, v1alpha1.ReasonLayoutApplied, "layout applied"
	if g := autoGPUs(nml, mig.DefaultCatalog(), modelVariants{}, nil, nil, false)[0]; g.Changing {
		t.Errorf("after the cancel is applied the GPU is still changing: %+v", g)
	}
}

// TestAllocatedUncataloguedGIPinned: a GPU instance of a profile the
// catalog lacks that a claim holds (allocated before the agent's status
// says so; published under NVML's GI profile ID) is pinned like a
// catalogued one, so no plan destroys it.
func TestAllocatedUncataloguedGIPinned(t *testing.T) {
	for name, tc := range map[string]struct{ layout, device, allocated string }{
		"catalogued":   {"4g.40gb@0,1g.10gb@6", "1g.10gb@6", migslices.MIGDeviceName(0, "1g.10gb", 19, 6)},
		"uncatalogued": {"4g.40gb@0,1g.10gb-me@6", "1g.10gb-me@6", migslices.MIGDeviceName(0, "1g.10gb-me", 21, 6)}, // as the agent publishes it
	} {
		nml := nodeMigLayout("n1").spec(specGPU(0, tc.layout, "")).
			status(a100(0).layout(tc.layout).phase(v1alpha1.PhaseReady, v1alpha1.ReasonLayoutApplied, "")).build()
		gpus := autoGPUs(nml, mig.DefaultCatalog(), modelVariants{}, sets.New(tc.allocated), nil, false)
		if len(gpus) != 1 || !gpus[0].Pinned.Contains(mig.MustParseLayout(tc.device)[0]) {
			t.Errorf("%s: %s allocated (%s) but pinned %q", name, tc.device, tc.allocated, gpus[0].Pinned)
		}
	}
}

// TestLayoutsKeepToNVMLPlacements: where a GPU's agent reports that NVML
// offers a profile at other placements than the catalog, or gives one
// another GI profile ID, Static rules and the Auto planner keep to what
// NVML offers (the agent refuses the rest).
func TestLayoutsKeepToNVMLPlacements(t *testing.T) {
	st := v1alpha1.GPUStatus{Index: 0, Model: "A100-SXM4-80GB", MIGEnabled: true, MIGPending: true,
		NVMLProfiles: []v1alpha1.NVMLProfile{
			{Profile: "3g.40gb", MemoryMiB: 40192, Multiprocessors: 42, CopyEngines: 3, Decoders: 2, JPEGEngines: 0, PlacementStarts: []int32{0}},
			{Profile: "2g.20gb", MemoryMiB: 19968, Multiprocessors: 28, CopyEngines: 2, Decoders: 1, GIProfileID: ptr.To[int32](30)},
			{Profile: "1g.20gb", MemoryMiB: 19968, Multiprocessors: 14, CopyEngines: 1, Decoders: 1, NotOffered: true},
		}}
	for name, tc := range map[string]struct {
		rule       v1alpha1.LayoutRule
		want, fail string
	}{
		// The catalog's fit puts one 3g at the right half (room for a 4g).
		"one 3g goes where NVML offers it": {rule: v1alpha1.LayoutRule{Profiles: map[string]int32{"3g.40gb": 1}}, want: "3g.40gb@0"},
		"two 3g do not fit":                {rule: v1alpha1.LayoutRule{Profiles: map[string]int32{"3g.40gb": 2}}, fail: "3g.40gb"},
		"an explicit 3g at 4":              {rule: v1alpha1.LayoutRule{Layout: ptr.To("3g.40gb@4")}, fail: "valid starts: 0"},
		"a 2g NVML gives another ID":       {rule: v1alpha1.LayoutRule{Profiles: map[string]int32{"2g.20gb": 1}}, fail: "2g.20gb"},
		"a 1g.20gb NVML does not offer":    {rule: v1alpha1.LayoutRule{Profiles: map[string]int32{"1g.20gb": 1}}, fail: "1g.20gb"},
	} {
		specs, problems := DesiredGPUs(mig.DefaultCatalog(), []v1alpha1.LayoutRule{tc.rule}, []v1alpha1.GPUStatus{st}, nil)
		switch {
		case tc.fail != "":
			if len(problems) != 1 || problems[0].Reason != v1alpha1.ReasonInvalidLayout || !strings.Contains(problems[0].Message, tc.fail) {
				t.Errorf("%s: specs %+v problems %+v, want InvalidLayout naming %q", name, specs, problems, tc.fail)
			}
		case len(specs) != 1 || specs[0].Layout != tc.want:
			t.Errorf("%s: specs %+v problems %+v, want %s", name, specs, problems, tc.want)
		}
	}

	// Auto: the planner's model of the GPU is NVML's.
	nml := &v1alpha1.NodeMigLayout{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Status: v1alpha1.NodeMigLayoutStatus{GPUs: []v1alpha1.GPUStatus{st}}}
	g := autoGPUs(nml, mig.DefaultCatalog(), modelVariants{}, nil, nil, false)[0]
	if err := g.Info.Model.Validate(mig.MustParseLayout("3g.40gb@4")); err == nil {
		t.Error("the Auto planner may plan 3g.40gb@4")
	}
	for _, prof := range []string{"2g.20gb", "1g.20gb"} {
		if _, err := g.Info.Model.Profile(prof); err == nil {
			t.Errorf("the Auto planner may plan a %s", prof)
		}
	}
}
