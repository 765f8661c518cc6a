package controller

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2/ktesting"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// TestWithFailingPasses: a GPU Pending with PassFailed counts as stuck once
// it has been Pending PassesFailingAfter; younger ones give the time to look
// again; other reasons and phases, rows without a transition time, and a
// lost agent's rows count for nothing.
func TestWithFailingPasses(t *testing.T) {
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	row := func(idx int32, phase v1alpha1.GPUPhase, reason string, pendingFor time.Duration) *gpuBuilder {
		b := a100(idx).layout("7g.80gb@0").phase(phase, reason, "publishing the drain: forbidden")
		if pendingFor >= 0 {
			b.g.LastTransitionTime = &metav1.Time{Time: now.Add(-pendingFor)}
		}
		return b
	}
	tests := map[string]struct {
		gpus      []*gpuBuilder
		lost      bool
		wantStuck []int32
		wantNext  time.Time
	}{
		"failing for longer than the limit": {
			gpus:      []*gpuBuilder{row(0, v1alpha1.PhasePending, v1alpha1.ReasonPassFailed, PassesFailingAfter)},
			wantStuck: []int32{0},
		},
		"failing for less: looked at again when it reaches the limit": {
			gpus:     []*gpuBuilder{row(0, v1alpha1.PhasePending, v1alpha1.ReasonPassFailed, 4*time.Minute)},
			wantNext: now.Add(PassesFailingAfter - 4*time.Minute),
		},
		"the next of several": {
			gpus: []*gpuBuilder{
				row(0, v1alpha1.PhasePending, v1alpha1.ReasonPassFailed, 2*time.Minute),
				row(1, v1alpha1.PhasePending, v1alpha1.ReasonPassFailed, 7*time.Minute),
				row(2, v1alpha1.PhasePending, v1alpha1.ReasonPassFailed, time.Hour),
			},
			wantStuck: []int32{2},
			wantNext:  now.Add(PassesFailingAfter - 7*time.Minute),
		},
		"another reason": {
			gpus: []*gpuBuilder{row(0, v1alpha1.PhasePending, v1alpha1.ReasonPending, time.Hour)},
		},
		"no transition time": {
			gpus: []*gpuBuilder{row(0, v1alpha1.PhasePending, v1alpha1.ReasonPassFailed, -1)},
		},
		"a lost agent's rows": {
			gpus: []*gpuBuilder{row(0, v1alpha1.PhasePending, v1alpha1.ReasonPassFailed, time.Hour)},
			lost: true,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			nml := nodeMigLayout("n").spec(specGPU(0, "3g.40gb@0,3g.40gb@4", "")).status(tc.gpus...).build()
			st := EvaluateNode("n", nml, nil, AgentHealth{Lost: tc.lost, Message: "lost"})
			st, next := withFailingPasses(st, nml, now)
			var stuck []int32
			for _, g := range st.Stuck {
				stuck = append(stuck, g.GPU)
				if g.Reason != v1alpha1.ReasonPassFailed || !strings.Contains(g.Message, "forbidden") || !strings.Contains(g.Message, "Pending since") {
					t.Errorf("stuck GPU %d: %+v, want PassFailed saying since when and why", g.GPU, g)
				}
			}
			if diff := cmp.Diff(tc.wantStuck, stuck); diff != "" {
				t.Errorf("stuck GPUs (-want +got):\n%s", diff)
			}
			if !next.Equal(tc.wantNext) {
				t.Errorf("next look at %v, want %v", next, tc.wantNext)
			}
		})
	}
}

// TestReconcileDegradedByFailingPasses: a MigLayout whose node's agent
// keeps failing its passes asks to be looked at again when the GPU has been
// Pending PassesFailingAfter, and is Degraded with reason PassFailed from
// then on, not before.
func TestReconcileDegradedByFailingPasses(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	ml := staticMigLayout("a", "uid-a", "a")
	halves := specGPU(0, "3g.40gb@0,3g.40gb@4", `rule "halves": profiles 3g.40gb:2`)
	gpu := a100(0).layout("7g.80gb@0").phase(v1alpha1.PhasePending, v1alpha1.ReasonPassFailed, "the pass stopped: publishing the drain: resourceslices is forbidden")
	gpu.g.LastTransitionTime = &metav1.Time{Time: now.Add(-3 * time.Minute)}
	nml := ownedBy(nodeMigLayout("n1").spec(halves).status(gpu).build(), ml)
	c := fake.NewClientBuilder().WithScheme(testScheme(t)).
		WithObjects(ml, node("n1", map[string]string{"pool": "a"}), nml).
		WithStatusSubresource(&v1alpha1.MigLayout{}, &v1alpha1.NodeMigLayout{}).Build()
	r := &Reconciler{Client: c, Scheme: c.Scheme(), Recorder: events.NewFakeRecorder(10), Now: func() time.Time { return now }}
	req := ctrl.Request{NamespacedName: types.NamespacedName{Name: "a"}}
	degraded := func() (*metav1.Condition, time.Duration) {
		t.Helper()
		res, err := r.Reconcile(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		var got v1alpha1.MigLayout
		if err := c.Get(ctx, req.NamespacedName, &got); err != nil {
			t.Fatal(err)
		}
		return meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionDegraded), res.RequeueAfter
	}
	cond, requeue := degraded()
	if cond == nil || cond.Status != metav1.ConditionFalse {
		t.Errorf("after 3 minutes: Degraded %+v, want False", cond)
	}
	if want := PassesFailingAfter - 3*time.Minute; requeue < want || requeue > want+2*time.Second {
		t.Errorf("after 3 minutes: requeue after %v, want about %v", requeue, want)
	}
	now = now.Add(requeue)
	cond, _ = degraded()
	if cond == nil || cond.Status != metav1.ConditionTrue || cond.Reason != v1alpha1.ReasonPassFailed || !strings.Contains(cond.Message, "forbidden") {
		t.Errorf("after %v: Degraded %+v, want True, PassFailed, saying why", PassesFailingAfter, cond)
	}
}
