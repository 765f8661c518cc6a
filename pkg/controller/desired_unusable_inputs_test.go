package controller

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/miglayout/miglayout/api/v1alpha1"
	"github.com/miglayout/miglayout/pkg/mig"
)

// TestDesiredGPUsIgnoresUnusableInputs: what the agent reports and the spec
// written before only steer the fit where they are usable on the GPU's
// model. A reported layout the model cannot hold counts as empty, a device
// in use outside the catalogued layout is not pinned (the reason names it
// as destroyed while in use, as the agent will keep the GPU for it), and a
// layout written
// before that the model cannot hold is not kept: each GPU still gets a valid
// layout for its counts rather than a problem or a layout the agent would
// refuse.
func TestDesiredGPUsIgnoresUnusableInputs(t *testing.T) {
	halves := rules(rule("halves").counts("3g.40gb", 2))
	tests := map[string]struct {
		rules     []v1alpha1.LayoutRule
		inventory []v1alpha1.GPUStatus
		current   []v1alpha1.GPUSpec
		want      []v1alpha1.GPUSpec
	}{
		"a reported layout the model cannot hold counts as empty": {
			rules:     halves,
			inventory: inventory(a100(0).layout("3g.40gb@0,3g.40gb@2")),
			want:      []v1alpha1.GPUSpec{specGPU(0, "3g.40gb@0,3g.40gb@4", `rule "halves": profiles 3g.40gb:2`)},
		},
		"a device in use of a profile the catalog lacks is not pinned (and its destroy is named)": {
			rules:     halves,
			inventory: inventory(a100(0).layout("3g.40gb@0,1g.10gb-me@6").inUse("1g.10gb-me@6")),
			want: []v1alpha1.GPUSpec{specGPU(0, "3g.40gb@0,3g.40gb@4",
				`rule "halves": profiles 3g.40gb:2; destroys 1g.10gb-me@6, in use now`)},
		},
		"a layout written before that the model cannot hold is not kept": {
			rules:     halves,
			inventory: inventory(a100(0).layout("7g.80gb@0")),
			current:   []v1alpha1.GPUSpec{specGPU(0, "3g.40gb@0,3g.40gb@2", `rule "halves": profiles 3g.40gb:2`)},
			want:      []v1alpha1.GPUSpec{specGPU(0, "3g.40gb@0,3g.40gb@4", `rule "halves": profiles 3g.40gb:2`)},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, problems := DesiredGPUs(mig.DefaultCatalog(), tc.rules, tc.inventory, tc.current)
			if len(problems) != 0 {
				t.Errorf("problems %+v, want none", problems)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("desired GPUs (-want +got):\n%s", diff)
			}
		})
	}
}
