package controller

import (
	"fmt"
	"slices"
	"time"

	"github.com/miglayout/miglayout/pkg/planner"
)

// defaultReclaimIdleAfter is the planner.Policy.ReclaimIdleAfter of an Auto
// MigLayout that sets no policy.reclaimIdleGPUsAfterSeconds (the CRD's
// default).
const defaultReclaimIdleAfter = 300 * time.Second

// idleTracker remembers, per GPU (node, index and UUID), since when the
// controller has seen it idle (autoIdle): planner.GPU.IdleSince; the zero
// time for a GPU it has seen busy. It lives in memory; a restarted
// controller starts from the agents' counts (mark).
type idleTracker map[string]time.Time

// autoIdle reports whether the planner may count a GPU as idle: no device
// pinned or shared and no change in flight.
func autoIdle(g planner.GPU) bool {
	return !g.Changing && len(g.Pinned) == 0 && len(g.Shared) == 0
}

// mark sets planner.GPU.IdleSince on the GPUs of snap, remembering those
// seen idle first now and forgetting those no longer idle or gone, and
// returns how long until the next idle GPU falls due to be given back
// whole (reclaimDue; 0: none will). A GPU's IdleSince as snap has it on
// entry is its agent's (GPUStatus.IdleSince): for a GPU the tracker has not
// seen before (the controller just started) it is taken, so that a
// restarted controller does not count afresh; one the tracker has seen
// busy counts from the first snapshot that sees it idle, whatever its
// agent says (a pod that came and went between two of the agent's
// passes).
func (t idleTracker) mark(snap *planner.Snapshot) time.Duration {
	seen := map[string]bool{}
	var next time.Duration
	for i := range snap.Nodes {
		n := &snap.Nodes[i]
		for j := range n.GPUs {
			g := &n.GPUs[j]
			reported := g.IdleSince
			g.IdleSince = time.Time{}
			key := fmt.Sprintf("%s/%d/%s", n.Node.Name, g.Info.Index, g.Info.UUID)
			seen[key] = true
			if !autoIdle(*g) {
				t[key] = time.Time{} // seen busy
				continue
			}
			since, ok := t[key]
			switch {
			case !ok && !reported.IsZero() && reported.Before(snap.Now):
				// First seen (the controller just started): its
				// agent's count.
				since = reported
			case !ok || since.IsZero():
				since = snap.Now
			}
			t[key] = since
			g.IdleSince = since
			// Wake when it falls due, if there is anything to do then.
			if at := since.Add(n.Policy.ReclaimIdleAfter); reclaimDue(planner.Snapshot{Now: at}, *n, *g) {
				next = sooner(next, at.Sub(snap.Now))
			}
		}
	}
	for key := range t {
		if !seen[key] {
			delete(t, key)
		}
	}
	return next
}

// reclaimDue reports whether GPU g of node n has been idle for the node's
// ReclaimIdleAfter at snap.Now and is not one whole device yet, on a node
// the planner gives idle GPUs back on (the node's other GPUs hold its
// spares, planner.ReclaimKeepsSpares; the largest profile allowed, not named
// by a DeviceTaintRule): the planner then has a change to make though no
// pod waits.
func reclaimDue(snap planner.Snapshot, n planner.Node, g planner.GPU) bool {
	after := n.Policy.ReclaimIdleAfter
	if after <= 0 || n.Frozen || !planner.ReclaimKeepsSpares(n, g.Info.Index) || g.IdleSince.IsZero() || snap.Now.Sub(g.IdleSince) < after || g.Info.Model == nil {
		return false
	}
	whole, ok := g.Info.Model.Whole()
	if !ok || len(n.Policy.AllowedProfiles) > 0 && !slices.Contains(n.Policy.AllowedProfiles, whole.Profile) || g.Tainted.Contains(whole) {
		return false
	}
	return !(len(g.Layout) == 1 && g.Layout[0] == whole)
}

// anyReclaiming reports whether some GPU of snap is being given back by an
// earlier plan's change (planner.GPU.Reclaiming).
func anyReclaiming(snap planner.Snapshot) bool {
	for _, n := range snap.Nodes {
		for _, g := range n.GPUs {
			if g.Reclaiming {
				return true
			}
		}
	}
	return false
}

// anyReclaimDue reports whether some GPU of snap is reclaimDue.
func anyReclaimDue(snap planner.Snapshot) bool {
	for _, n := range snap.Nodes {
		for _, g := range n.GPUs {
			if reclaimDue(snap, n, g) {
				return true
			}
		}
	}
	return false
}
