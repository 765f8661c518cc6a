package controller

import (
	"fmt"
	"time"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// PassesFailingAfter is how long the agent may report a GPU Pending with
// reason PassFailed (its passes stop before the GPU's change is done: the
// API server unreadable or refusing the agent's publication, an NVML
// observation failing) before the MigLayout counts the GPU in Degraded.
// Shorter outages, which the agent's backoff (up to 2 minutes) rides out,
// leave Degraded alone.
const PassesFailingAfter = 10 * time.Minute

// withFailingPasses adds to st.Stuck each GPU nml's agent has reported
// Pending with reason PassFailed since at least PassesFailingAfter before
// now, counted from the row's lastTransitionTime (the agent's clock: when
// the GPU last changed phase, so time Pending for another reason before
// the first failed pass counts too). It returns when the next of the
// others reaches that age (zero: none). A node whose agent is lost is left
// as it is: its rows are as last reported, and AgentLost says so.
func withFailingPasses(st NodeState, nml *v1alpha1.NodeMigLayout, now time.Time) (NodeState, time.Time) {
	if nml == nil || st.Lost {
		return st, time.Time{}
	}
	var next time.Time
	for _, g := range nml.Status.GPUs {
		if g.Phase != v1alpha1.PhasePending || g.Reason != v1alpha1.ReasonPassFailed || g.LastTransitionTime == nil {
			continue
		}
		due := g.LastTransitionTime.Add(PassesFailingAfter)
		if now.Before(due) {
			next = earliest(next, due)
			continue
		}
		msg := fmt.Sprintf("Pending since %s, the agent's passes failing", g.LastTransitionTime.UTC().Format(time.RFC3339))
		if g.Message != "" {
			msg += ": " + g.Message
		}
		st.Stuck = append(st.Stuck, StuckGPU{GPU: g.Index, Phase: g.Phase, Reason: g.Reason, Message: truncate(msg, maxRowMessage)})
	}
	return st, next
}

// now is the Reconciler's clock.
func (r *Reconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}
