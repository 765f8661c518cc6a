package controller

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/miglayout/miglayout/api/v1alpha1"
	"github.com/miglayout/miglayout/pkg/mig"
)

// TestDesiredGPUsKeepsWhatBadInputWouldLose: a rule that cannot be applied
// to a GPU (three 3g.40gb and a 1g.10gb do not fit an A100), or no rule for
// it any more, loses nothing and starts nothing: the GPU keeps the layout
// its spec asked for where it holds it, and a change its agent has begun
// is carried out (not left part way); a change not begun is dropped, and a
// GPU the spec did not list stays out of it.
func TestDesiredGPUsKeepsWhatBadInputWouldLose(t *testing.T) {
	const (
		halves = "3g.40gb@0,3g.40gb@4"
		before = `rule "good": profiles 3g.40gb:2`
		bad    = `rule "good" cannot be applied; `
		none   = "no rule matches the GPU now; the change begun is carried out: "
	)
	badRule := rules(rule("good").counts("3g.40gb", 2).counts("1g.10gb", 1))
	otherGPU := rules(rule("good").indices(1).counts("3g.40gb", 2))
	for name, tc := range map[string]struct {
		rules   []v1alpha1.LayoutRule
		gpu     *gpuBuilder
		current []v1alpha1.GPUSpec
		want    []v1alpha1.GPUSpec
	}{
		"bad rule, layout held": {
			rules: badRule, gpu: a100(0).layout(halves), current: []v1alpha1.GPUSpec{specGPU(0, halves, before)},
			want: []v1alpha1.GPUSpec{specGPU(0, halves, bad+"the GPU keeps the layout it holds: "+before)},
		},
		"bad rule, change stopped part way": {
			rules:   badRule,
			gpu:     a100(0).layout("3g.40gb@0").phase(v1alpha1.PhaseFailed, v1alpha1.ReasonNVMLError, "creating GPU instance: ERROR_UNKNOWN"),
			current: []v1alpha1.GPUSpec{specGPU(0, halves, before)},
			want:    []v1alpha1.GPUSpec{specGPU(0, halves, bad+"the change begun is carried out: "+before)},
		},
		"bad rule, change not begun": {
			rules: badRule, gpu: a100(0).layout(wholeLayout), current: []v1alpha1.GPUSpec{specGPU(0, halves, before)},
			want: []v1alpha1.GPUSpec{specGPU(0, wholeLayout, bad+"the change to "+halves+" was dropped before it started")},
		},
		"bad rule, change draining": {
			rules: badRule, gpu: a100(0).layout(wholeLayout).phase(v1alpha1.PhaseDraining, v1alpha1.ReasonDraining, ""),
			current: []v1alpha1.GPUSpec{specGPU(0, halves, before)},
			want:    []v1alpha1.GPUSpec{specGPU(0, wholeLayout, bad+"the change to "+halves+" was dropped before it started")},
		},
		"bad rule, GPU not in the spec": {
			rules: badRule, gpu: a100(0).layout(wholeLayout),
		},
		"no rule any more, change stopped part way": {
			rules:   otherGPU,
			gpu:     a100(0).layout("3g.40gb@0").phase(v1alpha1.PhaseFailed, v1alpha1.ReasonNVMLError, "creating GPU instance: ERROR_UNKNOWN"),
			current: []v1alpha1.GPUSpec{specGPU(0, halves, before)},
			want:    []v1alpha1.GPUSpec{specGPU(0, halves, none+before)},
		},
		"no rule any more, layout held": {
			rules: otherGPU, gpu: a100(0).layout(halves), current: []v1alpha1.GPUSpec{specGPU(0, halves, before)},
		},
		"no rule any more, change not begun": {
			rules: otherGPU, gpu: a100(0).layout(wholeLayout), current: []v1alpha1.GPUSpec{specGPU(0, halves, before)},
		},
	} {
		t.Run(name, func(t *testing.T) {
			got, problems := DesiredGPUs(mig.DefaultCatalog(), tc.rules, inventory(tc.gpu), tc.current)
			wantProblems := 0
			if len(tc.rules[0].GPUIndices) == 0 {
				wantProblems = 1
			}
			if len(problems) != wantProblems {
				t.Errorf("problems %+v, want %d", problems, wantProblems)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("desired GPUs (-want +got):\n%s", diff)
			}
		})
	}
}
