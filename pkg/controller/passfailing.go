package controller

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// PassesFailingAfter is how long the agent's passes may keep failing on a
// GPU (reported Pending with reason PassFailed: they stop before the GPU's
// change is done, the API server unreadable or refusing the agent's
// publication, an NVML observation failing) before the MigLayout counts
// the GPU in Degraded. Shorter outages, which the agent's backoff (up to 2
// minutes) rides out, leave Degraded alone.
const PassesFailingAfter = 10 * time.Minute

// failingPasses remembers when this controller first saw each node's GPU
// reported Pending with PassFailed, until it sees the GPU Ready, Blocked or
// Failed, or no longer reported, or the node's NodeMigLayout is released
// (the node no longer selected), or the node is left alone as selected by
// more than one MigLayout (unless a change begun there is carried out), or
// its MigLayout is deleted, or the node is seen under another MigLayout.
// A retry shows the GPU Draining or Repartitioning, and a new
// spec Pending for another reason, before it fails again: those keep the
// time, so a GPU whose passes fail over and over is judged from its first
// failure (the row's lastTransitionTime moves with each retry's phase, and
// counts time Pending before the first failure too), and a GPU judged
// failing stays so through its retries until one succeeds. A controller
// that starts (or takes the lead) counts from its first sight. It also
// remembers each GPU last reported Blocked or Failed while a retry of the
// same spec shows it in flight (retriesAsStuck), forgotten as above.
type failingPasses struct {
	mu    sync.Mutex
	since map[string]nodeFailing // by node
}

// nodeFailing is what failingPasses keeps of one node: the MigLayout that
// manages it (by name) and, by GPU index, its failing passes and its GPUs
// last reported Blocked or Failed (see retriesAsStuck).
type nodeFailing struct {
	layout string
	gpus   map[int32]failingGPU
	stuck  map[int32]stuckGPURow
}

// failingGPU is one GPU whose passes fail: since when this controller has
// seen them failing, and the message of the last failure it saw (a
// retry's row says what the retry does, not why the last pass failed).
type failingGPU struct {
	since time.Time
	last  string
}

// observe records nml's GPU rows, node's under the MigLayout named layout,
// at now and returns, per GPU whose passes fail (reported Pending with
// PassFailed, or retrying after such a report), since when this controller
// has seen them failing and the last failure's message. A nil nml forgets
// node, and so does a layout other than the one node was last seen under.
func (f *failingPasses) observe(layout, node string, nml *v1alpha1.NodeMigLayout, now time.Time) map[int32]failingGPU {
	f.mu.Lock()
	defer f.mu.Unlock()
	if nml == nil {
		delete(f.since, node)
		return nil
	}
	var prev map[int32]failingGPU
	var stuck map[int32]stuckGPURow
	if n, ok := f.since[node]; ok && n.layout == layout {
		prev, stuck = n.gpus, n.stuck
	}
	var kept map[int32]failingGPU
	for _, g := range nml.Status.GPUs {
		fg, seen := prev[g.Index]
		switch {
		case g.Phase == v1alpha1.PhasePending && g.Reason == v1alpha1.ReasonPassFailed:
			if !seen {
				fg.since = now
			}
			fg.last = g.Message
		case !seen || g.Phase == v1alpha1.PhaseReady || g.Phase == v1alpha1.PhaseBlocked || g.Phase == v1alpha1.PhaseFailed:
			continue
		}
		if kept == nil {
			kept = map[int32]failingGPU{}
		}
		kept[g.Index] = fg
	}
	stuck = rememberStuck(stuck, nml)
	if kept == nil && stuck == nil {
		delete(f.since, node)
	} else {
		if f.since == nil {
			f.since = map[string]nodeFailing{}
		}
		f.since[node] = nodeFailing{layout: layout, gpus: kept, stuck: stuck}
	}
	return kept
}

// retriesAsStuck returns nml as the MigLayout's status judges it: where
// the agent retries a GPU it last reported Blocked or Failed (failingPasses
// remembers the row, observe) and the GPU's spec has not changed since,
// the retry's Draining or Repartitioning row, or the PassFailed row of a
// retry whose pass failed (its message then added), is shown as the
// Blocked or Failed row it retries (phase, reason, message and
// lastTransitionTime; the rest as reported now). A GPU whose change fails, or waits on a device
// another NVML client holds, is retried with a backoff of up to 2 minutes,
// and each retry drains its devices again: judged by the retry's row,
// Degraded, the node counts and the Blocked event would flap with every
// retry, and an alert that waits for a GPU blocked for hours would never
// fire. nml itself is returned where no row is so shown; nil stays nil.
// What starts or cancels changes reads the reported rows, not these.
func (f *failingPasses) retriesAsStuck(layout, node string, nml *v1alpha1.NodeMigLayout) *v1alpha1.NodeMigLayout {
	if nml == nil {
		return nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	n, ok := f.since[node]
	if !ok || n.layout != layout || len(n.stuck) == 0 {
		return nml
	}
	var view *v1alpha1.NodeMigLayout
	for i, g := range nml.Status.GPUs {
		was, ok := n.stuck[g.Index]
		if !ok || !retrying(g) || !sameSpec(was, nml, g.Index) {
			continue
		}
		if view == nil {
			view = nml.DeepCopy()
		}
		row := &view.Status.GPUs[i]
		msg := was.row.Message
		if g.Phase == v1alpha1.PhasePending {
			// First: the row's message may be long already.
			msg = truncate(msgRetryPassFailed+g.Message+"; before: "+msg, maxRowMessage)
		}
		row.Phase, row.Reason, row.Message, row.LastTransitionTime = was.row.Phase, was.row.Reason, msg, was.row.LastTransitionTime
	}
	if view == nil {
		return nml
	}
	return view
}

// msgRetryPassFailed starts the message of a GPU judged as the Blocked or
// Failed row it retries after the retry's pass failed (retriesAsStuck).
const msgRetryPassFailed = "its last retry's pass failed: "

// stuckGPURow is a GPU row reported Blocked or Failed and the GPU's spec
// (MIG mode and layout) then.
type stuckGPURow struct {
	row     v1alpha1.GPUStatus
	spec    v1alpha1.GPUSpec
	hasSpec bool
}

// rememberStuck updates prev, the GPU rows of a node last reported Blocked
// or Failed, with nml's rows: a row Blocked or Failed is remembered with
// the GPU's spec (where the agent has acted on the spec nml holds: its
// status.observedGeneration is the spec's generation); a retry of it
// (Draining or Repartitioning, the spec unchanged) keeps it; any other
// row, a changed spec or a GPU no longer reported forgets it. Nil where
// none is left.
func rememberStuck(prev map[int32]stuckGPURow, nml *v1alpha1.NodeMigLayout) map[int32]stuckGPURow {
	var out map[int32]stuckGPURow
	keep := func(idx int32, s stuckGPURow) {
		if out == nil {
			out = map[int32]stuckGPURow{}
		}
		out[idx] = s
	}
	for _, g := range nml.Status.GPUs {
		switch was, ok := prev[g.Index]; {
		case (g.Phase == v1alpha1.PhaseBlocked || g.Phase == v1alpha1.PhaseFailed) && nml.Status.ObservedGeneration == nml.Generation:
			sp, has := gpuSpec(nml, g.Index)
			keep(g.Index, stuckGPURow{row: g, spec: sp, hasSpec: has})
		case g.Phase == v1alpha1.PhaseBlocked || g.Phase == v1alpha1.PhaseFailed:
			// The outcome of an earlier spec: what it was reported on is
			// not this spec, which the agent has not acted on yet.
			if ok {
				keep(g.Index, was)
			}
		case ok && retrying(g) && sameSpec(was, nml, g.Index):
			keep(g.Index, was)
		}
	}
	return out
}

// retrying reports whether row g shows the GPU in flight, or a pass that
// failed as a whole while it was (PassFailed): a retry, where it was
// Blocked or Failed before.
func retrying(g v1alpha1.GPUStatus) bool {
	return g.Phase == v1alpha1.PhaseDraining || g.Phase == v1alpha1.PhaseRepartitioning ||
		g.Phase == v1alpha1.PhasePending && g.Reason == v1alpha1.ReasonPassFailed
}

// sameSpec reports whether nml's spec of GPU idx asks for what it asked
// for when was was reported (MIG mode and layout, of the same GPU: an
// entry written again for the GPU NVML numbered anew at its index is a new
// change; a new reason or list of pods served is none).
func sameSpec(was stuckGPURow, nml *v1alpha1.NodeMigLayout, idx int32) bool {
	sp, has := gpuSpec(nml, idx)
	return has && was.hasSpec && sp.MIGEnabled == was.spec.MIGEnabled && sp.Layout == was.spec.Layout &&
		(was.spec.UUID == "" || sp.UUID == was.spec.UUID) // "": an entry of an earlier release, its GPU's
}

// gpuSpec is nml's spec of GPU idx, if it lists the GPU.
func gpuSpec(nml *v1alpha1.NodeMigLayout, idx int32) (v1alpha1.GPUSpec, bool) {
	for _, sp := range nml.Spec.GPUs {
		if sp.Index == idx {
			return sp, true
		}
	}
	return v1alpha1.GPUSpec{}, false
}

// forget drops what is remembered of node under the MigLayout named
// layout: it released the node's NodeMigLayout (the node no longer
// selected), or leaves the node alone (selected by more than one MigLayout,
// no change of its carried out there). What another MigLayout, the node's
// owner, remembers of it stays: reconciles of the MigLayouts in conflict
// with it come as often as its own.
func (f *failingPasses) forget(node, layout string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if n, ok := f.since[node]; ok && n.layout == layout {
		delete(f.since, node)
	}
}

// forgetLayout drops what is remembered of the nodes last seen under the
// MigLayout named layout: it is deleted, and its NodeMigLayouts go by
// garbage collection.
func (f *failingPasses) forgetLayout(layout string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for node, n := range f.since {
		if n.layout == layout {
			delete(f.since, node)
		}
	}
}

// withFailingPasses adds to st.Stuck, with reason PassFailed, each GPU of
// nml whose passes have failed since (failingPasses.observe) at least
// PassesFailingAfter before now, also while a retry drains or
// repartitions it (Degraded would otherwise go False with each retry and
// True again with its failure), and returns when the next of the others
// reaches that age (zero: none). The node stays Progressing: the agent
// retries. A node whose agent is lost is left as it is: its rows are as
// last reported, and AgentLost says so.
func withFailingPasses(st NodeState, nml *v1alpha1.NodeMigLayout, failing map[int32]failingGPU, now time.Time) (NodeState, time.Time) {
	if nml == nil || st.Lost {
		return st, time.Time{}
	}
	var next time.Time
	for _, g := range nml.Status.GPUs {
		f, ok := failing[g.Index]
		if !ok {
			continue
		}
		due := f.since.Add(PassesFailingAfter)
		if now.Before(due) {
			next = earliest(next, due)
			continue
		}
		msg := fmt.Sprintf("the agent's passes failing since %s", f.since.UTC().Format(time.RFC3339))
		if g.Phase == v1alpha1.PhaseBlocked || g.Phase == v1alpha1.PhaseFailed {
			// The retry of a GPU stuck already (retriesAsStuck), counted
			// once. Where it was blocked by devices in use, its passes
			// failing for long are why it is stuck now: the agent drains
			// a GPU again only once none of its devices is in use. Other
			// reasons (a reset required, NVML's errors) stand, the retry's
			// error first in their message (retriesAsStuck).
			if g.Reason != v1alpha1.ReasonDeviceInUse && g.Reason != v1alpha1.ReasonUnknownAllocation {
				continue
			}
			if strings.HasPrefix(g.Message, msgRetryPassFailed) {
				msg += "; " + strings.Replace(g.Message, "; before: ", fmt.Sprintf("; before: %s (%s): ", g.Phase, g.Reason), 1)
			} else {
				if f.last != "" {
					msg += "; the last: " + f.last
				}
				msg += fmt.Sprintf("; before: %s (%s): %s", g.Phase, g.Reason, g.Message)
			}
			if i := slices.IndexFunc(st.Stuck, func(s StuckGPU) bool { return s.GPU == g.Index }); i >= 0 {
				st.Stuck[i].Reason, st.Stuck[i].Message = v1alpha1.ReasonPassFailed, truncate(msg, maxRowMessage)
			}
			continue
		}
		if f.last != "" {
			msg += "; the last: " + f.last
		}
		if g.Phase != v1alpha1.PhasePending || g.Reason != v1alpha1.ReasonPassFailed {
			msg += fmt.Sprintf("; now %s (%s)", g.Phase, g.Reason)
		}
		st.Stuck = append(st.Stuck, StuckGPU{GPU: g.Index, Phase: g.Phase, Reason: v1alpha1.ReasonPassFailed, Message: truncate(msg, maxRowMessage)})
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
