package controller

import (
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// rolloutGate bounds how many nodes of a Static MigLayout change at once
// (spec.maxNodesChanging): a node that holds its layout gets a new one only
// while fewer than max nodes have not reached theirs. Nodes are taken in
// the order syncNodes visits them (node name order). A node whose change
// its agent has begun always counts; one whose changes are all still
// unstarted (Ready or Draining on what it holds) counts only within the
// bound, in name order, and beyond it is held on what it holds (overBound):
// the bound set or lowered mid-rollout, or a held node's spec edited by
// hand, starts no more nodes than it allows.
type rolloutGate struct {
	max int
	// changing counts the nodes that have not reached their layout, and
	// those given a new one in this pass; slots names them (with "Blocked"
	// where a GPU of the node waits for a device in use), for the held
	// nodes' rows.
	changing int
	slots    []string
	held     map[string]bool
	// lost are the nodes whose agent is lost, or Unconfirmed (likely
	// lost: AgentHealth), with the note their held rows say: they cannot
	// change now, so they are given no slot (they are held).
	lost map[string]string
	// unseen are the nodes given a new spec by an earlier pass that the
	// cache does not show yet (rolloutExpectations): they count as
	// changing.
	unseen map[string]bool
	// taken are the nodes admit gave a slot this pass (release).
	taken map[string]bool
	// overBound are the nodes whose spec holds only changes their agent
	// has not started, beyond the bound (it was set or lowered, or a spec
	// edited by hand): they are held on what they hold, their unstarted
	// changes dropped (begunOnly).
	overBound map[string]bool
}

// newRolloutGate is the gate of ml, nil where nothing bounds the rollout
// (Auto mode, maxNodesChanging unset, or the MigLayout paused: no node
// gets a new layout then, syncPausedNode). nodes are the NodeMigLayouts of
// the nodes the MigLayout selects, those in conflict or not yet adopted
// included: each that changes counts, and so does each in unseen (given a
// new spec the cache does not show yet). lostAgents are the nodes whose
// agent is lost (AgentHealth.Lost): their unstarted changes take no slot.
func newRolloutGate(ml *v1alpha1.MigLayout, nodes []*v1alpha1.NodeMigLayout, unseen map[string]bool, lostAgents sets.Set[string]) *rolloutGate {
	if ml.Spec.Mode == v1alpha1.ModeAuto || ml.Spec.MaxNodesChanging == nil || ml.Spec.Paused {
		return nil
	}
	g := &rolloutGate{max: int(*ml.Spec.MaxNodesChanging), held: map[string]bool{}, unseen: unseen, taken: map[string]bool{}, overBound: map[string]bool{}}
	var unstarted []*v1alpha1.NodeMigLayout
	for _, nml := range nodes {
		switch {
		case unseen[nml.Name] || !onlyUnstarted(startedOnly(ml, nml)):
			g.changing++
			g.slots = append(g.slots, slotName(nml))
		case changing(startedOnly(ml, nml)):
			unstarted = append(unstarted, nml)
		}
	}
	for _, nml := range unstarted {
		// A node whose agent is lost (not one merely Unconfirmed after a
		// start) carries nothing out: its unstarted change is held, and
		// the slot goes to a node that can use it.
		if g.changing < g.max && !lostAgents.Has(nml.Name) {
			g.changing++
			g.slots = append(g.slots, slotName(nml))
			continue
		}
		g.overBound[nml.Name] = true
	}
	return g
}

// changing reports whether the node has not reached the layout its spec
// asks for (Pending, Draining, Repartitioning, Blocked, Failed, or not
// reported since): it counts against maxNodesChanging. A GPU NVML cannot
// read (GPUUnreadable: fallen off the bus, waiting to be replaced) or does
// not count (GPUMissing: taken out) does not: no rollout can move it, and
// counted it would hold a slot, the rollout's only one with
// maxNodesChanging 1, until someone acts on the hardware. It stays in the
// node's row and in Degraded.
func changing(nml *v1alpha1.NodeMigLayout) bool {
	if nml == nil {
		return false
	}
	// A GPU the spec no longer lists (a rule edited while it drained) that
	// the agent still shows draining or repartitioning: the agent stops
	// its change where it is, and the node counts until it has.
	if slices.ContainsFunc(nml.Status.GPUs, func(g v1alpha1.GPUStatus) bool { return stoppingChange(nml, g) }) {
		return true
	}
	// Else only the GPUs the spec lists: a GPU no spec names (one NVML
	// could never read) has no layout to reach.
	reported := make(map[int32]v1alpha1.GPUStatus, len(nml.Status.GPUs))
	for _, g := range nml.Status.GPUs {
		reported[g.Index] = g
	}
	for _, spec := range nml.Spec.GPUs {
		g, ok := reported[spec.Index]
		if ok && (hardwareGone(g) || forAnotherGPU(spec, g)) {
			continue
		}
		if ok && g.Reason == v1alpha1.ReasonSpecForAnotherGPU && holds(spec, g) {
			// An entry for the GPU NVML numbered there now, which
			// holds it already: the agent takes it without a change.
			continue
		}
		if !ok || g.Phase != v1alpha1.PhaseReady || !holds(spec, g) {
			return true
		}
	}
	return false
}

// stoppingChange reports whether GPU g, which nml's spec does not list,
// is shown draining or repartitioning: a change its spec asked for before
// it dropped the GPU, which the agent stops where it is.
func stoppingChange(nml *v1alpha1.NodeMigLayout, g v1alpha1.GPUStatus) bool {
	if g.Phase != v1alpha1.PhaseDraining && g.Phase != v1alpha1.PhaseRepartitioning {
		return false
	}
	return !slices.ContainsFunc(nml.Spec.GPUs, func(s v1alpha1.GPUSpec) bool { return s.Index == g.Index })
}

// forAnotherGPU reports whether spec was written for another GPU than the
// one the agent reports at its index (SpecForAnotherGPU: NVML numbered the
// GPUs anew): the agent changes nothing on the GPU for it, so it is no
// change under way, and a spec for the GPU there is a new change, which
// waits for a slot.
func forAnotherGPU(spec v1alpha1.GPUSpec, g v1alpha1.GPUStatus) bool {
	return g.Reason == v1alpha1.ReasonSpecForAnotherGPU && spec.UUID != "" && g.UUID != "" && spec.UUID != g.UUID
}

// hardwareGone reports whether the agent reports GPU g failed for a cause
// no spec changes: NVML cannot read it (GPUUnreadable) or does not count it
// (GPUMissing), or NVIDIA's device plugin hands the node's GPUs out
// (DevicePluginActive).
func hardwareGone(g v1alpha1.GPUStatus) bool {
	return g.Phase == v1alpha1.PhaseFailed &&
		(g.Reason == v1alpha1.ReasonGPUUnreadable || g.Reason == v1alpha1.ReasonGPUMissing || g.Reason == v1alpha1.ReasonDevicePluginActive)
}

// admit reports whether the node may be given spec gpus: yes where they ask
// for the layouts its spec or its GPUs have already (a new reason is no
// change), or it is changing anyway (its target moves, or its last spec
// write is not in the cache yet), or while
// the bound is not reached (it then counts); else the node is held.
func (g *rolloutGate) admit(existing *v1alpha1.NodeMigLayout, gpus []v1alpha1.GPUSpec) bool {
	if g != nil && g.overBound[existing.Name] {
		// Its changes not started are dropped (existing is judged so):
		// held, unless the rules ask for what it holds.
		if sameLayouts(existing.Spec.GPUs, gpus) {
			return true
		}
		g.held[existing.Name] = true
		return false
	}
	if g == nil || sameLayouts(existing.Spec.GPUs, gpus) || changing(existing) || g.unseen[existing.Name] {
		return true
	}
	// A node whose GPUs hold gpus already (a node partitioned before the
	// MigLayout, a rule reverted) takes them without changing.
	target := existing.DeepCopy()
	target.Spec.GPUs = gpus
	if !changing(target) {
		return true
	}
	if _, lost := g.lost[existing.Name]; !lost && g.changing < g.max {
		g.changing++
		g.slots = append(g.slots, existing.Name)
		g.taken[existing.Name] = true
		return true
	}
	g.held[existing.Name] = true
	return false
}

// release gives back the slot admit gave node this pass, whose spec write
// the API server refused (Forbidden, Invalid: nothing changes on the node),
// so that the next node in order may take it: a node whose writes are
// always refused would otherwise hold the slot, the rollout's only one with
// maxNodesChanging 1, at every pass.
func (g *rolloutGate) release(node string) {
	if g == nil || !g.taken[node] {
		return
	}
	delete(g.taken, node)
	g.changing--
	g.slots = slices.DeleteFunc(g.slots, func(s string) bool { return s == node })
}

// keepUnreadable returns desired with the spec existing has kept for each
// GPU NVML cannot read or does not count (hardwareGone), which changing
// does not count: a
// new layout for it would otherwise be written without a slot and applied
// once the GPU is back, beside the nodes that hold the slots. Once it is
// read again its new layout waits for a slot like any other.
func keepUnreadable(existing *v1alpha1.NodeMigLayout, desired []v1alpha1.GPUSpec) []v1alpha1.GPUSpec {
	unreadable := map[int32]bool{}
	for _, g := range existing.Status.GPUs {
		if hardwareGone(g) {
			unreadable[g.Index] = true
		}
	}
	if len(unreadable) == 0 {
		return desired
	}
	out := make([]v1alpha1.GPUSpec, 0, len(desired))
	for _, d := range desired {
		if !unreadable[d.Index] {
			out = append(out, d)
			continue
		}
		if i := slices.IndexFunc(existing.Spec.GPUs, func(s v1alpha1.GPUSpec) bool { return s.Index == d.Index }); i >= 0 {
			out = append(out, existing.Spec.GPUs[i])
		}
	}
	return out
}

// heldNote is the row message of a held node.
func (g *rolloutGate) heldNote() string {
	return fmt.Sprintf("waits its turn: at most %d node(s) change at once (spec.maxNodesChanging), %d changing now: %s", g.max, g.changing, truncate(joinBounded(g.slots, 3), 400))
}

// slotName names a node that holds a slot in held nodes' rows: a node
// Blocked on a device in use keeps its slot until the device is released,
// and one Failed until its change succeeds (a retry) or the spec changes,
// so that a rollout stalled on either says so.
func slotName(nml *v1alpha1.NodeMigLayout) string {
	for _, g := range nml.Status.GPUs {
		if (g.Phase == v1alpha1.PhaseBlocked || g.Phase == v1alpha1.PhaseFailed) && !hardwareGone(g) {
			return fmt.Sprintf("%s (gpu %d %s, %s)", nml.Name, g.Index, g.Phase, g.Reason)
		}
	}
	return nml.Name
}

// The notes of the nodes held for their agent (rolloutGate.lost).
const (
	lostNote        = "gets its new layout once its agent is back (spec.maxNodesChanging gives a node whose agent is lost no turn)"
	unconfirmedNote = "gets its new layout once its agent is seen renewing its heartbeat Lease (this controller started less than a lease duration ago; spec.maxNodesChanging gives a node whose agent may be lost no turn)"
)

// hold marks st, the state of a node held back, as waiting: Pending, not
// Ready, with the note first in its message.
func (g *rolloutGate) hold(st NodeState) NodeState {
	st.Ready, st.Progressing = false, !st.Failed
	if st.Row.Phase == v1alpha1.PhaseReady || st.Row.Phase == "" {
		st.Row.Phase = v1alpha1.PhasePending
	}
	msg := g.heldNote()
	if note, lost := g.lost[st.Row.Node]; lost {
		msg = note
	}
	if st.Row.Message != "" {
		msg += "; " + st.Row.Message
	}
	st.Row.Message = truncate(msg, maxRowMessage)
	return st
}

// sameLayouts reports whether a and b ask for the same MIG mode and layout
// of the same GPUs (reasons aside): the same indices, and the same UUIDs
// where both name one (NVML renumbers GPUs: the same index may be another
// GPU).
func sameLayouts(a, b []v1alpha1.GPUSpec) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Index != b[i].Index || a[i].MIGEnabled != b[i].MIGEnabled || a[i].Layout != b[i].Layout {
			return false
		}
		if a[i].UUID != "" && b[i].UUID != "" && a[i].UUID != b[i].UUID {
			return false
		}
	}
	return true
}

// begunOnly is nml with the changes its agent has not started dropped
// (dropUnstarted), each entry's reason saying so.
func begunOnly(nml *v1alpha1.NodeMigLayout) *v1alpha1.NodeMigLayout {
	if nml == nil {
		return nil
	}
	out := nml.DeepCopy()
	out.Spec.GPUs = dropUnstarted(nml, dropForBound)
	return out
}

// dropForBound is the reason prefix of an entry whose change begunOnly
// dropped.
const dropForBound = "beyond spec.maxNodesChanging"

// onlyUnstarted reports whether every change nml holds is one its agent
// has not started (dropUnstarted drops it all): each GPU the spec lists is
// Ready or Draining and holds its entry once dropped, and no GPU the spec
// dropped is still repartitioning. A GPU not reported, or reported in
// another phase (Pending, Repartitioning, Blocked, Failed), may have begun;
// a GPU whose hardware is gone, or whose entry is for another GPU (NVML
// numbered them anew), has no change under way.
func onlyUnstarted(nml *v1alpha1.NodeMigLayout) bool {
	if nml == nil {
		return true
	}
	for _, g := range nml.Status.GPUs {
		if stoppingChange(nml, g) && g.Phase != v1alpha1.PhaseDraining {
			return false
		}
	}
	dropped := begunOnly(nml)
	for k, sp := range dropped.Spec.GPUs {
		if orig := nml.Spec.GPUs[k]; slices.ContainsFunc(nml.Status.GPUs, func(g v1alpha1.GPUStatus) bool {
			return g.Index == orig.Index && (forAnotherGPU(orig, g) || g.Reason == v1alpha1.ReasonSpecForAnotherGPU)
		}) {
			continue
		}
		i := slices.IndexFunc(nml.Status.GPUs, func(g v1alpha1.GPUStatus) bool { return g.Index == sp.Index })
		if i < 0 {
			return false
		}
		g := nml.Status.GPUs[i]
		if hardwareGone(g) || forAnotherGPU(sp, g) {
			continue
		}
		if (g.Phase != v1alpha1.PhaseReady && g.Phase != v1alpha1.PhaseDraining) || !holds(sp, g) {
			return false
		}
	}
	return true
}
