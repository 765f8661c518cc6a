package controller

import (
	"strings"
	"testing"
	"time"

	"k8s.io/utils/ptr"

	"github.com/miglayout/miglayout/api/v1alpha1"
	"github.com/miglayout/miglayout/pkg/planner"
)

// TestHeldPlanAsksToBeLookedAtAgain: the plan's cancel of n1's blocked
// change is not written (n1's agent started a pass meanwhile), so the
// plan's change on n2 is held back. The pass still asks to be looked at
// again (p1's next event is due within eventRepeat): nothing else may wake
// the planner for a pod that keeps waiting.
func TestHeldPlanAsksToBeLookedAtAgain(t *testing.T) {
	h := blockedCancelLostCluster(t)
	requeue := h.settle()
	if _, ok := h.specOf("n2")[0]; ok {
		t.Fatalf("n2's change was written: the plan was not held back and the test shows nothing")
	}
	if requeue <= 0 || requeue > eventRepeat {
		t.Errorf("the held pass asks to be looked at again in %v, want within %v", requeue, eventRepeat)
	}
}

// TestRequeueWhenAPodStartsAgingBeforeTheRefresh: p1 waits (both halves
// of n1's GPU in use) and starts to be planned by age in 5 minutes, before
// its next event is due (eventRepeat, at the next 20-minute mark): the plan
// asks to be looked at again by then.
func TestRequeueWhenAPodStartsAgingBeforeTheRefresh(t *testing.T) {
	ml := autoMigLayout("auto", nil)
	h := newAutoCluster(t, ml, node("n1", map[string]string{"pool": "auto"}),
		autoNML("n1", ml, a100(0).layout("3g.40gb@0,3g.40gb@4").inUse("3g.40gb@0,3g.40gb@4")),
		autoClaim("c1", profileSelector("3g.40gb")))
	p := autoPod("p1", h0(), "c1")
	p.CreationTimestamp.Time = h.now.Add(5*time.Minute - planner.DefaultAgingAfter)
	h.create(p)
	if got := h.settle(); got <= 0 || got > 5*time.Minute {
		t.Errorf("after the plan: RequeueAfter %v, want at most 5m (when p1 starts to be planned by age)", got)
	}
}

// TestDeclineElsewhereStartsItsWaitAtOnce: n1 and n2 each have a free
// 1g.10gb. The plan gives the pod one of them; kube-scheduler does not
// bind it there for UnboundAfter, so that node is declined and the pod is
// planned, in the same pass, on the other node's free device. The wait
// there counts from that pass: the pass asks to be looked at again when it
// falls due (UnboundAfter), not only when the decline ends
// (DeclinedFor), and the second node is declined then in its turn.
func TestDeclineElsewhereStartsItsWaitAtOnce(t *testing.T) {
	const free = "4g.40gb@0,1g.10gb@6"
	ml := autoMigLayout("auto", &v1alpha1.AutoPolicy{ReclaimIdleGPUsAfterSeconds: ptr.To[int32](0)})
	h := newAutoCluster(t, ml,
		node("n1", map[string]string{"pool": "auto"}), autoNML("n1", ml, a100(0).layout(free)),
		node("n2", map[string]string{"pool": "auto"}), autoNML("n2", ml, a100(0).layout(free)))
	h.create(autoClaim("c1", profileSelector("1g.10gb")), autoPod("p", h.now, "c1"))
	requeue := h.settle()
	if requeue != DefaultUnboundAfter {
		t.Fatalf("after the first plan, asked to look again in %v, want %v", requeue, DefaultUnboundAfter)
	}
	h.now = h.now.Add(requeue)
	requeue = h.settle()
	if n := strings.Count(strings.Join(h.events(), "\n"), EventSchedulerDeclinedNode); n != 1 {
		t.Fatalf("%d %s events once the first wait fell due, want 1", n, EventSchedulerDeclinedNode)
	}
	if requeue != DefaultUnboundAfter {
		t.Errorf("after the decline, asked to look again in %v, want %v (when the wait on the other node falls due)", requeue, DefaultUnboundAfter)
	}
	h.now = h.now.Add(requeue)
	h.settle()
	if n := strings.Count(strings.Join(h.events(), "\n"), EventSchedulerDeclinedNode); n != 1 {
		t.Errorf("%d %s events once the wait on the other node fell due, want 1", n, EventSchedulerDeclinedNode)
	}
}
