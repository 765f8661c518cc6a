package controller

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// TestConflictShowsChangeCarriedOut: a node a's NodeMigLayout changes when b
// starts selecting it too carries on with a change its agent has begun
// (repartitioning, blocked on a device in use, failed and retried): a's
// status shows that change (Progressing, or Degraded with the GPU's
// reason, the GPU rows, the conflict first in the row's message), not a
// node left as it is; b, which does not own the node, shows the conflict.
func TestConflictShowsChangeCarriedOut(t *testing.T) {
	for name, tc := range map[string]struct {
		row         *gpuBuilder
		progressing metav1.ConditionStatus
		degraded    string // Degraded's reason
	}{
		"repartitioning": {a100(0).layout("").phase(v1alpha1.PhaseRepartitioning, v1alpha1.ReasonRepartitioning, ""), metav1.ConditionTrue, v1alpha1.ReasonNoProblems},
		"blocked": {a100(0).layout(wholeLayout).phase(v1alpha1.PhaseBlocked, v1alpha1.ReasonDeviceInUse, "7g.80gb@0 is allocated to claim default/c"),
			metav1.ConditionFalse, v1alpha1.ReasonDeviceInUse},
		"failed": {a100(0).layout("3g.40gb@4").phase(v1alpha1.PhaseFailed, v1alpha1.ReasonNVMLError, "creating GPU instance 3g.40gb@0: ERROR_UNKNOWN"),
			metav1.ConditionFalse, v1alpha1.ReasonNVMLError},
	} {
		t.Run(name, func(t *testing.T) {
			a := staticMigLayout("a", "uid-a", "a")
			b := staticMigLayout("b", "uid-b", "a")
			nml := ownedBy(nodeMigLayout("n1").spec(specGPU(0, halvesLayout, `rule "halves"`)).status(tc.row).build(), a)
			c := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(a, b, node("n1", map[string]string{"pool": "a"}), nml).
				WithStatusSubresource(&v1alpha1.MigLayout{}, &v1alpha1.NodeMigLayout{}).Build()
			r := &Reconciler{Client: c, Scheme: c.Scheme(), Recorder: events.NewFakeRecorder(100)}
			status := map[string]v1alpha1.MigLayoutStatus{}
			for _, ml := range []string{"a", "b"} {
				if _, err := r.Reconcile(t.Context(), ctrl.Request{NamespacedName: types.NamespacedName{Name: ml}}); err != nil {
					t.Fatal(err)
				}
				var got v1alpha1.MigLayout
				if err := c.Get(t.Context(), client.ObjectKey{Name: ml}, &got); err != nil {
					t.Fatal(err)
				}
				status[ml] = got.Status
			}
			st := status["a"]
			if cond := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionProgressing); cond == nil || cond.Status != tc.progressing {
				t.Errorf("a: Progressing %+v, want %s", cond, tc.progressing)
			}
			if cond := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionDegraded); cond == nil || cond.Reason != tc.degraded {
				t.Errorf("a: Degraded %+v, want reason %s", cond, tc.degraded)
			}
			if cond := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionConflict); cond == nil || cond.Status != metav1.ConditionTrue {
				t.Errorf("a: Conflict %+v, want True", cond)
			}
			if len(st.Nodes) != 1 || len(st.Nodes[0].GPUs) != 1 || st.Nodes[0].GPUs[0].Desired != halvesLayout ||
				!strings.HasPrefix(st.Nodes[0].Message, `also selected by MigLayout "b"; no change is started here, the one begun is carried out: gpu 0: `) {
				t.Errorf("a's rows %+v, want n1's GPU 0 on its way to %s, the conflict said first", st.Nodes, halvesLayout)
			}
			if bs := status["b"]; len(bs.Nodes) != 1 || len(bs.Nodes[0].GPUs) != 0 {
				t.Errorf("b's rows %+v, want n1 left as it is", bs.Nodes)
			}
		})
	}
}

// TestConflictCarriedRetryKeepsDegraded: the carried change of a node in
// conflict is judged as any change, its retries too: a GPU Blocked, then
// repartitioned again by a retry of the same spec (the agent shows a
// retry's drain no more), keeps a's Degraded, and its spec.
func TestConflictCarriedRetryKeepsDegraded(t *testing.T) {
	c, r, blocked := carriedBlocked(t)
	for step, row := range []*gpuBuilder{
		blocked,
		a100(0).layout("3g.40gb@4").phase(v1alpha1.PhaseRepartitioning, v1alpha1.ReasonRepartitioning, ""),
		blocked,
		a100(0).layout("3g.40gb@4").phase(v1alpha1.PhaseRepartitioning, v1alpha1.ReasonRepartitioning, ""),
	} {
		setRow(t, c, "n1", row.build())
		if _, err := r.Reconcile(t.Context(), ctrl.Request{NamespacedName: types.NamespacedName{Name: "a"}}); err != nil {
			t.Fatal(err)
		}
		var got v1alpha1.MigLayout
		if err := c.Get(t.Context(), client.ObjectKey{Name: "a"}, &got); err != nil {
			t.Fatal(err)
		}
		if cond := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionDegraded); cond == nil || cond.Reason != v1alpha1.ReasonDeviceInUse {
			t.Errorf("step %d (%s): a's Degraded %+v, want DeviceInUse", step, row.build().Phase, cond)
		}
		var cur v1alpha1.NodeMigLayout
		if err := c.Get(t.Context(), client.ObjectKey{Name: "n1"}, &cur); err != nil {
			t.Fatal(err)
		}
		if got := cur.Spec.GPUs[0].Layout; got != wholeLayout {
			t.Errorf("step %d: n1's spec %q, want the change begun kept (%s)", step, got, wholeLayout)
		}
	}
}

// TestConflictMemoryKeptAcrossTheOtherMigLayout: b's reconciles, which see
// n1 in conflict and not b's, leave what a remembers of n1's carried
// change: a's Degraded holds through a retry's Repartitioning row with b
// reconciled in between.
func TestConflictMemoryKeptAcrossTheOtherMigLayout(t *testing.T) {
	c, r, _ := carriedBlocked(t)
	reconcile := func(name string) {
		t.Helper()
		if _, err := r.Reconcile(t.Context(), ctrl.Request{NamespacedName: types.NamespacedName{Name: name}}); err != nil {
			t.Fatal(err)
		}
	}
	reconcile("a")
	reconcile("b")
	setRow(t, c, "n1", a100(0).layout("3g.40gb@4").phase(v1alpha1.PhaseRepartitioning, v1alpha1.ReasonRepartitioning, "").build())
	reconcile("a")
	var got v1alpha1.MigLayout
	if err := c.Get(t.Context(), client.ObjectKey{Name: "a"}, &got); err != nil {
		t.Fatal(err)
	}
	if cond := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionDegraded); cond == nil || cond.Reason != v1alpha1.ReasonDeviceInUse {
		t.Errorf("a's Degraded %+v after b's reconcile and a retry, want DeviceInUse", cond)
	}
}

// setRow reports row as the only GPU of NodeMigLayout name's status.
func setRow(t *testing.T, c client.Client, name string, row v1alpha1.GPUStatus) {
	t.Helper()
	var cur v1alpha1.NodeMigLayout
	if err := c.Get(t.Context(), client.ObjectKey{Name: name}, &cur); err != nil {
		t.Fatal(err)
	}
	cur.Status.GPUs = []v1alpha1.GPUStatus{row}
	if err := c.Status().Update(t.Context(), &cur); err != nil {
		t.Fatal(err)
	}
}

// carriedBlocked is MigLayouts a and b both selecting n1, whose
// NodeMigLayout a owns, its GPU 0 Blocked part way to the whole GPU (a
// change begun, carried out), with the client and reconciler, and the
// Blocked row.
func carriedBlocked(t *testing.T) (client.Client, *Reconciler, *gpuBuilder) {
	t.Helper()
	a := staticMigLayout("a", "uid-a", "a")
	b := staticMigLayout("b", "uid-b", "a")
	blocked := a100(0).layout("3g.40gb@4").phase(v1alpha1.PhaseBlocked, v1alpha1.ReasonDeviceInUse, "3g.40gb@4 is held by another NVML client")
	nml := ownedBy(nodeMigLayout("n1").spec(specGPU(0, wholeLayout, `rule "whole"`)).status(blocked).build(), a)
	c := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(a, b, node("n1", map[string]string{"pool": "a"}), nml).
		WithStatusSubresource(&v1alpha1.MigLayout{}, &v1alpha1.NodeMigLayout{}).Build()
	return c, &Reconciler{Client: c, Scheme: c.Scheme(), Recorder: events.NewFakeRecorder(100)}, blocked
}
