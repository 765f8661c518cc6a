package controller

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"

	"github.com/miglayout/miglayout/pkg/planner"
)

// TestNotifyTellsABurstOverPasses: a plan that leaves more pods waiting
// than maxPodEventsPerPass tells that many and reports a backlog; the next
// plans tell the others, each pod once.
func TestNotifyTellsABurstOverPasses(t *testing.T) {
	const pods = maxPodEventsPerPass + 50
	rec := events.NewFakeRecorder(2 * pods)
	a := &AutoPlanner{Recorder: rec, Now: func() time.Time { return time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC) }}
	var snap planner.Snapshot
	res := planner.Result{Unservable: map[string]string{}}
	for i := range pods {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: fmt.Sprintf("p%d", i), UID: types.UID(fmt.Sprintf("uid-%d", i))}}
		snap.Pending = append(snap.Pending, planner.Pod{Pod: p})
		res.Unservable["ns/"+p.Name] = "no Auto node of a model whose profiles can satisfy the selector"
	}
	drained := func() int {
		n := 0
		for len(rec.Events) > 0 {
			<-rec.Events
			n++
		}
		return n
	}
	for i, want := range []struct {
		told    int
		backlog bool
	}{{maxPodEventsPerPass, true}, {50, false}, {0, false}} {
		backlog := a.notify(AutoInputs{}, snap, res)
		if got := drained(); got != want.told || backlog != want.backlog {
			t.Errorf("plan %d told %d pods (backlog %t), want %d (backlog %t)", i+1, got, backlog, want.told, want.backlog)
		}
	}
}

// TestAutoPlansAgainToTellABacklog: a plan that leaves pods untold asks for
// a pass within eventBacklogRecheck, though nothing changed, and the next
// pass tells them from that plan: the same inputs are planned once, not once
// per maxPodEventsPerPass pods.
func TestAutoPlansAgainToTellABacklog(t *testing.T) {
	ml := autoMigLayout("auto", nil)
	h := newAutoCluster(t, ml, node("n1", map[string]string{"pool": "auto"}), autoNML("n1", ml, a100(0)))
	const pods = maxPodEventsPerPass + 20
	for i := range pods {
		name := fmt.Sprintf("p%d", i)
		h.create(autoClaim("c-"+name, profileSelector("9g.999gb")), autoPod(name, h.now, "c-"+name))
	}
	// Passes as the controller makes them, each when the last asked: the
	// pods told by each pass that told some, and what it asked for.
	type pass struct {
		told  int
		again time.Duration
	}
	var got []pass
	plans := plansSoFar(t)
	for range 20 {
		res, err := h.a.Reconcile(context.Background(), autoKey)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, e := range h.events() {
			if strings.Contains(e, EventNotServable) {
				n++
			}
		}
		if n > 0 {
			got = append(got, pass{n, res.RequeueAfter})
		}
		if res.RequeueAfter >= time.Minute {
			break
		}
		h.now = h.now.Add(res.RequeueAfter)
	}
	if n := plansSoFar(t) - plans; n != 1 {
		t.Errorf("the same inputs planned %d times, want once", n)
	}
	if len(got) != 2 || got[0].told != maxPodEventsPerPass || got[0].again > eventBacklogRecheck || got[1].told != pods-maxPodEventsPerPass {
		t.Errorf("passes that told pods %+v, want %d pods told, again within %v, then %d", got, maxPodEventsPerPass, eventBacklogRecheck, pods-maxPodEventsPerPass)
	}
}

// TestUntoldPlanGoesWithItsInputs: pods left untold are told from their
// plan only while the inputs are the ones it planned; once they change, the
// plan is dropped unheard (the next plan tells the pods).
func TestUntoldPlanGoesWithItsInputs(t *testing.T) {
	rec := events.NewFakeRecorder(10)
	a := &AutoPlanner{Recorder: rec, Now: func() time.Time { return time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC) }}
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: "uid-p"}}
	u := &untoldPlan{snap: planner.Snapshot{Pending: []planner.Pod{{Pod: p}}}, res: planner.Result{Unservable: map[string]string{"ns/p": "no room"}}}
	a.batch.planned = "k1"
	a.setUntold(u)
	if a.tellUntold("k2") || len(rec.Events) > 0 || a.untold != nil {
		t.Fatalf("told %d pod(s) from a plan of other inputs; untold kept: %v", len(rec.Events), a.untold != nil)
	}
	a.setUntold(u)
	if a.tellUntold("k1") || len(rec.Events) != 1 || a.untold != nil {
		t.Errorf("told %d pod(s) from the plan of these inputs, want 1 and nothing left", len(rec.Events))
	}
}
