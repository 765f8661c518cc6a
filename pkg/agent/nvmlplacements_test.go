package agent

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/miglayout/miglayout/api/v1alpha1"
	"github.com/miglayout/miglayout/pkg/controller"
	"github.com/miglayout/miglayout/pkg/mig"
)

// TestControllerAndAgentAgreeOnNVMLPlacements: the A100's driver offers
// 2g.20gb at a fourth placement (start 6) the catalog lacks. The agent
// reports it (nvmlProfiles.placementStarts 0,2,4,6); whatever the
// controller then writes into the spec, the agent applies (it validates
// and creates with the catalog's placements, so the controller plans none
// that only NVML offers).
func TestControllerAndAgentAgreeOnNVMLPlacements(t *testing.T) {
	a100, err := mig.DefaultCatalog().Model("A100-SXM4-80GB")
	if err != nil {
		t.Fatal(err)
	}
	two, _ := a100.Profile("2g.20gb")
	four := *two
	four.Placements = []mig.Placement{{Start: 0, Size: 2}, {Start: 2, Size: 2}, {Start: 4, Size: 2}, {Start: 6, Size: 2}}
	g := newA100RigWith(t, four)
	g.setup(t, 0, "1g.10gb@0")
	res, err := g.r.Sync(t.Context(), []v1alpha1.GPUSpec{spec(0, "1g.10gb@0")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	st := BuildStatus(v1alpha1.NodeMigLayoutStatus{}, 1, res, metav1.Now())
	if ps := st.GPUs[0].NVMLProfiles; len(ps) != 1 || len(ps[0].PlacementStarts) != 4 {
		t.Fatalf("nvmlProfiles %+v, want 2g.20gb at four starts", ps)
	}

	// Whatever the controller, with the agent's status, writes into the
	// spec, the agent must apply (NVML offers 2g.20gb@6).
	for _, rule := range []v1alpha1.LayoutRule{
		{Layout: ptr.To("3g.40gb@0,2g.20gb@4,2g.20gb@6")},
		{Profiles: map[string]int32{"2g.20gb": 3, "1g.10gb": 1}},
	} {
		specs, problems := controller.DesiredGPUs(mig.DefaultCatalog(), []v1alpha1.LayoutRule{rule}, st.GPUs, nil)
		if len(specs) == 0 {
			if len(problems) == 0 || problems[0].Reason != v1alpha1.ReasonInvalidLayout {
				t.Errorf("rule %+v: no spec and problems %+v", rule, problems)
			}
			continue // refused by the controller, as the agent would
		}
		res, err = g.r.Sync(t.Context(), specs, nil)
		if err != nil {
			t.Fatal(err)
		}
		if r := res.Results[0]; r.Phase != v1alpha1.PhaseReady {
			t.Errorf("the agent refuses the controller's spec %q: %+v", specs[0].Layout, r)
		}
	}
}
