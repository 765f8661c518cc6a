package controller

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/utils/ptr"

	"github.com/miglayout/miglayout/api/v1alpha1"
	"github.com/miglayout/miglayout/pkg/mig"
)

// TestDesiredGPUsRuleAskingForMIGExplicitly: a rule that sets migEnabled
// to true is applied as one that leaves it unset: MIG on, its profiles
// fitted.
func TestDesiredGPUsRuleAskingForMIGExplicitly(t *testing.T) {
	r := rule("halves").counts("3g.40gb", 2).build()
	r.MIGEnabled = ptr.To(true)
	got, problems := DesiredGPUs(mig.DefaultCatalog(), []v1alpha1.LayoutRule{r}, inventory(a100(0)), nil)
	want := []v1alpha1.GPUSpec{specGPU(0, halvesLayout, `rule "halves": profiles 3g.40gb:2`)}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("desired GPUs (-want +got):\n%s", diff)
	}
	if len(problems) != 0 {
		t.Errorf("problems %v, want none", problems)
	}
}

// TestDesiredGPUsProblemNamesTheModelWithoutAProduct: a problem on a GPU
// the agent reported with a model name but no product name names the model.
func TestDesiredGPUsProblemNamesTheModelWithoutAProduct(t *testing.T) {
	g := a100(0).build()
	g.Product = ""
	_, problems := DesiredGPUs(mig.DefaultCatalog(), rules(rule("bad").layout("9g.90gb@0")), []v1alpha1.GPUStatus{g}, nil)
	if len(problems) != 1 || !strings.Contains(problems[0].Message, "gpu 0 (A100-SXM4-80GB), rule \"bad\"") {
		t.Errorf("problems %v, want one naming gpu 0 by its model", problems)
	}
}
