package controller

import (
	"context"
	"fmt"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"k8s.io/utils/ptr"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// agentSettlePeriod is the agent's default --settle-period: a GPU shown
// Draining at T is repartitioned (NVML) at T+agentSettlePeriod unless its
// spec changed.
const agentSettlePeriod = 5 * time.Second

// raceTheSettlePeriod runs passes as the controller does (on each event,
// and when it asked to be woken) from T, when h's agent began draining
// node n1's GPU 0, with the production batching window (idle 2 s, max
// 10 s, reads every 500 ms). At T+at, act runs (an event); with trickle, an
// unservable pod arrives every 500 ms as well. It returns when GPU 0's
// desired layout became want, relative to T, or -1 where that was not
// before the agent repartitions at T+agentSettlePeriod.
func raceTheSettlePeriod(t *testing.T, h *autoCluster, at time.Duration, act func(), trickle bool, want string) time.Duration {
	t.Helper()
	h.a.Idle, h.a.Max, h.a.ReadEvery = 2*time.Second, 10*time.Second, DefaultReadEvery
	T := h.now
	next := time.Duration(0)
	i := 0
	for step := 100 * time.Millisecond; h.now.Sub(T) < agentSettlePeriod; h.now = h.now.Add(step) {
		el := h.now.Sub(T)
		event := el == 0
		if el == at {
			act()
			event = true
		}
		if trickle && el%(500*time.Millisecond) == 0 {
			i++
			name := fmt.Sprintf("q%d", i)
			h.create(autoClaim(name, profileSelector("9g.99gb")), autoPod(name, h.now, name))
			event = true
		}
		if !event && (next == 0 || el < next) {
			continue
		}
		res, err := h.a.Reconcile(context.Background(), autoKey)
		if err != nil {
			t.Fatal(err)
		}
		next = 0
		if res.RequeueAfter > 0 {
			next = el + res.RequeueAfter
		}
		if h.specOf("n1")[0] == want {
			return el
		}
	}
	return -1
}

// TestCancelsBeatTheSettlePeriod: a change the agent drains for is
// cancelled only by a plan, and carried out once the agent's settle period
// ends. Where it must be cancelled (the pods it was planned for are gone;
// an idle GPU is given back whole while a pod waits for its free devices),
// the pass plans at once rather than when the batching window closes: its
// idle period, 2 s, and under a steady trickle of pods its maximum, 10 s,
// would outlast what is left of the settle period, and the GPU would be
// repartitioned for nobody.
func TestCancelsBeatTheSettlePeriod(t *testing.T) {
	const sevenSmall = "1g.10gb@0,1g.10gb@1,1g.10gb@2,1g.10gb@3,1g.10gb@4,1g.10gb@5,1g.10gb@6"
	for name, tc := range map[string]struct {
		at      time.Duration
		trickle bool
		reclaim bool
	}{
		"the pod deleted late in the drain":                  {at: 3500 * time.Millisecond},
		"the pod deleted while pods trickle in":              {at: 500 * time.Millisecond, trickle: true},
		"a pod arrives while the GPU is reclaimed":           {at: 1 * time.Second, reclaim: true},
		"a pod arrives while pods trickle in, GPU reclaimed": {at: 1500 * time.Millisecond, trickle: true, reclaim: true},
	} {
		t.Run(name, func(t *testing.T) {
			var h *autoCluster
			var act func()
			want := "7g.80gb@0"
			if tc.reclaim {
				h = reclaimingSevenSmall(t)
				act = func() { h.create(autoClaim("c1", profileSelector("1g.10gb")), autoPod("p1", h.now, "c1")) }
				want = sevenSmall
			} else {
				hh, pod := planThreeGForP1(t)
				h = hh
				act = func() {
					if err := h.c.Delete(context.Background(), pod); err != nil {
						t.Fatal(err)
					}
				}
			}
			drainGPU0(h)
			if got := raceTheSettlePeriod(t, h, tc.at, act, tc.trickle, want); got < 0 {
				t.Errorf("acted at T+%v; GPU 0's desired layout not back to %s before the agent repartitions at T+%v (spec %v)", tc.at, want, agentSettlePeriod, h.specOf("n1"))
			} else if t.Logf("cancelled at T+%v", got); got-tc.at > time.Second {
				t.Errorf("cancelled at T+%v, %v after the event", got, got-tc.at)
			}
		})
	}
}

func plansSoFar(t *testing.T) uint64 {
	var m dto.Metric
	if err := plannerLatency.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetHistogram().GetSampleCount()
}

// TestUrgentPlansAtMostEverySecond: an idle GPU is being given back whole
// (Draining) while pods that no GPU can serve (9g.99gb) arrive every
// 500 ms. An arrival is planned at once (a pending pod may stop the
// reclaim: urgentCancel), and the plan keeps the reclaim; for that change,
// not more often than every urgentEvery, rather than each arrival being
// planned at once. Also where the inputs are read on every change
// (--auto-read-every 0) and each pod is deleted 250 ms after it arrives:
// the reclaim is urgent only while a pod is pending, and a pass with none
// between two arrivals must not let the next one plan again within
// urgentEvery.
func TestUrgentPlansAtMostEverySecond(t *testing.T) {
	for name, tc := range map[string]struct {
		readEvery time.Duration
		comeAndGo bool // each pod deleted 250 ms after it arrives
	}{
		"pods trickle in":                     {readEvery: DefaultReadEvery},
		"pods come and go, read every change": {comeAndGo: true},
	} {
		t.Run(name, func(t *testing.T) {
			h := reclaimingSevenSmall(t)
			drainGPU0(h)
			h.a.Idle, h.a.Max, h.a.ReadEvery = 2*time.Second, 10*time.Second, tc.readEvery
			before := plansSoFar(t)
			T := h.now
			i := 0
			for h.now.Sub(T) < agentSettlePeriod {
				i++
				name := fmt.Sprintf("q%d", i)
				claim, pod := autoClaim(name, profileSelector("9g.99gb")), autoPod(name, h.now, name)
				h.create(claim, pod)
				if _, err := h.a.Reconcile(context.Background(), autoKey); err != nil {
					t.Fatal(err)
				}
				h.now = h.now.Add(250 * time.Millisecond)
				if tc.comeAndGo {
					if err := h.c.Delete(context.Background(), pod); err != nil {
						t.Fatal(err)
					}
					if err := h.c.Delete(context.Background(), claim); err != nil {
						t.Fatal(err)
					}
					if _, err := h.a.Reconcile(context.Background(), autoKey); err != nil {
						t.Fatal(err)
					}
				}
				h.now = h.now.Add(250 * time.Millisecond)
			}
			plans := plansSoFar(t) - before
			t.Logf("%d arrivals, %d plans, spec %v", i, plans, h.specOf("n1"))
			if want := uint64(agentSettlePeriod / urgentEvery); plans > want || plans == 0 {
				t.Errorf("%d plans in %v for %d arrivals of pods the reclaimed GPU cannot serve (want 1 to %d: at most once per urgentEvery)", plans, agentSettlePeriod, i, want)
			}
		})
	}
}

// reclaimingSevenSmall is an Auto cluster of one node, n1, whose only GPU,
// seven free 1g.10gb, has been idle past its policy's minute and is given
// back whole (desired 7g.80gb@0); its agent has not started.
func reclaimingSevenSmall(t *testing.T) *autoCluster {
	t.Helper()
	const sevenSmall = "1g.10gb@0,1g.10gb@1,1g.10gb@2,1g.10gb@3,1g.10gb@4,1g.10gb@5,1g.10gb@6"
	ml := autoMigLayout("auto", &v1alpha1.AutoPolicy{ReclaimIdleGPUsAfterSeconds: ptr.To[int32](60)})
	h := newAutoCluster(t, ml, node("n1", map[string]string{"pool": "auto"}), autoNML("n1", ml, a100(0).layout(sevenSmall)))
	h.settle()
	h.now = h.now.Add(2 * time.Minute)
	h.settle()
	if got := h.specOf("n1")[0]; got != "7g.80gb@0" {
		t.Fatalf("GPU 0 idle for two minutes -> %q, want it given back as 7g.80gb@0", got)
	}
	return h
}

// drainGPU0 has n1's agent report GPU 0 Draining: the settle period runs.
func drainGPU0(h *autoCluster) {
	h.agent("n1", func(st []v1alpha1.GPUStatus, _ []v1alpha1.GPUSpec) []v1alpha1.GPUStatus {
		st[0].Phase, st[0].Reason, st[0].Message = v1alpha1.PhaseDraining, "Draining", "draining"
		return st
	})
}
