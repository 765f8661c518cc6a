package controller

import (
	"context"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2/ktesting"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// TestProgressingWhileGPURepartitionsBesideBlockedGPU: one GPU of the node
// is Blocked (a device it must destroy is in use, which may last days) and
// another GPU of the same node is being repartitioned right now. The
// README promises "Progressing is True (Repartitioning) while a node
// drains or repartitions"; kubectl describe must not say "no node is
// changing" (and kubectl wait --for=condition=Progressing=False must not
// return) while GPU 1 is in the middle of NVML calls.
func TestProgressingWhileGPURepartitionsBesideBlockedGPU(t *testing.T) {
	nml := nodeMigLayout("n1").
		spec(specGPU(0, "7g.80gb@0", ""), specGPU(1, "3g.40gb@0,3g.40gb@4", "")).
		status(
			a100(0).layout("3g.40gb@0,3g.40gb@4").inUse("3g.40gb@0").
				phase(v1alpha1.PhaseBlocked, v1alpha1.ReasonDeviceInUse, "3g.40gb@0 is allocated to claim ns/train"),
			a100(1).layout("7g.80gb@0").phase(v1alpha1.PhaseRepartitioning, "Repartitioning", "creating 3g.40gb@0"),
		).build()
	st := EvaluateNode("n1", nml, nil, AgentHealth{})
	obs := Observation{Generation: 1, Selection: Selection{Nodes: []string{"n1"}}, Nodes: []NodeState{st}}
	var progressing *metav1.Condition
	for _, c := range Conditions(obs) {
		if c.Type == v1alpha1.ConditionProgressing {
			progressing = &c
		}
	}
	if progressing == nil || progressing.Status != metav1.ConditionTrue || progressing.Reason != v1alpha1.ReasonRepartitioning {
		t.Errorf("GPU 1 of n1 is Repartitioning (row %+v), but Progressing = %+v; want True/%s",
			st.Row.GPUs, progressing, v1alpha1.ReasonRepartitioning)
	}
}

// TestConflictedNodeChangeInFlightCountsTowardMaxGPUs: an Auto MigLayout
// with maxGPUs 1 has a change in flight on n1 (GPU 0 draining towards
// 7g.80gb@0). A Static MigLayout is then made that selects n1 too: both
// report Conflict and n1 "is left as it is", so its NodeMigLayout keeps
// the Auto change and the agent carries it on. That GPU is still changing
// for the Auto MigLayout: a plan made meanwhile must not repartition a
// second GPU (n2) of the same MigLayout, which would make two GPUs change
// at once against maxGPUs 1.
func TestConflictedNodeChangeInFlightCountsTowardMaxGPUs(t *testing.T) {
	// Draining, or Blocked by a device in use: a frozen node's blocked
	// change is not cancelled, so it keeps its slot too.
	for name, gpu := range map[string]*gpuBuilder{
		"draining": a100(0).layout("1g.10gb@0").phase(v1alpha1.PhaseDraining, "Draining", "settle period"),
		"blocked":  a100(0).layout("1g.10gb@0").inUse("1g.10gb@0").phase(v1alpha1.PhaseBlocked, v1alpha1.ReasonDeviceInUse, "in use"),
	} {
		t.Run(name, func(t *testing.T) {
			ml := autoMigLayout("auto", &v1alpha1.AutoPolicy{MaxGPUs: 1, MaxGPUsPerNode: 1})
			other := staticMigLayout("other", "uid-other", "")
			other.Spec.NodeSelector = metav1.LabelSelector{MatchLabels: map[string]string{"team": "x"}}
			n1 := autoNML("n1", ml, gpu)
			n1.Spec.GPUs = []v1alpha1.GPUSpec{specGPU(0, "7g.80gb@0", "planned earlier")}
			h := newAutoCluster(t, ml, other,
				node("n1", map[string]string{"pool": "auto", "team": "x"}), n1,
				node("n2", map[string]string{"pool": "auto"}), autoNML("n2", ml, a100(0).layout("1g.10gb@0")),
				autoClaim("c1", profileSelector("3g.40gb")), autoPod("p1", h0(), "c1"))
			h.settle()
			if got := h.specOf("n2"); len(got) != 0 {
				t.Errorf("n2 was repartitioned (%v) while n1's GPU 0, still changing for MigLayout %q, holds its only maxGPUs slot (status.auto %+v)",
					got, ml.Name, h.autoStatus())
			}
			if got := h.specOf("n1")[0]; got != "7g.80gb@0" {
				t.Fatalf("n1's change in flight was rewritten to %q; the node is in conflict and must be left as it is", got)
			}
		})
	}
}

// TestRecreatedNodeMigLayoutOfLostAgentIsNotAReturn: the agent of n1 was
// reported lost (row Unknown) and its Lease has not been renewed for an
// hour. The operator deletes n1's NodeMigLayout (as the agent's own status
// message suggests, to forget a GPU that is gone) and the controller makes
// it again, with no status yet. Nothing renewed the Lease: the controller
// must not record AgentReturned ("the agent renews its heartbeat Lease
// again") nor drop AgentLost from Degraded, since the dead agent will never
// report and the node would then look like one whose agent is just
// starting, for ever.
func TestRecreatedNodeMigLayoutOfLostAgentIsNotAReturn(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	now := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	ml := staticMigLayout("a", "uid-a", "a")
	ml.Status.Nodes = []v1alpha1.NodeRow{{Node: "n1", Phase: v1alpha1.PhaseUnknown, Message: "the node's agent has not renewed its heartbeat Lease"}}
	lease := agentLease("n1", now.Add(-time.Hour), 40)
	c := fake.NewClientBuilder().WithScheme(testScheme(t)).
		WithObjects(ml, node("n1", map[string]string{"pool": "a"}), lease).
		WithStatusSubresource(&v1alpha1.MigLayout{}, &v1alpha1.NodeMigLayout{}).Build()
	rec := events.NewFakeRecorder(10)
	r := &Reconciler{Client: c, Scheme: c.Scheme(), Recorder: rec,
		AgentLeases: &AgentLeases{Namespace: leaseNS, Now: func() time.Time { return now }}}
	req := ctrl.Request{NamespacedName: types.NamespacedName{Name: "a"}}
	if _, err := r.Reconcile(ctx, req); err != nil {
		t.Fatal(err)
	}
	for len(rec.Events) > 0 {
		if e := <-rec.Events; strings.Contains(e, EventAgentReturned) {
			t.Errorf("event %q, yet n1's Lease was last renewed an hour ago", e)
		}
	}
	var got v1alpha1.MigLayout
	if err := c.Get(context.Background(), req.NamespacedName, &got); err != nil {
		t.Fatal(err)
	}
	if d := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionDegraded); d == nil || d.Reason != v1alpha1.ReasonAgentLost {
		t.Errorf("Degraded = %+v, want %s: n1's agent is still lost (rows %+v)", d, v1alpha1.ReasonAgentLost, got.Status.Nodes)
	}
}
