package controller

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// Observation is everything one reconcile learned about a MigLayout.
type Observation struct {
	// Generation is the MigLayout's metadata.generation.
	Generation int64
	// Mode is the MigLayout's mode.
	Mode v1alpha1.LayoutMode
	// Selection is what the node selector picks; SelectorErr is set instead
	// when the selector does not parse.
	Selection   Selection
	SelectorErr error
	// HeldChanging, with SelectorErr, are the nodes whose NodeMigLayout
	// the MigLayout controls that are on their way to a change written
	// before its selector stopped parsing (Reconciler.heldChanging): no new
	// change starts, but their agents go on with that one.
	HeldChanging []string
	// Nodes has one state per selected node.
	Nodes []NodeState
	// SpecProblems are the parts of the spec that apply to no GPU of the
	// selected nodes (CheckSpec).
	SpecProblems []SpecProblem
	// Paused is the MigLayout's spec.paused.
	Paused bool
}

const maxConditionMessage = 2048

// ApplyStatus writes the observation into status: counts, rows,
// observedGeneration and the five conditions (transition times kept when a
// condition's status does not change).
func ApplyStatus(status *v1alpha1.MigLayoutStatus, obs Observation) {
	s := summarize(obs.Nodes)
	status.ObservedGeneration = obs.Generation
	status.SelectedNodes = s.selected
	status.ReadyNodes = s.ready
	status.ProgressingNodes = s.progressing
	status.FailedNodes = s.failed
	status.Nodes = s.rows
	for _, c := range Conditions(obs) {
		meta.SetStatusCondition(&status.Conditions, c)
	}
}

// Conditions computes Ready, Progressing, Degraded, Conflict and Paused, in
// that order, without transition times.
func Conditions(obs Observation) []metav1.Condition {
	s := summarize(obs.Nodes)
	cond := func(t string, ok bool, reason, format string, args ...any) metav1.Condition {
		status := metav1.ConditionFalse
		if ok {
			status = metav1.ConditionTrue
		}
		return metav1.Condition{
			Type: t, Status: status, Reason: reason, ObservedGeneration: obs.Generation,
			Message: truncate(fmt.Sprintf(format, args...), maxConditionMessage),
		}
	}
	var ready, progressing metav1.Condition
	switch {
	case obs.SelectorErr != nil:
		ready = cond(v1alpha1.ConditionReady, false, v1alpha1.ReasonInvalidSelector, "%v", obs.SelectorErr)
		progressing = cond(v1alpha1.ConditionProgressing, false, v1alpha1.ReasonStable, "no node is selected")
		if n := int32(len(obs.HeldChanging)); n > 0 {
			progressing = cond(v1alpha1.ConditionProgressing, true, v1alpha1.ReasonRepartitioning,
				"no node is selected, but %d %s this MigLayout holds %s out a change written before its node selector stopped parsing (kubectl describe nodemiglayout): %s",
				n, plural(n, "node", "nodes"), plural(n, "carries", "carry"), joinBounded(obs.HeldChanging, 8))
		}
	case s.selected == 0:
		ready = cond(v1alpha1.ConditionReady, false, v1alpha1.ReasonNoNodes, "the node selector selects no node")
		progressing = cond(v1alpha1.ConditionProgressing, false, v1alpha1.ReasonNoNodes, "the node selector selects no node")
	default:
		ready = readyCondition(s, cond)
		if s.changing > 0 {
			progressing = cond(v1alpha1.ConditionProgressing, true, v1alpha1.ReasonRepartitioning,
				"%d %s on the way to the desired layout: %s", s.changing, plural(s.changing, "node is", "nodes are"), progressingNodes(obs.Nodes))
		} else if obs.Paused {
			progressing = cond(v1alpha1.ConditionProgressing, false, v1alpha1.ReasonPaused, "%s", msgPaused)
		} else {
			progressing = cond(v1alpha1.ConditionProgressing, false, v1alpha1.ReasonStable, "no node is changing")
		}
	}
	degraded := degradedCondition(obs, cond)
	conflict := cond(v1alpha1.ConditionConflict, false, v1alpha1.ReasonNoConflict, "no other MigLayout selects these nodes")
	if msg := obs.Selection.ConflictMessage(); msg != "" {
		conflict = cond(v1alpha1.ConditionConflict, true, v1alpha1.ReasonOverlappingSelectors, "%s", msg)
	}
	paused := cond(v1alpha1.ConditionPaused, false, v1alpha1.ReasonNotPaused, "spec.paused is not set")
	if obs.Paused {
		paused = cond(v1alpha1.ConditionPaused, true, v1alpha1.ReasonPaused, "%s", msgPaused)
	}
	return []metav1.Condition{ready, progressing, degraded, conflict, paused}
}

type condFunc func(t string, ok bool, reason, format string, args ...any) metav1.Condition

func readyCondition(s summary, cond condFunc) metav1.Condition {
	if s.ready == s.selected {
		if s.selected == 1 {
			return cond(v1alpha1.ConditionReady, true, v1alpha1.ReasonAllNodesReady, "its 1 node holds the desired layout")
		}
		return cond(v1alpha1.ConditionReady, true, v1alpha1.ReasonAllNodesReady, "all %d nodes hold the desired layout", s.selected)
	}
	notReady := s.selected - s.ready
	reason := v1alpha1.ReasonNodesNotReady
	switch {
	case s.silent == notReady:
		reason = v1alpha1.ReasonAgentNotReporting
	case s.lost > 0 && s.lost+s.silent == notReady:
		reason = v1alpha1.ReasonAgentLost
	}
	var parts []string
	for _, p := range []struct {
		n    int32
		what string
	}{{s.progressing, "progressing"}, {s.failed - s.blocked, "failed"}, {s.blocked, "blocked"}, {s.conflict, "in conflict"}, {s.paused, "paused"}, {s.silent, "waiting for the agent's report"}, {s.lost, "with a lost agent"}} {
		if p.n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", p.n, p.what))
		}
	}
	return cond(v1alpha1.ConditionReady, false, reason, "%d of %d %s %s not ready: %s",
		notReady, s.selected, plural(s.selected, "node", "nodes"), plural(notReady, "is", "are"), strings.Join(parts, ", "))
}

// degradedReasons orders the reasons of Degraded: the first one present wins.
var degradedReasons = []string{
	v1alpha1.ReasonInvalidSelector, v1alpha1.ReasonNodeMigLayoutWriteFailed, v1alpha1.ReasonAgentLost, v1alpha1.ReasonDevicePluginActive, v1alpha1.ReasonGPUUnreadable, v1alpha1.ReasonGPUMissing, v1alpha1.ReasonInvalidLayout, v1alpha1.ReasonUnknownGPU, v1alpha1.ReasonSpecForAnotherGPU,
	v1alpha1.ReasonDeviceInUse, v1alpha1.ReasonUnknownAllocation, v1alpha1.ReasonResetRequired, v1alpha1.ReasonNVMLError, v1alpha1.ReasonDeviceTaintsUnsupported,
	v1alpha1.ReasonJournalUnwritable, v1alpha1.ReasonPassFailed, v1alpha1.ReasonNoNodes, v1alpha1.ReasonRuleMatchesNoGPU, v1alpha1.ReasonProfileNotOffered, v1alpha1.ReasonSparesNotHoldable,
}

func degradedCondition(obs Observation, cond condFunc) metav1.Condition {
	if obs.SelectorErr != nil {
		return cond(v1alpha1.ConditionDegraded, true, v1alpha1.ReasonInvalidSelector, "%v", obs.SelectorErr)
	}
	seen := map[string]bool{}
	// The problems are told in the order of their reasons (degradedReasons),
	// so that the bounded message names the one the reason gives first.
	type entry struct {
		rank int
		msg  string
	}
	var entries []entry
	add := func(reason, msg string) {
		seen[reason] = true
		rank := slices.Index(degradedReasons, reason)
		if rank < 0 {
			rank = len(degradedReasons)
		}
		entries = append(entries, entry{rank, msg})
	}
	var lost, unwritten int32
	for _, n := range obs.Nodes {
		if n.WriteError != "" {
			unwritten++
			add(v1alpha1.ReasonNodeMigLayoutWriteFailed, fmt.Sprintf("node %s: %s: %s", n.Row.Node, msgWriteFailed, n.WriteError))
		}
		if n.Lost {
			lost++
			add(v1alpha1.ReasonAgentLost, fmt.Sprintf("node %s: %s", n.Row.Node, n.LostMessage))
		}
	}
	gpuProblems := 0
	for _, n := range obs.Nodes {
		// One rule failing alike on several GPUs of the node is told once.
		for _, p := range n.Problems {
			gpuProblems++
			seen[p.Reason] = true
		}
		for _, g := range groupProblems(n.Problems) {
			add(g.reason, "node "+n.Row.Node+" "+g.text())
		}
		for _, g := range n.Stuck {
			gpuProblems++
			r := stuckReason(g)
			msg := fmt.Sprintf("node %s gpu %d: %s (%s)", n.Row.Node, g.GPU, g.Phase, r)
			if g.Message != "" {
				msg += ": " + g.Message
			}
			add(r, msg)
		}
	}
	for _, p := range obs.SpecProblems {
		add(p.Reason, p.Message)
	}
	slices.SortStableFunc(entries, func(a, b entry) int { return a.rank - b.rank })
	msgs := make([]string, len(entries))
	for i, e := range entries {
		msgs[i] = e.msg
	}
	if len(msgs) == 0 {
		return cond(v1alpha1.ConditionDegraded, false, v1alpha1.ReasonNoProblems, "no GPU is blocked or failed")
	}
	reason := ""
	for _, r := range degradedReasons {
		if seen[r] {
			reason = r
			break
		}
	}
	if reason == "" {
		for r := range seen {
			if reason == "" || r < reason {
				reason = r
			}
		}
	}
	var counts []string
	if unwritten > 0 {
		counts = append(counts, fmt.Sprintf("%d %s", unwritten, plural(unwritten, "node whose NodeMigLayout could not be written", "nodes whose NodeMigLayout could not be written")))
	}
	if lost > 0 {
		counts = append(counts, fmt.Sprintf("%d %s", lost, plural(lost, "node with a lost agent", "nodes with a lost agent")))
	}
	if gpuProblems > 0 {
		counts = append(counts, fmt.Sprintf("%d %s", gpuProblems, plural(int32(gpuProblems), "GPU problem", "GPU problems")))
	}
	if n := len(obs.SpecProblems); n > 0 {
		counts = append(counts, fmt.Sprintf("%d %s", n, plural(int32(n), "spec problem", "spec problems")))
	}
	return cond(v1alpha1.ConditionDegraded, true, reason, "%s: %s", strings.Join(counts, ", "), joinBounded(msgs, 8))
}

// maxConditionReason is the longest condition reason the API server takes
// (bytes; metav1 validation's limit).
const maxConditionReason = 1024

// stuckReason is the condition reason for a GPU the agent reports Blocked
// or Failed: the agent's own reason when it is a valid one (metav1
// validation's IsValidConditionReason, within maxConditionReason).
func stuckReason(g StuckGPU) string {
	if len(g.Reason) <= maxConditionReason && len(metav1validation.IsValidConditionReason(g.Reason)) == 0 {
		return g.Reason
	}
	if g.Phase == v1alpha1.PhaseBlocked {
		return v1alpha1.ReasonDeviceInUse
	}
	return v1alpha1.ReasonNVMLError
}

func progressingNodes(states []NodeState) string {
	var names []string
	for _, n := range states {
		if onTheWay(n) {
			names = append(names, n.Row.Node)
		}
	}
	return joinBounded(names, 10)
}

func plural(n int32, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
