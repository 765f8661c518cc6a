package controller

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2/ktesting"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

func TestEvaluateNode(t *testing.T) {
	halves := specGPU(0, "3g.40gb@0,3g.40gb@4", "")
	tests := map[string]struct {
		nml      *v1alpha1.NodeMigLayout
		problems []Problem
		agent    AgentHealth
		want     NodeState
	}{
		"not created yet": {
			want: NodeState{Row: v1alpha1.NodeRow{Node: "n", Phase: v1alpha1.PhasePending, Message: msgNoReport}},
		},
		"agent has not reported": {
			nml:  nodeMigLayout("n").build(),
			want: NodeState{Row: v1alpha1.NodeRow{Node: "n", Phase: v1alpha1.PhasePending, Message: msgNoReport}},
		},
		// The agent wrote its status (observedGeneration), finding no GPU.
		"agent reports no GPU on the node": {
			nml: func() *v1alpha1.NodeMigLayout {
				n := nodeMigLayout("n").build()
				n.Status.ObservedGeneration = 1
				return n
			}(),
			want: NodeState{Reporting: true, Ready: true, Row: v1alpha1.NodeRow{Node: "n", Phase: v1alpha1.PhaseReady, Message: msgNoGPU}},
		},
		"no GPU in the spec: nothing to wait for": {
			nml: nodeMigLayout("n").status(a100(0)).build(),
			want: NodeState{Reporting: true, Ready: true,
				Row: v1alpha1.NodeRow{Node: "n", Phase: v1alpha1.PhaseReady}},
		},
		"ready": {
			nml: nodeMigLayout("n").spec(halves, specMIGOff(1, "")).
				status(a100(0).layout("3g.40gb@4,3g.40gb@0"), a100(1).migOff()).build(),
			want: NodeState{Reporting: true, Ready: true, Row: v1alpha1.NodeRow{Node: "n", Phase: v1alpha1.PhaseReady, GPUs: []v1alpha1.GPURow{
				{Index: 0, Product: "NVIDIA A100-SXM4-80GB", Desired: "3g.40gb@0,3g.40gb@4", Actual: "3g.40gb@4,3g.40gb@0", Phase: v1alpha1.PhaseReady},
				{Index: 1, Product: "NVIDIA A100-SXM4-80GB", Desired: "-", Actual: "-", Phase: v1alpha1.PhaseReady},
			}}},
		},
		"the agent has not caught up with a new spec": {
			nml: nodeMigLayout("n").spec(halves).status(a100(0).layout("7g.80gb@0")).build(),
			want: NodeState{Reporting: true, Progressing: true, Row: v1alpha1.NodeRow{
				Node: "n", Phase: v1alpha1.PhasePending,
				Message: `gpu 0: Pending: actual "7g.80gb@0", desired "3g.40gb@0,3g.40gb@4"`,
				GPUs:    []v1alpha1.GPURow{{Index: 0, Product: "NVIDIA A100-SXM4-80GB", Desired: "3g.40gb@0,3g.40gb@4", Actual: "7g.80gb@0", Phase: v1alpha1.PhasePending}},
			}},
		},
		"MIG mode still differs": {
			nml: nodeMigLayout("n").spec(specMIGOff(0, "")).status(a100(0)).build(),
			want: NodeState{Reporting: true, Progressing: true, Row: v1alpha1.NodeRow{
				Node: "n", Phase: v1alpha1.PhasePending, Message: `gpu 0: Pending: actual "", desired "-"`,
				GPUs: []v1alpha1.GPURow{{Index: 0, Product: "NVIDIA A100-SXM4-80GB", Desired: "-", Actual: "", Phase: v1alpha1.PhasePending}},
			}},
		},
		"draining": {
			nml: nodeMigLayout("n").spec(halves).status(a100(0).layout("7g.80gb@0").phase(v1alpha1.PhaseDraining, "", "")).build(),
			want: NodeState{Reporting: true, Progressing: true, Changing: true, Row: v1alpha1.NodeRow{
				Node: "n", Phase: v1alpha1.PhaseDraining, Message: "gpu 0: Draining to 3g.40gb@0,3g.40gb@4",
				GPUs: []v1alpha1.GPURow{{Index: 0, Product: "NVIDIA A100-SXM4-80GB", Desired: "3g.40gb@0,3g.40gb@4", Actual: "7g.80gb@0", Phase: v1alpha1.PhaseDraining}},
			}},
		},
		"blocked": {
			nml: nodeMigLayout("n").spec(halves).
				status(a100(0).layout("7g.80gb@0").phase(v1alpha1.PhaseBlocked, v1alpha1.ReasonDeviceInUse, "7g.80gb@0 is allocated to claim ns/c")).build(),
			want: NodeState{Reporting: true, Failed: true,
				Stuck: []StuckGPU{{GPU: 0, Phase: v1alpha1.PhaseBlocked, Reason: v1alpha1.ReasonDeviceInUse, Message: "7g.80gb@0 is allocated to claim ns/c"}},
				Row: v1alpha1.NodeRow{
					Node: "n", Phase: v1alpha1.PhaseBlocked, Message: "gpu 0: Blocked (DeviceInUse): 7g.80gb@0 is allocated to claim ns/c",
					GPUs: []v1alpha1.GPURow{{Index: 0, Product: "NVIDIA A100-SXM4-80GB", Desired: "3g.40gb@0,3g.40gb@4", Actual: "7g.80gb@0", Phase: v1alpha1.PhaseBlocked}},
				}},
		},
		"a GPU of the spec is not reported": {
			nml: nodeMigLayout("n").spec(specGPU(3, "7g.80gb@0", "")).status(a100(0)).build(),
			want: NodeState{Reporting: true, Progressing: true, Row: v1alpha1.NodeRow{
				Node: "n", Phase: v1alpha1.PhasePending, Message: "gpu 3: not reported by the agent",
				GPUs: []v1alpha1.GPURow{{Index: 3, Desired: "7g.80gb@0", Phase: v1alpha1.PhasePending}},
			}},
		},
		"a rule that failed makes the node failed, the GPU is listed": {
			nml:      nodeMigLayout("n").spec(specGPU(1, "7g.80gb@0", "")).status(a100(0).layout("1g.10gb@0"), a100(1).layout("7g.80gb@0")).build(),
			problems: []Problem{{GPU: 0, Product: "NVIDIA A100-SXM4-80GB", Reason: v1alpha1.ReasonInvalidLayout, Message: "gpu 0: no"}},
			want: NodeState{Reporting: true, Failed: true,
				Problems: []Problem{{GPU: 0, Product: "NVIDIA A100-SXM4-80GB", Reason: v1alpha1.ReasonInvalidLayout, Message: "gpu 0: no"}},
				Row: v1alpha1.NodeRow{
					Node: "n", Phase: v1alpha1.PhaseFailed, Message: "InvalidLayout: gpu 0: no",
					GPUs: []v1alpha1.GPURow{
						{Index: 0, Product: "NVIDIA A100-SXM4-80GB", Desired: "1g.10gb@0", Actual: "1g.10gb@0", Phase: v1alpha1.PhaseFailed}, // left as it is
						{Index: 1, Product: "NVIDIA A100-SXM4-80GB", Desired: "7g.80gb@0", Actual: "7g.80gb@0", Phase: v1alpha1.PhaseReady},
					},
				}},
		},
		"a rule that failed alike on two GPUs is told once in the row": {
			nml: nodeMigLayout("n").status(a100(0).layout("1g.10gb@0"), a100(1).layout("7g.80gb@0")).build(),
			problems: []Problem{
				{GPU: 0, Product: "NVIDIA A100-SXM4-80GB", Reason: v1alpha1.ReasonInvalidLayout, Message: "gpu 0 (NVIDIA A100-SXM4-80GB), rule \"r\": too many"},
				{GPU: 1, Product: "NVIDIA A100-SXM4-80GB", Reason: v1alpha1.ReasonInvalidLayout, Message: "gpu 1 (NVIDIA A100-SXM4-80GB), rule \"r\": too many"},
			},
			want: NodeState{Reporting: true, Failed: true,
				Problems: []Problem{
					{GPU: 0, Product: "NVIDIA A100-SXM4-80GB", Reason: v1alpha1.ReasonInvalidLayout, Message: "gpu 0 (NVIDIA A100-SXM4-80GB), rule \"r\": too many"},
					{GPU: 1, Product: "NVIDIA A100-SXM4-80GB", Reason: v1alpha1.ReasonInvalidLayout, Message: "gpu 1 (NVIDIA A100-SXM4-80GB), rule \"r\": too many"},
				},
				Row: v1alpha1.NodeRow{
					Node: "n", Phase: v1alpha1.PhaseFailed, Message: "InvalidLayout: gpus 0, 1 (NVIDIA A100-SXM4-80GB), rule \"r\": too many",
					GPUs: []v1alpha1.GPURow{
						{Index: 0, Product: "NVIDIA A100-SXM4-80GB", Desired: "1g.10gb@0", Actual: "1g.10gb@0", Phase: v1alpha1.PhaseFailed},
						{Index: 1, Product: "NVIDIA A100-SXM4-80GB", Desired: "7g.80gb@0", Actual: "7g.80gb@0", Phase: v1alpha1.PhaseFailed},
					},
				}},
		},
		"a lost agent: Unknown, neither Ready nor Progressing, GPUs as last reported": {
			nml:   nodeMigLayout("n").spec(halves).status(a100(0).layout("3g.40gb@0,3g.40gb@4")).build(),
			agent: AgentHealth{Lost: true, Message: "no heartbeat"},
			want: NodeState{Reporting: true, Lost: true, LostMessage: "no heartbeat", Row: v1alpha1.NodeRow{
				Node: "n", Phase: v1alpha1.PhaseUnknown, Message: "no heartbeat",
				GPUs: []v1alpha1.GPURow{{Index: 0, Product: "NVIDIA A100-SXM4-80GB", Desired: "3g.40gb@0,3g.40gb@4", Actual: "3g.40gb@0,3g.40gb@4", Phase: v1alpha1.PhaseReady}},
			}},
		},
		"a lost agent in the middle of a change: its last report follows": {
			nml:   nodeMigLayout("n").spec(halves).status(a100(0).layout("7g.80gb@0").phase(v1alpha1.PhaseDraining, "", "")).build(),
			agent: AgentHealth{Lost: true, Message: "no heartbeat"},
			want: NodeState{Reporting: true, Lost: true, LostMessage: "no heartbeat", Row: v1alpha1.NodeRow{
				Node: "n", Phase: v1alpha1.PhaseUnknown, Message: "no heartbeat; last reported: gpu 0: Draining to 3g.40gb@0,3g.40gb@4",
				GPUs: []v1alpha1.GPURow{{Index: 0, Product: "NVIDIA A100-SXM4-80GB", Desired: "3g.40gb@0,3g.40gb@4", Actual: "7g.80gb@0", Phase: v1alpha1.PhaseDraining}},
			}},
		},
		"a lost agent whose NodeMigLayout was made again stays lost": {
			nml:   nodeMigLayout("n").build(),
			agent: AgentHealth{Lost: true, Message: "no heartbeat"},
			want: NodeState{Lost: true, LostMessage: "no heartbeat",
				Row: v1alpha1.NodeRow{Node: "n", Phase: v1alpha1.PhaseUnknown, Message: "no heartbeat"}},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := EvaluateNode("n", tc.nml, tc.problems, tc.agent)
			if diff := cmp.Diff(tc.want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("node state (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSummarizeOrdersAndBoundsRows(t *testing.T) {
	var states []NodeState
	for i := range 70 {
		name := string(rune('a'+i/26)) + string(rune('a'+i%26))
		st := NodeState{Row: v1alpha1.NodeRow{Node: name}, Ready: i%2 == 0, Reporting: true}
		st.Failed = !st.Ready
		states = append(states, st)
	}
	s := summarize(states)
	if s.selected != 70 || s.ready != 35 || s.failed != 35 {
		t.Errorf("counts: selected %d ready %d failed %d, want 70 35 35", s.selected, s.ready, s.failed)
	}
	if len(s.rows) != maxNodeRows {
		t.Fatalf("%d rows, want %d", len(s.rows), maxNodeRows)
	}
	if s.rows[0].Node != "ab" || s.rows[34].Node != "cr" || s.rows[35].Node != "aa" {
		t.Errorf("rows not ordered not-ready first, then by name: %s %s %s", s.rows[0].Node, s.rows[34].Node, s.rows[35].Node)
	}
}

// TestEvaluateNodeRowPhaseIsLeastAdvanced: of a node's GPUs in different
// phases, the row shows the least advanced (Failed, Blocked, Pending,
// Draining, Repartitioning, Ready), whatever the GPUs' order.
func TestEvaluateNodeRowPhaseIsLeastAdvanced(t *testing.T) {
	order := []v1alpha1.GPUPhase{v1alpha1.PhaseFailed, v1alpha1.PhaseBlocked, v1alpha1.PhasePending,
		v1alpha1.PhaseDraining, v1alpha1.PhaseRepartitioning}
	for i, worse := range order {
		for _, better := range order[i+1:] {
			for _, swap := range []bool{false, true} {
				p0, p1 := worse, better
				if swap {
					p0, p1 = better, worse
				}
				nml := nodeMigLayout("n").spec(specGPU(0, "3g.40gb@0,3g.40gb@4", ""), specGPU(1, "3g.40gb@0,3g.40gb@4", "")).
					status(a100(0).layout("7g.80gb@0").phase(p0, "", ""), a100(1).layout("7g.80gb@0").phase(p1, "", "")).build()
				if got := EvaluateNode("n", nml, nil, AgentHealth{}).Row.Phase; got != worse {
					t.Errorf("GPU 0 %s, GPU 1 %s: row phase %s, want %s", p0, p1, got, worse)
				}
			}
		}
	}
}

// TestUnreadableGPUActualIsUnknown: a GPU NVML cannot read, or no longer
// counts, is reported with MIG mode off (the agent read nothing), which it
// may not be: its row shows its layout as not known ("?"), not as MIG off
// ("-"), in the spec or not.
func TestUnreadableGPUActualIsUnknown(t *testing.T) {
	unreadable := func(idx int32) *gpuBuilder {
		return a100(idx).migOff().phase(v1alpha1.PhaseFailed, v1alpha1.ReasonGPUUnreadable, "ERROR_GPU_IS_LOST")
	}
	missing := a100(2).migOff().phase(v1alpha1.PhaseFailed, v1alpha1.ReasonGPUMissing, "the node has no GPU with index 2")
	nml := nodeMigLayout("n").spec(specGPU(0, "7g.80gb@0", ""), specGPU(2, "7g.80gb@0", "")).status(unreadable(0), unreadable(1), missing).build()
	st := EvaluateNode("n", nml, nil, AgentHealth{})
	got := map[int32]string{}
	for _, r := range st.Row.GPUs {
		got[r.Index] = r.Actual
	}
	if diff := cmp.Diff(map[int32]string{0: "?", 1: "?", 2: "?"}, got); diff != "" {
		t.Errorf("Actual of unreadable GPUs (-want +got):\n%s", diff)
	}
}

// TestAutoRowsOfLostNodeKeepUntouchedGPUs: an Auto-mode node's rows list
// every GPU its agent reports (withUntouchedGPUs); once its agent is lost
// the rows are as last reported (NodeState.Lost), so the GPUs no plan
// changed stay listed instead of vanishing from kubectl describe.
func TestAutoRowsOfLostNodeKeepUntouchedGPUs(t *testing.T) {
	nml := nodeMigLayout("n").spec(specGPU(1, "3g.40gb@4", "serves ns/p")).
		status(a100(0).layout("7g.80gb@0"), a100(1).layout("3g.40gb@4")).build()
	for _, lost := range []bool{false, true} {
		st := withUntouchedGPUs(EvaluateNode("n", nml, nil, AgentHealth{Lost: lost, Message: "no heartbeat"}), nml)
		var idx []int32
		for _, r := range st.Row.GPUs {
			idx = append(idx, r.Index)
		}
		if diff := cmp.Diff([]int32{0, 1}, idx); diff != "" {
			t.Errorf("agent lost %t: GPU rows (-want +got):\n%s", lost, diff)
		}
	}
}

// TestStaticRowsListUnmatchedGPUs: a Static-mode node's row lists every GPU
// its agent reports, those no rule matches too (kept as they are: their
// actual layout shown as the desired one), so a device in use there is not
// hidden from kubectl describe.
func TestStaticRowsListUnmatchedGPUs(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ml := staticMigLayout("a", "uid-a", "a")
	ml.Spec.Rules = rules(rule("second").indices(1).counts("1g.10gb", 7))
	nml := ownedBy(nodeMigLayout("n1").spec(specGPU(1, "1g.10gb@0,1g.10gb@1,1g.10gb@2,1g.10gb@3,1g.10gb@4,1g.10gb@5,1g.10gb@6", `rule "second"`)).
		status(a100(0).layout("3g.40gb@0,3g.40gb@4").inUse("3g.40gb@4"), a100(1).layout("1g.10gb@0,1g.10gb@1,1g.10gb@2,1g.10gb@3,1g.10gb@4,1g.10gb@5,1g.10gb@6")).build(), ml)
	c := fake.NewClientBuilder().WithScheme(testScheme(t)).
		WithObjects(ml, node("n1", map[string]string{"pool": "a"}), nml).
		WithStatusSubresource(&v1alpha1.MigLayout{}, &v1alpha1.NodeMigLayout{}).Build()
	r := &Reconciler{Client: c, Scheme: c.Scheme(), Recorder: events.NewFakeRecorder(10)}
	if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: types.NamespacedName{Name: "a"}}); err != nil {
		t.Fatal(err)
	}
	var got v1alpha1.MigLayout
	if err := c.Get(ctx, types.NamespacedName{Name: "a"}, &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Status.Nodes) != 1 {
		t.Fatalf("rows %+v, want one node", got.Status.Nodes)
	}
	var idx []int32
	for _, g := range got.Status.Nodes[0].GPUs {
		idx = append(idx, g.Index)
		if g.Index == 0 && (g.Desired != "3g.40gb@0,3g.40gb@4" || g.Actual != g.Desired || g.Phase != v1alpha1.PhaseReady) {
			t.Errorf("GPU 0, matched by no rule: %+v, want its actual layout as desired, Ready", g)
		}
	}
	if diff := cmp.Diff([]int32{0, 1}, idx); diff != "" {
		t.Errorf("GPU rows (-want +got):\n%s", diff)
	}
}

// TestSummarizeKeepsRowsAskingForAnOperator: past maxNodeRows, the rows
// kept are, in order, a lost agent's, a failed node's (by the agent's
// report or by the controller: a rule that fails there), a node in
// conflict's, then nodes changing, then those waiting (not reported yet,
// held for their turn), then Ready ones; many nodes waiting never push
// out a failed node's row.
func TestSummarizeKeepsRowsAskingForAnOperator(t *testing.T) {
	var states []NodeState
	for i := range maxNodeRows {
		// Nodes whose agent has not reported yet, named before the others.
		states = append(states, EvaluateNode(fmt.Sprintf("a-%02d", i), nil, nil, AgentHealth{}))
	}
	blocked := nodeMigLayout("z-blocked").spec(specGPU(0, halvesLayout, "")).
		status(a100(0).layout(wholeLayout).phase(v1alpha1.PhaseBlocked, v1alpha1.ReasonDeviceInUse, "claim ns/c holds it")).build()
	invalid := []Problem{{GPU: 0, Product: "NVIDIA A100-SXM4-80GB", Reason: v1alpha1.ReasonInvalidLayout, Message: "gpu 0: no"}}
	changing := nodeMigLayout("z-changing").spec(specGPU(0, halvesLayout, "")).
		status(a100(0).layout(wholeLayout).phase(v1alpha1.PhaseDraining, "", "")).build()
	conflict := EvaluateNode("z-conflict", nil, nil, AgentHealth{})
	conflict.Conflict = true
	states = append(states,
		EvaluateNode("z-ready", nodeMigLayout("z-ready").spec(specGPU(0, wholeLayout, "")).status(a100(0).layout(wholeLayout)).build(), nil, AgentHealth{}),
		EvaluateNode("z-changing", changing, nil, AgentHealth{}),
		conflict,
		EvaluateNode("z-invalid", nodeMigLayout("z-invalid").spec(specGPU(0, wholeLayout, "")).status(a100(0).layout(wholeLayout)).build(), invalid, AgentHealth{}),
		EvaluateNode("z-blocked", blocked, nil, AgentHealth{}),
		EvaluateNode("z-lost", nodeMigLayout("z-lost").build(), nil, AgentHealth{Lost: true, Message: "gone"}),
	)
	s := summarize(states)
	if len(s.rows) != maxNodeRows {
		t.Fatalf("%d rows, want %d", len(s.rows), maxNodeRows)
	}
	var got []string
	for _, r := range s.rows[:5] {
		got = append(got, r.Node)
	}
	want := []string{"z-lost", "z-blocked", "z-conflict", "z-invalid", "z-changing"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("first rows (-want +got):\n%s", diff)
	}
	if last := s.rows[maxNodeRows-1].Node; last != fmt.Sprintf("a-%02d", maxNodeRows-6) {
		t.Errorf("last row kept is %s, want the waiting nodes' after the five above, by name", last)
	}
	if s.failed != 2 || s.conflict != 1 || s.lost != 1 || s.ready != 1 {
		t.Errorf("counts: failed %d conflict %d lost %d ready %d, want 2 1 1 1", s.failed, s.conflict, s.lost, s.ready)
	}
}
