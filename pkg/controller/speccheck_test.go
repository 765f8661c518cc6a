package controller

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/miglayout/miglayout/api/v1alpha1"
	"github.com/miglayout/miglayout/pkg/mig"
)

func TestCheckSpec(t *testing.T) {
	twoNodes := map[string][]v1alpha1.GPUStatus{
		"a": inventory(a100(0), a100(1)),
		"h": inventory(h100(0)),
	}
	static := func(rs ...*ruleBuilder) v1alpha1.MigLayoutSpec {
		return v1alpha1.MigLayoutSpec{Mode: v1alpha1.ModeStatic, Rules: rules(rs...)}
	}
	auto := func(p v1alpha1.AutoPolicy) v1alpha1.MigLayoutSpec {
		return v1alpha1.MigLayoutSpec{Mode: v1alpha1.ModeAuto, Policy: &p}
	}
	tests := map[string]struct {
		spec      v1alpha1.MigLayoutSpec
		inventory map[string][]v1alpha1.GPUStatus
		want      []SpecProblem
	}{
		"every rule decides a GPU": {
			spec:      static(rule("a").product("A100-SXM4-80GB").counts("3g.40gb", 2), rule("h").product("NVIDIA H100 80GB HBM3").counts("7g.80gb", 1)),
			inventory: twoNodes,
		},
		"a product no node has": {
			spec:      static(rule("t4").product("Tesla-T4").counts("7g.80gb", 1)),
			inventory: twoNodes,
			want: []SpecProblem{{Reason: v1alpha1.ReasonRuleMatchesNoGPU,
				Message: `rule "t4" matches no GPU (2 selected nodes; GPUs: 2× A100-SXM4-80GB (NVIDIA A100-SXM4-80GB), 1× H100-SXM5-80GB (NVIDIA H100 80GB HBM3))`}},
		},
		"a GPU index no node has": {
			spec:      static(rule("").indices(5).counts("7g.80gb", 1)),
			inventory: twoNodes,
			want: []SpecProblem{{Reason: v1alpha1.ReasonRuleMatchesNoGPU,
				Message: `rules[0] matches no GPU (2 selected nodes; GPUs: 2× A100-SXM4-80GB (NVIDIA A100-SXM4-80GB), 1× H100-SXM5-80GB (NVIDIA H100 80GB HBM3))`}},
		},
		"a rule shadowed by an earlier one": {
			spec:      static(rule("all").counts("7g.80gb", 1), rule("a100").product("A100-SXM4-80GB").counts("3g.40gb", 2)),
			inventory: twoNodes,
			want: []SpecProblem{{Reason: v1alpha1.ReasonRuleMatchesNoGPU,
				Message: `rule "a100" matches only GPUs an earlier rule decides (2 selected nodes; GPUs: 2× A100-SXM4-80GB (NVIDIA A100-SXM4-80GB), 1× H100-SXM5-80GB (NVIDIA H100 80GB HBM3))`}},
		},
		// As DesiredGPUs, no rule decides a GPU NVML never read.
		"a catch-all rule that reaches only a GPU never read": {
			spec:      static(rule("all").counts("7g.80gb", 1)),
			inventory: map[string][]v1alpha1.GPUStatus{"x": {{Index: 0, Phase: v1alpha1.PhaseFailed, Reason: v1alpha1.ReasonGPUMissing}}},
			want: []SpecProblem{{Reason: v1alpha1.ReasonRuleMatchesNoGPU,
				Message: `rule "all" matches no GPU (1 selected node; GPUs: 1× unknown product)`}},
		},
		"nothing is checked before the agents report": {
			spec: static(rule("t4").product("Tesla-T4").counts("7g.80gb", 1)),
		},
		"Auto without a policy": {
			spec:      v1alpha1.MigLayoutSpec{Mode: v1alpha1.ModeAuto},
			inventory: twoNodes,
		},
		"Auto: allowed profiles some model offers": {
			spec:      auto(v1alpha1.AutoPolicy{AllowedProfiles: []v1alpha1.ProfileName{"3g.40gb", "1g.10gb"}, Spares: map[string]int32{"1g.10gb": 2}}),
			inventory: twoNodes,
		},
		"Auto: an allowed profile of no model": {
			spec:      auto(v1alpha1.AutoPolicy{AllowedProfiles: []v1alpha1.ProfileName{"3g.40gb", "8g.80gb"}}),
			inventory: twoNodes,
			want: []SpecProblem{{Reason: v1alpha1.ReasonProfileNotOffered,
				Message: "allowed profile 8g.80gb is offered by no GPU model of the 2 selected nodes (A100-SXM4-80GB, H100-SXM5-80GB)"}},
		},
		"Auto: a spare profile of no model": {
			spec:      auto(v1alpha1.AutoPolicy{Spares: map[string]int32{"1g.5gb": 1}}),
			inventory: twoNodes,
			want: []SpecProblem{{Reason: v1alpha1.ReasonProfileNotOffered,
				Message: "spare profile 1g.5gb is offered by no GPU model of the 2 selected nodes (A100-SXM4-80GB, H100-SXM5-80GB)"}},
		},
		"Auto: more spares than a node's GPUs hold": {
			spec:      auto(v1alpha1.AutoPolicy{Spares: map[string]int32{"7g.80gb": 2, "3g.40gb": 0}}),
			inventory: twoNodes,
			want: []SpecProblem{{Reason: v1alpha1.ReasonSparesNotHoldable,
				Message: "spares of 2 7g.80gb per node: h holds at most 1 (on its GPUs in MIG mode)"}},
		},
		"Auto: spares that each fit a node but not all at once": {
			spec:      auto(v1alpha1.AutoPolicy{Spares: map[string]int32{"7g.80gb": 1, "4g.40gb": 1}}),
			inventory: twoNodes,
			want: []SpecProblem{{Reason: v1alpha1.ReasonSparesNotHoldable,
				Message: "spares 1× 4g.40gb + 1× 7g.80gb per node do not fit on the GPUs of h all at once"}},
		},
		"Auto: spares that fit all at once": {
			spec:      auto(v1alpha1.AutoPolicy{Spares: map[string]int32{"4g.40gb": 1, "3g.40gb": 1}}),
			inventory: twoNodes,
		},
		"Auto: only GPUs the catalog does not know": {
			spec:      auto(v1alpha1.AutoPolicy{AllowedProfiles: []v1alpha1.ProfileName{"1g.10gb"}}),
			inventory: map[string][]v1alpha1.GPUStatus{"t": inventory(unknownGPU(0))},
			want: []SpecProblem{{Reason: v1alpha1.ReasonProfileNotOffered,
				Message: "allowed profile 1g.10gb is offered by no GPU model of the 1 selected node (none)"}},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := CheckSpec(mig.DefaultCatalog(), &tc.spec, tc.inventory)
			if diff := cmp.Diff(tc.want, got, cmpopts.IgnoreFields(SpecProblem{}, "Subject")); diff != "" {
				t.Errorf("CheckSpec (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDegradedNamesSpecProblems(t *testing.T) {
	obs := Observation{Generation: 3, Mode: v1alpha1.ModeStatic,
		Nodes:        []NodeState{{Row: v1alpha1.NodeRow{Node: "a"}, Ready: true, Reporting: true}},
		SpecProblems: []SpecProblem{{Reason: v1alpha1.ReasonRuleMatchesNoGPU, Message: `rule "t4" matches no GPU`}},
	}
	var got []string
	for _, c := range Conditions(obs) {
		got = append(got, c.Type+" "+string(c.Status)+" "+c.Reason+" "+c.Message)
	}
	want := []string{
		"Ready True AllNodesReady its 1 node holds the desired layout",
		"Progressing False Stable no node is changing",
		`Degraded True RuleMatchesNoGPU 1 spec problem: rule "t4" matches no GPU`,
		"Conflict False NoConflict no other MigLayout selects these nodes",
		"Paused False NotPaused spec.paused is not set",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("conditions (-want +got):\n%s", diff)
	}
}

// TestCheckSpecOnNVMLPlacements: the spec check judges spares on the model
// the Auto planner plans with (NVML's placements, no profile NVML gives
// another GI profile ID), so spares it can never keep are reported.
func TestCheckSpecOnNVMLPlacements(t *testing.T) {
	st := v1alpha1.GPUStatus{Index: 0, Product: "NVIDIA A100-SXM4-80GB", Model: "A100-SXM4-80GB", MIGEnabled: true, MIGPending: true,
		NVMLProfiles: []v1alpha1.NVMLProfile{
			{Profile: "3g.40gb", MemoryMiB: 40192, Multiprocessors: 42, CopyEngines: 3, Decoders: 2, PlacementStarts: []int32{4}},
			{Profile: "2g.20gb", MemoryMiB: 19968, Multiprocessors: 28, CopyEngines: 2, Decoders: 1, GIProfileID: ptr.To[int32](30)},
		}}
	// What the planner plans with on this GPU.
	planned := autoGPUs(&v1alpha1.NodeMigLayout{Status: v1alpha1.NodeMigLayoutStatus{GPUs: []v1alpha1.GPUStatus{st}}}, mig.DefaultCatalog(), modelVariants{}, nil, nil, false)[0].Info.Model
	for name, spares := range map[string]map[string]int32{
		"two 3g.40gb spares, NVML offers one placement": {"3g.40gb": 2},
		"a 2g.20gb spare, a profile the agent refuses":  {"2g.20gb": 1},
	} {
		if mig.HoldTogether([]*mig.Model{planned}, sparesWanted(spares)) {
			t.Fatalf("%s: the planner's model holds %v", name, spares)
		}
		spec := v1alpha1.MigLayoutSpec{Mode: v1alpha1.ModeAuto, Policy: &v1alpha1.AutoPolicy{Spares: spares}}
		if got := CheckSpec(mig.DefaultCatalog(), &spec, map[string][]v1alpha1.GPUStatus{"n1": {st}}); len(got) == 0 {
			t.Errorf("%s: no spec problem, though the planner can never keep spares %v on n1", name, spares)
		}
	}
}

// TestSpecCheckCountsNodesInConflict: a rule for the GPUs of a node another
// MigLayout selects too is written for that node: while the conflict
// lasts (Conflict says so) the rule is not reported as matching no GPU.
func TestSpecCheckCountsNodesInConflict(t *testing.T) {
	h100 := v1alpha1.GPUStatus{Index: 0, Product: "NVIDIA H100 80GB HBM3", Model: "H100-SXM5-80GB", MIGEnabled: true}
	a100 := v1alpha1.GPUStatus{Index: 0, Product: "NVIDIA A100-SXM4-80GB", Model: "A100-SXM4-80GB", MIGEnabled: true}
	nmls := map[string]*v1alpha1.NodeMigLayout{
		"n1": {Status: v1alpha1.NodeMigLayoutStatus{GPUs: []v1alpha1.GPUStatus{a100}}},
		"n2": {Status: v1alpha1.NodeMigLayoutStatus{GPUs: []v1alpha1.GPUStatus{h100}}},
	}
	sel := Selection{Nodes: []string{"n1", "n2"}, Conflicts: map[string][]string{"other": {"n2"}}}
	spec := v1alpha1.MigLayoutSpec{Mode: v1alpha1.ModeStatic, Rules: rules(
		rule("a100").product("A100-SXM4-80GB").counts("7g.80gb", 1),
		rule("h100").product("H100-SXM5-80GB").counts("7g.80gb", 1))}
	if got := CheckSpec(mig.DefaultCatalog(), &spec, SelectedInventory(sel, nmls)); len(got) != 0 {
		t.Errorf("spec problems %+v; want none (rule h100 is for n2, in conflict)", got)
	}
}

// TestSpecCheckNodeInConflictWithoutReport: a node in conflict gets no
// NodeMigLayout from this MigLayout (it is left as it is), so where no
// other MigLayout made one its agent never reports while the conflict
// lasts. The spec check still judges the spec on the nodes that report: a
// rule every GPU of which an earlier rule decides is reported, whatever
// GPUs the node in conflict has.
func TestSpecCheckNodeInConflictWithoutReport(t *testing.T) {
	a100 := v1alpha1.GPUStatus{Index: 0, Product: "NVIDIA A100-SXM4-80GB", Model: "A100-SXM4-80GB", MIGEnabled: true}
	nmls := map[string]*v1alpha1.NodeMigLayout{
		"n1": {Status: v1alpha1.NodeMigLayoutStatus{GPUs: []v1alpha1.GPUStatus{a100}}},
	}
	sel := Selection{Nodes: []string{"n1", "n2"}, Conflicts: map[string][]string{"other": {"n2"}}}
	spec := v1alpha1.MigLayoutSpec{Mode: v1alpha1.ModeStatic, Rules: rules(
		rule("all").counts("7g.80gb", 1),
		rule("a100").product("A100-SXM4-80GB").counts("3g.40gb", 2))}
	got := CheckSpec(mig.DefaultCatalog(), &spec, SelectedInventory(sel, nmls))
	if len(got) != 1 || got[0].Reason != v1alpha1.ReasonRuleMatchesNoGPU {
		t.Errorf("spec problems %+v; want rule \"a100\" reported as matching only GPUs an earlier rule decides", got)
	}
}

// TestNoNodesSelectedIsTold: a MigLayout whose selector selects no node (a
// label typo) is not Ready and is Degraded with reason NoNodes, told once
// by a Warning event; once a node is selected, the problem clears.
func TestNoNodesSelectedIsTold(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ml := staticMigLayout("a", "uid-a", "typo")
	c := fake.NewClientBuilder().WithScheme(testScheme(t)).
		WithObjects(ml, node("n1", map[string]string{"pool": "a"})).
		WithStatusSubresource(&v1alpha1.MigLayout{}, &v1alpha1.NodeMigLayout{}).Build()
	rec := events.NewFakeRecorder(10)
	r := &Reconciler{Client: c, Scheme: c.Scheme(), Recorder: rec}
	req := ctrl.Request{NamespacedName: types.NamespacedName{Name: "a"}}
	conds := func() (ready, degraded *metav1.Condition) {
		t.Helper()
		if _, err := r.Reconcile(ctx, req); err != nil {
			t.Fatal(err)
		}
		var got v1alpha1.MigLayout
		if err := c.Get(ctx, req.NamespacedName, &got); err != nil {
			t.Fatal(err)
		}
		return meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionReady), meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionDegraded)
	}
	var warnings []string
	drain := func() {
		for len(rec.Events) > 0 {
			if e := <-rec.Events; strings.Contains(e, "Warning "+EventNoNodes) {
				warnings = append(warnings, e)
			}
		}
	}
	for range 2 {
		ready, degraded := conds()
		if ready == nil || ready.Status != metav1.ConditionFalse || ready.Reason != v1alpha1.ReasonNoNodes {
			t.Errorf("Ready %+v, want False, NoNodes", ready)
		}
		if degraded == nil || degraded.Status != metav1.ConditionTrue || degraded.Reason != v1alpha1.ReasonNoNodes || !strings.Contains(degraded.Message, "selects no node") {
			t.Errorf("Degraded %+v, want True, NoNodes, saying so", degraded)
		}
		drain()
	}
	if len(warnings) != 1 {
		t.Errorf("NoNodes warnings over two passes: %q, want one", warnings)
	}
	var n corev1.Node
	if err := c.Get(ctx, types.NamespacedName{Name: "n1"}, &n); err != nil {
		t.Fatal(err)
	}
	n.Labels = map[string]string{"pool": "typo"}
	if err := c.Update(ctx, &n); err != nil {
		t.Fatal(err)
	}
	if ready, degraded := conds(); (ready != nil && ready.Reason == v1alpha1.ReasonNoNodes) || (degraded != nil && degraded.Reason == v1alpha1.ReasonNoNodes) {
		t.Errorf("with a node selected: Ready %+v, Degraded %+v; want NoNodes gone", ready, degraded)
	}
}

// TestSelectedInventoryCountsANodeWithoutGPU: a node whose agent reported
// no GPU (observedGeneration set, no GPU row) counts as reported, with no
// GPU, so the spec is judged; one whose agent has not reported holds the
// check back.
func TestSelectedInventoryCountsANodeWithoutGPU(t *testing.T) {
	withGPU := nodeMigLayout("gpu").status(a100(0)).build()
	noGPU := nodeMigLayout("cpu").build()
	noGPU.Status.ObservedGeneration = 1
	silent := nodeMigLayout("silent").build()
	sel := Selection{Nodes: []string{"cpu", "gpu"}}
	got := SelectedInventory(sel, map[string]*v1alpha1.NodeMigLayout{"gpu": withGPU, "cpu": noGPU})
	if want := map[string][]v1alpha1.GPUStatus{"gpu": withGPU.Status.GPUs, "cpu": nil}; !cmp.Equal(got, want, cmpopts.EquateEmpty()) || got == nil {
		t.Errorf("inventory %v, want %v", got, want)
	}
	if _, ok := got["cpu"]; !ok {
		t.Errorf("inventory %v lacks the node that reported no GPU", got)
	}
	sel = Selection{Nodes: []string{"gpu", "silent"}}
	if got := SelectedInventory(sel, map[string]*v1alpha1.NodeMigLayout{"gpu": withGPU, "silent": silent}); got != nil {
		t.Errorf("inventory %v while a node's agent has not reported, want none", got)
	}
}

// TestZeroSpareOfUnofferedProfileIsNoProblem: a spare count of 0 keeps no
// spare (autosnapshot drops it): that no selected GPU offers its profile is
// no spec problem.
func TestZeroSpareOfUnofferedProfileIsNoProblem(t *testing.T) {
	spec := v1alpha1.MigLayoutSpec{Mode: v1alpha1.ModeAuto, Policy: &v1alpha1.AutoPolicy{Spares: map[string]int32{"1g.5gb": 0}}}
	if got := CheckSpec(mig.DefaultCatalog(), &spec, map[string][]v1alpha1.GPUStatus{"n1": inventory(a100(0).layout("7g.80gb@0"))}); len(got) != 0 {
		t.Errorf("spares {1g.5gb: 0}: problems %+v, want none", got)
	}
}
