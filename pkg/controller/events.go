package controller

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// Event reasons the controller records on MigLayouts.
const (
	// EventRepartitioned (Normal): a node turned Ready after not being Ready.
	EventRepartitioned = "Repartitioned"
	// EventBlocked (Warning): a GPU went Blocked.
	EventBlocked = "Blocked"
	// EventInvalidLayout (Warning): a rule cannot be applied to a GPU.
	EventInvalidLayout = v1alpha1.ReasonInvalidLayout
	// EventUnknownGPU (Warning): a rule matches a GPU the catalog lacks.
	EventUnknownGPU = v1alpha1.ReasonUnknownGPU
	// EventConflict (Warning): another MigLayout selects some of the same nodes.
	EventConflict = "Conflict"
	// EventRuleMatchesNoGPU, EventProfileNotOffered and
	// EventSparesNotHoldable (Warning): a part of the spec applies to no GPU
	// of the selected nodes (see SpecProblem); recorded when it appears.
	// EventNoNodes (Warning): the node selector selects no node.
	EventRuleMatchesNoGPU  = v1alpha1.ReasonRuleMatchesNoGPU
	EventProfileNotOffered = v1alpha1.ReasonProfileNotOffered
	EventSparesNotHoldable = v1alpha1.ReasonSparesNotHoldable
	EventNoNodes           = v1alpha1.ReasonNoNodes
	// EventAgentLost (Warning): a node's agent stopped renewing its
	// heartbeat Lease (see v1alpha1.ReasonAgentLost).
	EventAgentLost = v1alpha1.ReasonAgentLost
	// EventAgentReturned (Normal): a lost agent renews its Lease again.
	EventAgentReturned = "AgentReturned"
	// EventNodeMigLayoutWriteFailed (Warning): the API server refused the
	// controller's create or write of a node's NodeMigLayout (see
	// v1alpha1.ReasonNodeMigLayoutWriteFailed); once while it keeps
	// refusing.
	EventNodeMigLayoutWriteFailed = v1alpha1.ReasonNodeMigLayoutWriteFailed
	// EventPaused (Normal): spec.paused was set; EventResumed (Normal): it
	// was set back to false.
	EventPaused  = v1alpha1.ReasonPaused
	EventResumed = "Resumed"
)

// Event is one event to record on the MigLayout.
type Event struct {
	Type, Reason, Action, Note string
	// Node, for an event about one node, names it: the node's
	// NodeMigLayout is the event's related object. The events.k8s.io
	// recorder counts an event whose type, reason, action, regarding and
	// related objects match one recorded in the last minutes as a repeat
	// of it and drops its note: the second node's Repartitioned would be
	// lost. (Events about one GPU of a node carry the GPU in their action
	// as well, gpuAction.)
	Node string
}

// gpuAction is the action of an event about one GPU ("RepartitionGPU1"):
// see Event.Node.
func gpuAction(action string, gpu int32) string { return fmt.Sprintf("%sGPU%d", action, gpu) }

// gpuRef is a GPU of a node an event is about.
type gpuRef struct {
	node string
	gpu  int
}

// nodeMigLayoutRef is node's NodeMigLayout as an event's related object.
func nodeMigLayoutRef(node string) *v1alpha1.NodeMigLayout {
	return &v1alpha1.NodeMigLayout{TypeMeta: metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: "NodeMigLayout"},
		ObjectMeta: metav1.ObjectMeta{Name: node}}
}

// maxSpecProblemEvents is how many spec problems get an event: the first
// ones, which the Degraded message names in full.
const maxSpecProblemEvents = 4

// maxGPUProblemEvents is how many GPU problems (a GPU Blocked, a rule that
// fails on a GPU) one observation tells each in its own event; the ones
// past it are told in one event per reason, with their count. A rule
// invalid for a model is a problem on every GPU of that model: one event
// per GPU of a fleet would flood the API server and overflow the event
// broadcaster's queue (1000 events), dropping other events with them.
const maxGPUProblemEvents = 16

// maxEventNote is the events.k8s.io/v1 limit on an event's note.
const maxEventNote = 1024

// Transitions compares the status a MigLayout had with the observation just
// made and returns the events that the change deserves: each fires once, on
// the transition, not on every reconcile. prev's rows are bounded: a node
// not Ready beyond them is also recorded in the keys returned (the layouts
// its GPUs held), so that its Repartitioned event fires once it is Ready.
//
// Problems (a GPU Blocked, a rule that fails on a GPU, a spec problem) are
// also told by seen, the keys of the problems present at the previous
// transition, which Transitions returns updated: a problem fires when its
// key is not in seen, whether or not its node has a row in prev (rows are
// capped) or the Degraded message still names it (it names a few). seen nil
// (the controller restarted) falls back to prev alone.
func Transitions(prev *v1alpha1.MigLayoutStatus, obs Observation, seen sets.Set[string]) ([]Event, sets.Set[string]) {
	rows := make(map[string]v1alpha1.NodeRow, len(prev.Nodes))
	for _, r := range prev.Nodes {
		rows[r.Node] = r
	}
	var out []Event
	add := func(node, typ, reason, action, format string, args ...any) {
		out = append(out, Event{Type: typ, Reason: reason, Action: action, Note: truncate(fmt.Sprintf(format, args...), maxEventNote), Node: node})
	}
	now := sets.New[string]()
	// isNew records a present problem and reports whether it is new.
	isNew := func(key string, newInPrev bool) bool {
		now.Insert(key)
		if seen == nil {
			return newInPrev
		}
		return !seen.Has(key)
	}
	changing := changingRows(seen)
	// Without seen, a node with no row in prev is new, unless prev's rows
	// are full and end with a node not Ready: nodes not Ready come first,
	// so such a node's problems may have been told without a row.
	rowsFull := len(prev.Nodes) >= maxNodeRows && prev.Nodes[len(prev.Nodes)-1].Phase != v1alpha1.PhaseReady
	// GPU problems past maxGPUProblemEvents, by event reason.
	type untoldGPUs struct {
		action string
		gpus   int
		nodes  sets.Set[string]
	}
	untold := map[string]*untoldGPUs{}
	told := 0
	tellGPU := func(node, reason, action string, gpu int32, format string, args ...any) {
		if told < maxGPUProblemEvents {
			told++
			add(node, corev1.EventTypeWarning, reason, gpuAction(action, gpu), format, args...)
			return
		}
		u := untold[reason]
		if u == nil {
			u = &untoldGPUs{action: action, nodes: sets.New[string]()}
			untold[reason] = u
		}
		u.gpus++
		u.nodes.Insert(node)
	}
	for _, n := range obs.Nodes {
		if n.Conflict {
			continue
		}
		lostKey := EventAgentLost + "\x00" + n.Row.Node
		before, hasRow := rows[n.Row.Node]
		if !hasRow {
			before, hasRow = changing[n.Row.Node]
		}
		// A lost node too, with the layouts it last reported: back with
		// them changed, it is told Repartitioned with or without a row.
		if !n.Ready && len(n.Row.GPUs) > 0 {
			now.Insert(changingKey(n.Row))
		}
		wasLost := (hasRow && before.Phase == v1alpha1.PhaseUnknown) || seen.Has(lostKey)
		switch {
		case n.Lost:
			if isNew(lostKey, !wasLost) {
				add(n.Row.Node, corev1.EventTypeWarning, EventAgentLost, "Heartbeat", "node %s: %s", n.Row.Node, n.LostMessage)
			}
		case wasLost:
			add(n.Row.Node, corev1.EventTypeNormal, EventAgentReturned, "Heartbeat", "node %s: the agent renews its heartbeat Lease again", n.Row.Node)
			// Back with its layout changed while it was lost (the GPU rows
			// kept as last reported): the Repartitioned of that change,
			// which no later pass tells (the node is Ready then).
			if n.Ready && hasRow && actualChanged(before, n.Row) {
				add(n.Row.Node, corev1.EventTypeNormal, EventRepartitioned, "Repartition", "node %s holds the desired layout%s", n.Row.Node, describeGPUs(changedGPUs(before, n.Row)))
			}
		case n.Ready && hasRow && before.Phase != v1alpha1.PhaseReady && actualChanged(before, n.Row):
			// Ready now after a row whose GPUs held other layouts: not a
			// node left as it was (a conflict: no phase), one whose agent
			// had not reported (no GPU rows), nor one held back by
			// maxNodesChanging whose rule was reverted meanwhile.
			add(n.Row.Node, corev1.EventTypeNormal, EventRepartitioned, "Repartition", "node %s holds the desired layout%s", n.Row.Node, describeGPUs(changedGPUs(before, n.Row)))
		}
		if n.WriteError != "" {
			key := EventNodeMigLayoutWriteFailed + "\x00" + n.Row.Node
			if isNew(key, !strings.HasPrefix(before.Message, msgWriteFailed)) {
				add(n.Row.Node, corev1.EventTypeWarning, EventNodeMigLayoutWriteFailed, "WriteNodeMigLayout", "node %s: %s: %s", n.Row.Node, msgWriteFailed, n.WriteError)
			}
		}
		toldWithoutRow := !hasRow && rowsFull
		for _, g := range n.Stuck {
			if g.Phase != v1alpha1.PhaseBlocked {
				continue
			}
			key := fmt.Sprintf("%s\x00%s\x00%d", EventBlocked, n.Row.Node, g.GPU)
			// A GPU whose rule cannot be applied has its row Failed, its
			// kept change Blocked all the same: the row's message says so.
			wasBlocked := gpuPhase(before, g.GPU) == v1alpha1.PhaseBlocked ||
				gpuPhase(before, g.GPU) == v1alpha1.PhaseFailed && slices.ContainsFunc(n.Problems, func(p Problem) bool { return p.GPU == g.GPU }) &&
					strings.Contains(before.Message, fmt.Sprintf("gpu %d: %s", g.GPU, v1alpha1.PhaseBlocked))
			if isNew(key, !toldWithoutRow && !wasBlocked) {
				tellGPU(n.Row.Node, EventBlocked, "Repartition", g.GPU, "node %s gpu %d is blocked (%s): %s", n.Row.Node, g.GPU, stuckReason(g), g.Message)
			}
		}
		for _, p := range n.Problems {
			key := fmt.Sprintf("%s\x00%s\x00%d\x00%s", p.Reason, n.Row.Node, p.GPU, p.Message)
			if isNew(key, !toldWithoutRow && gpuPhase(before, p.GPU) != v1alpha1.PhaseFailed) {
				tellGPU(n.Row.Node, p.Reason, "ComputeLayout", p.GPU, "node %s %s; the GPU keeps the layout it holds (a change begun is carried out, one not begun dropped)", n.Row.Node, p.Message)
			}
		}
	}
	for _, reason := range slices.Sorted(maps.Keys(untold)) {
		u := untold[reason]
		where := "the MigLayout's Degraded condition names the first; kubectl miglayout plan shows each GPU's"
		if reason == EventBlocked {
			where = "the nodes' NodeMigLayout status says why (kubectl miglayout status)"
		}
		add("", corev1.EventTypeWarning, reason, u.action+"ManyGPUs", "%s on %d more GPUs of %d nodes (%s); %s",
			reason, u.gpus, u.nodes.Len(), strings.Join(firstNames(sets.List(u.nodes), 3), ", "), where)
	}
	// A spec problem is one per reason and part of the spec, per
	// generation of the spec (its message, which counts the nodes and GPUs
	// it was judged on, changes as nodes join and leave: no new warning for
	// that; an edit of the spec that leaves a problem, or changes what it
	// is, is told again). Without seen, it is new unless the Degraded
	// condition already names it. Only the first few get an event, rather
	// than one for each of many.
	degraded := meta.FindStatusCondition(prev.Conditions, v1alpha1.ConditionDegraded)
	for i, p := range obs.SpecProblems {
		named := degraded != nil && degraded.Status == metav1.ConditionTrue && strings.Contains(degraded.Message, p.Message)
		if isNew(fmt.Sprintf("%s\x00%s\x00%d", p.Reason, p.Subject, obs.Generation), !named) && i < maxSpecProblemEvents {
			add("", corev1.EventTypeWarning, p.Reason, "CheckSpec", "%s", p.Message)
		}
	}
	// A conflict is told when the other MigLayouts change, not the nodes
	// they share (a pool that scales would warn at every node).
	if msg := obs.Selection.ConflictMessage(); msg != "" {
		c := meta.FindStatusCondition(prev.Conditions, v1alpha1.ConditionConflict)
		key, named := EventConflict, c != nil && c.Status == metav1.ConditionTrue
		for _, other := range slices.Sorted(maps.Keys(obs.Selection.Conflicts)) {
			key += fmt.Sprintf("\x00%s/%t", other, obs.Selection.InvalidHolders[other])
			named = named && strings.Contains(c.Message, fmt.Sprintf("MigLayout %q", other))
		}
		if isNew(key, !named) {
			add("", corev1.EventTypeWarning, EventConflict, "SelectNodes", "%s", msg)
		}
	}
	// A pause is told when it begins and when it ends.
	c := meta.FindStatusCondition(prev.Conditions, v1alpha1.ConditionPaused)
	wasPaused := c != nil && c.Status == metav1.ConditionTrue
	switch {
	case obs.Paused:
		if isNew(EventPaused, !wasPaused) {
			add("", corev1.EventTypeNormal, EventPaused, "Pause", "%s", msgPaused)
		}
	case seen == nil && wasPaused, seen.Has(EventPaused):
		add("", corev1.EventTypeNormal, EventResumed, "Resume", "spec.paused is unset: changes are started on the nodes again")
	}
	return out, now
}

// msgPaused says what a pause does (the Paused condition and event).
const msgPaused = "spec.paused is set: no change is started on the nodes; changes under way finish"

func gpuPhase(row v1alpha1.NodeRow, gpu int32) v1alpha1.GPUPhase {
	for _, g := range row.GPUs {
		if g.Index == gpu {
			return g.Phase
		}
	}
	return ""
}

func describeGPUs(gpus []v1alpha1.GPURow) string {
	if len(gpus) == 0 {
		return ""
	}
	parts := make([]string, len(gpus))
	for i, g := range gpus {
		parts[i] = fmt.Sprintf("gpu %d %q", g.Index, g.Desired)
	}
	return "; changed: " + strings.Join(parts, ", ")
}

// changingPrefix starts the keys of the nodes not Ready (changingKey).
const changingPrefix = "Changing\x00"

// changingKey records a node not Ready with the layouts its GPUs hold
// ("Changing\x00node\x00index=layout;..."), for a node that may have no
// row in the status (Transitions).
func changingKey(row v1alpha1.NodeRow) string {
	parts := make([]string, len(row.GPUs))
	for i, g := range row.GPUs {
		parts[i] = fmt.Sprintf("%d=%s", g.Index, g.Actual)
	}
	return changingPrefix + row.Node + "\x00" + strings.Join(parts, ";")
}

// changingRows are the rows changingKey recorded in seen, by node, with
// their GPUs' indexes and actual layouts only.
func changingRows(seen sets.Set[string]) map[string]v1alpha1.NodeRow {
	out := map[string]v1alpha1.NodeRow{}
	for key := range seen {
		rest, ok := strings.CutPrefix(key, changingPrefix)
		if !ok {
			continue
		}
		node, gpus, _ := strings.Cut(rest, "\x00")
		row := v1alpha1.NodeRow{Node: node}
		for _, g := range strings.Split(gpus, ";") {
			idx, actual, _ := strings.Cut(g, "=")
			i, err := strconv.Atoi(idx)
			if err != nil {
				continue
			}
			row.GPUs = append(row.GPUs, v1alpha1.GPURow{Index: int32(i), Actual: actual})
		}
		out[node] = row
	}
	return out
}

// changedGPUs returns the GPUs of row now that hold another layout than in
// row before (both listing them): those a Repartitioned event names, not
// the ones left as they were (no rule matches them, or none of their
// layout changed).
func changedGPUs(before, now v1alpha1.NodeRow) []v1alpha1.GPURow {
	var out []v1alpha1.GPURow
	for _, g := range now.GPUs {
		i := slices.IndexFunc(before.GPUs, func(b v1alpha1.GPURow) bool { return b.Index == g.Index })
		if i >= 0 && before.GPUs[i].Actual != g.Actual {
			out = append(out, g)
		}
	}
	return out
}

// actualChanged reports whether a GPU of row now holds another layout than
// in row before (both listing it).
func actualChanged(before, now v1alpha1.NodeRow) bool {
	return len(changedGPUs(before, now)) > 0
}
