package controller

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// withT4Rule is MigLayout a (uid-a, generation 1) with a rule for T4s
// before its halves rule: on A100s the T4 rule matches no GPU.
func withT4Rule() *v1alpha1.MigLayout {
	ml := staticMigLayout("a", "uid-a", "a")
	ml.Generation = 1
	ml.Spec.Rules = append(rules(rule("t4").product("Tesla-T4").counts("1g.10gb", 1)), ml.Spec.Rules...)
	return ml
}

// TestStaticEdgesSpecProblemsKeptOnlyForSameGeneration: the spec problems
// found with every node reported are kept, while a node has not reported,
// only for the MigLayout they were found on: the same object (UID) at the
// same generation. A MigLayout made again under the same name, or an
// edited one, is judged afresh once every node has reported.
func TestStaticEdgesSpecProblemsKeptOnlyForSameGeneration(t *testing.T) {
	reported := map[string][]v1alpha1.GPUStatus{"n1": inventory(a100(0))}
	r := &Reconciler{}
	ml := withT4Rule()
	if got := r.specProblemsOf(ml, reported, reported); len(got) != 1 || got[0].Subject != `rule "t4"` {
		t.Fatalf("every node reported: problems %+v, want rule \"t4\" matching no GPU", got)
	}
	recreated := withT4Rule()
	recreated.UID = "uid-b"
	edited := withT4Rule()
	edited.Generation = 2
	tests := map[string]struct {
		ml   *v1alpha1.MigLayout
		want []string
	}{
		"same MigLayout, same generation": {ml: ml, want: []string{`rule "t4"`}},
		"made again under the same name":  {ml: recreated},
		"edited since":                    {ml: edited},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var got []string
			for _, p := range r.specProblemsOf(tc.ml, nil, reported) {
				got = append(got, p.Subject)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("problems kept while n2 has not reported (-want +got):\n%s", diff)
			}
		})
	}
}

// TestStaticEdgesReportedSpecProblems: after a restart, a problem found
// again on the nodes that have reported is kept only where the MigLayout's
// Degraded condition, True for its current generation, has the problem's
// subject as one of its messages begins; a message that only mentions the
// rule (a GPU's problem with it) does not name the problem.
func TestStaticEdgesReportedSpecProblems(t *testing.T) {
	still := []SpecProblem{{Reason: v1alpha1.ReasonRuleMatchesNoGPU, Subject: `rule "t4"`, Message: `rule "t4" matches no GPU`}}
	const named = `rule "t4" matches no GPU (1 selected node; GPUs: 1× A100-SXM4-80GB (NVIDIA A100-SXM4-80GB))`
	tests := map[string]struct {
		status     metav1.ConditionStatus
		generation int64
		message    string
		want       int
	}{
		"True for this generation, named": {status: metav1.ConditionTrue, generation: 1, message: named, want: 1},
		"False":                           {status: metav1.ConditionFalse, generation: 1, message: named},
		"True for an older generation":    {status: metav1.ConditionTrue, generation: 0, message: named},
		"only a GPU's problem with the rule": {
			status: metav1.ConditionTrue, generation: 1,
			message: `gpu 0 (NVIDIA A100-SXM4-80GB), rule "t4": fitting profiles: does not fit`,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			ml := withT4Rule()
			ml.Status.Conditions = []metav1.Condition{{
				Type: v1alpha1.ConditionDegraded, Status: tc.status, ObservedGeneration: tc.generation,
				Reason: v1alpha1.ReasonRuleMatchesNoGPU, Message: tc.message,
			}}
			got := reportedSpecProblems(ml, append([]SpecProblem(nil), still...))
			if len(got) != tc.want {
				t.Errorf("problems kept %+v, want %d", got, tc.want)
			}
		})
	}
}
