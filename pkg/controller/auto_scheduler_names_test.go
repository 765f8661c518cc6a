package controller

import (
	"strings"
	"testing"
)

// TestPodsOfOtherSchedulersAreNoDemand: an unschedulable pod of a scheduler
// that is not one of AutoPlanner.SchedulerNames (one that may not handle DRA
// as kube-scheduler does) gets no GPU changed for it and is told nothing;
// one of a scheduler named there is planned like any other pod.
func TestPodsOfOtherSchedulersAreNoDemand(t *testing.T) {
	for name, tc := range map[string]struct {
		scheduler string
		names     []string
		planned   bool
	}{
		"default scheduler, no names given": {scheduler: "default-scheduler", planned: true},
		"unset (the API server's default)":  {scheduler: "", planned: true},
		"another scheduler":                 {scheduler: "volcano"},
		"another scheduler named":           {scheduler: "gpu-scheduler", names: []string{"default-scheduler", "gpu-scheduler"}, planned: true},
		"default scheduler, not named":      {scheduler: "default-scheduler", names: []string{"gpu-scheduler"}},
	} {
		t.Run(name, func(t *testing.T) {
			ml := autoMigLayout("auto", nil)
			p := autoPod("p1", h0(), "c1")
			p.Spec.SchedulerName = tc.scheduler
			h := newAutoCluster(t, ml,
				node("n1", map[string]string{"pool": "auto"}), autoNML("n1", ml, a100(0).layout("7g.80gb@0")),
				autoClaim("c1", profileSelector("1g.10gb")), p)
			h.a.SchedulerNames = tc.names
			h.settle()
			got, changed := h.specOf("n1")[0]
			if changed != tc.planned {
				t.Errorf("n1/gpu-0 changed %v (to %q) for a pod of scheduler %q, want %v (events %q)", changed, got, tc.scheduler, tc.planned, h.events())
			}
			if !tc.planned {
				for _, e := range h.events() {
					if strings.Contains(e, "p1") {
						t.Errorf("the pod of another scheduler is told %q", e)
					}
				}
				if st := h.autoStatus(); st != nil && st.PendingPods > 0 {
					t.Errorf("status counts %d pending pod(s); want the other scheduler's pod left out", st.PendingPods)
				}
			}
		})
	}
}
