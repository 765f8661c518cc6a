package controller

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/miglayout/miglayout/api/v1alpha1"
	"github.com/miglayout/miglayout/pkg/mig"
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
	actual := mig.MustParseLayout(nml.Status.GPUs[0].Layout)
	model, err := mig.DefaultCatalog().Model("A100-SXM4-80GB")
	if err != nil {
		t.Fatal(err)
	}
	if err := model.ValidateKeeping(c.To, actual); err != nil {
		t.Errorf("cancel writes %q, which the agent refuses: %v", c.To, err)
	}
	// Applied: the GPU holds its spec and is Ready, not changing.
	nml.Spec.GPUs[0].Layout = c.To.String()
	st := &nml.Status.GPUs[0]
	st.Phase, st.Reason, st.Message = v1alpha1.PhaseReady, v1alpha1.ReasonLayoutApplied, "layout applied"
	if g := autoGPUs(nml, mig.DefaultCatalog(), modelVariants{}, nil)[0]; g.Changing {
		t.Errorf("after the cancel is applied the GPU is still changing: %+v", g)
	}
}
