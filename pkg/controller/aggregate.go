package controller

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/miglayout/miglayout/api/v1alpha1"
	"github.com/miglayout/miglayout/pkg/mig"
	migslices "github.com/miglayout/miglayout/pkg/slices"
)

// NodeState is where one selected node stands, as a MigLayout's status shows it.
type NodeState struct {
	// Row is the node's row in the MigLayout's status.
	Row v1alpha1.NodeRow
	// Ready: the agent has reported, every GPU of the node's spec holds its
	// desired state with phase Ready, and no rule failed on the node.
	Ready bool
	// Progressing: not Ready, nothing failed, and the agent is on its way.
	Progressing bool
	// Changing: some GPU of the node is Draining or Repartitioning now,
	// whether or not another GPU of it failed (a Blocked GPU beside it
	// makes the node Failed, not Progressing).
	Changing bool
	// Failed: some GPU is Blocked or Failed, or a rule failed on it.
	Failed bool
	// Reporting: the agent has reported the node's GPUs.
	Reporting bool
	// Lost: the agent reported once (or was lost before its NodeMigLayout
	// was made again) but has stopped renewing its heartbeat Lease
	// (AgentHealth); the node is neither Ready nor Progressing, its row's
	// phase is Unknown and its GPU rows are as last reported.
	Lost bool
	// LostMessage says why the agent counts as lost.
	LostMessage string
	// Conflict: another MigLayout selects the node too; this one leaves
	// the node as it is (ConflictNode).
	Conflict bool
	// Paused: the MigLayout is paused and the node's rules ask for a
	// layout it does not hold and is not changing to (pauseHold).
	Paused bool
	// WriteError is the API server's refusal of the controller's last
	// create or write of the node's NodeMigLayout (withWriteError); ""
	// when it was written, or the write only lost a race.
	WriteError string
	// Problems are the GPUs whose desired state could not be computed.
	Problems []Problem
	// Stuck are the GPUs that the agent reports Blocked or Failed, and
	// (withFailingPasses) those whose passes have failed for
	// PassesFailingAfter, Pending: these leave Failed false (the node is
	// Progressing while the agent retries) but count in Degraded.
	Stuck []StuckGPU
}

// StuckGPU is a GPU the agent reports Blocked or Failed, or one whose
// passes keep failing (Pending, PassFailed).
type StuckGPU struct {
	GPU     int32
	Phase   v1alpha1.GPUPhase
	Reason  string
	Message string
}

const (
	maxRowMessage = 1024
	maxNodeRows   = 64
	layoutMIGOff  = "-"
	msgNoReport   = "the miglayout agent has not reported the node's GPUs yet"
	msgNoGPU      = "the miglayout agent reports no GPU on the node (NVML counts none)"
)

// EvaluateNode compares what the node's spec asks with what its agent
// reports. nml may be nil (not created yet); problems come from DesiredGPUs;
// agent is what the agent's heartbeat Lease says (AgentLeases.Health).
func EvaluateNode(node string, nml *v1alpha1.NodeMigLayout, problems []Problem, agent AgentHealth) NodeState {
	st := evaluateReport(node, nml, problems)
	// A node not reporting is judged lost only where it was before
	// (AgentLeases.Health): its NodeMigLayout was made again meanwhile.
	if agent.Lost {
		st.Lost, st.LostMessage = true, agent.Message
		st.Ready, st.Progressing, st.Changing = false, false, false
		st.Row.Phase = v1alpha1.PhaseUnknown
		msg := agent.Message
		if st.Reporting && st.Row.Message != "" {
			msg += "; last reported: " + st.Row.Message
		}
		st.Row.Message = truncate(msg, maxRowMessage)
	}
	return st
}

// AgentReported reports whether the node's agent has written its
// NodeMigLayout's status (the GPUs it found, or none: observedGeneration
// is set either way); nil counts as not.
func AgentReported(nml *v1alpha1.NodeMigLayout) bool {
	return nml != nil && (len(nml.Status.GPUs) > 0 || nml.Status.ObservedGeneration > 0)
}

func evaluateReport(node string, nml *v1alpha1.NodeMigLayout, problems []Problem) NodeState {
	st := NodeState{Row: v1alpha1.NodeRow{Node: node}, Problems: problems}
	if !AgentReported(nml) {
		st.Row.Phase = v1alpha1.PhasePending
		st.Row.Message = msgNoReport
		return st
	}
	st.Reporting = true
	if len(nml.Status.GPUs) == 0 && len(nml.Spec.GPUs) == 0 && len(problems) == 0 {
		// Nothing to change on a node without a GPU NVML counts.
		st.Row.Phase = v1alpha1.PhaseReady
		st.Row.Message = msgNoGPU
		st.Ready = true
		return st
	}
	reported := make(map[int32]v1alpha1.GPUStatus, len(nml.Status.GPUs))
	for _, g := range nml.Status.GPUs {
		reported[g.Index] = g
	}
	var issues []string
	for _, spec := range nml.Spec.GPUs {
		g, ok := reported[spec.Index]
		row := v1alpha1.GPURow{Index: spec.Index, Desired: layoutText(spec.MIGEnabled, spec.Layout)}
		switch {
		case !ok:
			row.Phase = v1alpha1.PhasePending
			issues = append(issues, fmt.Sprintf("gpu %d: not reported by the agent", spec.Index))
		case g.Phase == v1alpha1.PhaseBlocked || g.Phase == v1alpha1.PhaseFailed:
			row.Phase = g.Phase
			st.Stuck = append(st.Stuck, StuckGPU{GPU: g.Index, Phase: g.Phase, Reason: g.Reason, Message: g.Message})
			issues = append(issues, gpuIssue(g))
		case holds(spec, g) && g.Phase == v1alpha1.PhaseReady:
			row.Phase = v1alpha1.PhaseReady
		case g.Phase == v1alpha1.PhaseDraining || g.Phase == v1alpha1.PhaseRepartitioning:
			row.Phase = g.Phase
			issues = append(issues, fmt.Sprintf("gpu %d: %s to %s", g.Index, g.Phase, row.Desired))
		default:
			row.Phase = v1alpha1.PhasePending
			issue := fmt.Sprintf("gpu %d: Pending: actual %q, desired %q", g.Index, layoutText(g.MIGEnabled, g.Layout), row.Desired)
			if g.Phase == v1alpha1.PhasePending && g.Reason != "" && g.Message != "" {
				// Why the agent has not got there (a pass that keeps
				// failing); a GPU still Ready has not been looked at.
				issue += fmt.Sprintf(" (%s: %s)", g.Reason, g.Message)
			}
			issues = append(issues, issue)
		}
		if ok {
			row.Product = g.Product
			row.Actual = actualText(g)
		}
		st.Row.GPUs = append(st.Row.GPUs, row)
	}
	// A GPU NVML counts but cannot read is in no spec where the agent never
	// read it (no product to match a rule on), nor one an Auto plan never
	// changed: it is stuck all the same, and so is one the agent withholds
	// from NVIDIA's device plugin, and any other the agent reports Blocked
	// or Failed though no spec lists it (a GPU instance it left half made
	// and cannot roll back; devices ResourceClaims hold that it could not
	// make again). The agent writes a GPU's row from its last pass, so a
	// GPU dropped from the spec after it failed is Ready again there.
	inSpec := func(idx int32) bool {
		return slices.ContainsFunc(nml.Spec.GPUs, func(s v1alpha1.GPUSpec) bool { return s.Index == idx }) ||
			slices.ContainsFunc(problems, func(p Problem) bool { return p.GPU == idx })
	}
	for _, g := range nml.Status.GPUs {
		if stoppingChange(nml, g) && !inSpec(g.Index) {
			// Left as it is, once the agent has stopped the change its
			// spec asked for before it dropped the GPU.
			st.Row.GPUs = append(st.Row.GPUs, v1alpha1.GPURow{Index: g.Index, Product: g.Product, Desired: actualText(g), Actual: actualText(g), Phase: g.Phase})
			issues = append(issues, fmt.Sprintf("gpu %d: %s: no longer in the spec, the agent stops its change", g.Index, g.Phase))
			continue
		}
		stuck := g.Phase == v1alpha1.PhaseBlocked || g.Phase == v1alpha1.PhaseFailed ||
			g.Reason == v1alpha1.ReasonGPUUnreadable || g.Reason == v1alpha1.ReasonDevicePluginActive
		if !stuck || inSpec(g.Index) {
			continue
		}
		st.Stuck = append(st.Stuck, StuckGPU{GPU: g.Index, Phase: g.Phase, Reason: g.Reason, Message: g.Message})
		// Left as it is: desired is what it holds (GPURow.Desired).
		st.Row.GPUs = append(st.Row.GPUs, v1alpha1.GPURow{Index: g.Index, Product: g.Product, Desired: actualText(g), Actual: actualText(g), Phase: g.Phase})
		issues = append(issues, gpuIssue(g))
	}
	// A GPU whose rule cannot be applied has one row, Failed: where its
	// spec keeps an entry (DesiredGPUs: the layout it holds, or a change
	// its agent has begun, carried out), that entry's row says so.
	changingProblem := false
	for _, g := range groupProblems(problems) {
		issues = append(issues, g.reason+": "+g.text())
	}
	for _, p := range problems {
		if i := slices.IndexFunc(st.Row.GPUs, func(r v1alpha1.GPURow) bool { return r.Index == p.GPU }); i >= 0 {
			r := &st.Row.GPUs[i]
			changingProblem = changingProblem || r.Phase == v1alpha1.PhaseDraining || r.Phase == v1alpha1.PhaseRepartitioning
			r.Phase = v1alpha1.PhaseFailed
			continue
		}
		row := v1alpha1.GPURow{Index: p.GPU, Product: p.Product, Phase: v1alpha1.PhaseFailed}
		if g, ok := reported[p.GPU]; ok {
			// Refused and left as it is: desired is what it holds
			// (GPURow.Desired), not "MIG on, no device".
			row.Actual = actualText(g)
			row.Desired = row.Actual
		}
		st.Row.GPUs = append(st.Row.GPUs, row)
	}
	slices.SortStableFunc(st.Row.GPUs, func(a, b v1alpha1.GPURow) int { return int(a.Index - b.Index) })
	st.Row.Phase = v1alpha1.PhaseReady
	for _, r := range st.Row.GPUs {
		if phaseRank(r.Phase) < phaseRank(st.Row.Phase) {
			st.Row.Phase = r.Phase
		}
	}
	st.Ready = len(issues) == 0
	st.Failed = len(st.Stuck) > 0 || len(problems) > 0
	st.Progressing = !st.Ready && !st.Failed
	st.Changing = changingProblem || slices.ContainsFunc(st.Row.GPUs, func(r v1alpha1.GPURow) bool {
		return r.Phase == v1alpha1.PhaseDraining || r.Phase == v1alpha1.PhaseRepartitioning
	})
	st.Row.Message = truncate(strings.Join(issues, "; "), maxRowMessage)
	return capGPURows(st)
}

// maxRowGPUs is the most GPU rows a node's row lists (the CRD's MaxItems on
// NodeRow.GPUs).
const maxRowGPUs = 16

// capGPURows keeps at most maxRowGPUs rows, those of GPUs the node's agent
// reported first, so that a spec edited by hand to name more GPUs than the
// node has does not keep the MigLayout's status from being written; the
// row's message counts the rows left out (its phase and message already
// judge every GPU).
func capGPURows(st NodeState) NodeState {
	if len(st.Row.GPUs) <= maxRowGPUs {
		return st
	}
	rows := slices.Clone(st.Row.GPUs)
	slices.SortStableFunc(rows, func(a, b v1alpha1.GPURow) int {
		return cmp.Compare(boolRank(a.Product == ""), boolRank(b.Product == ""))
	})
	left := len(rows) - maxRowGPUs
	rows = rows[:maxRowGPUs]
	slices.SortStableFunc(rows, func(a, b v1alpha1.GPURow) int { return int(a.Index - b.Index) })
	st.Row.GPUs = rows
	st.Row.Message = truncate(strings.TrimPrefix(st.Row.Message+fmt.Sprintf("; %d more GPU rows not listed (a row lists at most %d)", left, maxRowGPUs), "; "), maxRowMessage)
	return st
}

func boolRank(b bool) int {
	if b {
		return 1
	}
	return 0
}

// withUntouchedGPUs adds to a node's row the GPUs its agent reports that no
// spec lists (in Static mode, no rule matches them; in Auto mode, no plan
// has changed them yet): they are kept as they are, so each shows its
// actual layout as the desired one, in the phase the agent reports (Ready;
// as last reported where the agent is lost). Without them the row would
// leave out GPUs that hold devices in use, and the row of a node Auto mode
// has not changed yet would list no GPU at all.
func withUntouchedGPUs(st NodeState, nml *v1alpha1.NodeMigLayout) NodeState {
	if nml == nil {
		return st
	}
	for _, g := range nml.Status.GPUs {
		if slices.ContainsFunc(st.Row.GPUs, func(r v1alpha1.GPURow) bool { return r.Index == g.Index }) {
			continue
		}
		st.Row.GPUs = append(st.Row.GPUs, v1alpha1.GPURow{Index: g.Index, Product: g.Product, Desired: actualText(g), Actual: actualText(g), Phase: g.Phase})
	}
	slices.SortStableFunc(st.Row.GPUs, func(a, b v1alpha1.GPURow) int { return int(a.Index - b.Index) })
	return capGPURows(st)
}

// ConflictNode is the state of a node this MigLayout selects but leaves as
// it is, as another MigLayout selects it too: message says why.
func ConflictNode(node, message string) NodeState {
	return NodeState{
		Row:      v1alpha1.NodeRow{Node: node, Message: truncate(message, maxRowMessage)},
		Conflict: true,
	}
}

// holds reports whether the GPU is in the state its spec asks for.
func holds(spec v1alpha1.GPUSpec, g v1alpha1.GPUStatus) bool {
	if spec.MIGEnabled != g.MIGEnabled {
		return false
	}
	if !spec.MIGEnabled {
		return true
	}
	want, err1 := mig.ParseLayout(spec.Layout)
	got, err2 := mig.ParseLayout(g.Layout)
	if err1 != nil || err2 != nil {
		return spec.Layout == g.Layout
	}
	return want.Equal(got)
}

func gpuIssue(g v1alpha1.GPUStatus) string {
	s := fmt.Sprintf("gpu %d: %s", g.Index, g.Phase)
	if g.Reason != "" {
		s += " (" + g.Reason + ")"
	}
	if g.Message != "" {
		s += ": " + g.Message
	}
	return s
}

// layoutUnknown is a GPU row's Actual where NVML cannot read the GPU.
const layoutUnknown = "?"

// actualText is a GPU's reported layout as status rows show it: "?" where
// NVML cannot read the GPU or does not count it (the agent reports MIG off
// there, which it may not be).
func actualText(g v1alpha1.GPUStatus) string {
	if g.Reason == v1alpha1.ReasonGPUUnreadable || g.Reason == v1alpha1.ReasonGPUMissing {
		return layoutUnknown
	}
	return layoutText(g.MIGEnabled, g.Layout)
}

// layoutText is a layout as status rows show it: "-" for MIG off.
func layoutText(migOn bool, layout string) string {
	if !migOn {
		return layoutMIGOff
	}
	return layout
}

// phaseRank orders phases from the least advanced (most in need of
// attention) to Ready.
func phaseRank(p v1alpha1.GPUPhase) int {
	switch p {
	case v1alpha1.PhaseFailed:
		return 0
	case v1alpha1.PhaseBlocked:
		return 1
	case v1alpha1.PhasePending:
		return 2
	case v1alpha1.PhaseDraining:
		return 3
	case v1alpha1.PhaseRepartitioning:
		return 4
	case v1alpha1.PhaseReady:
		return 5
	}
	return 2
}

// summary is the node part of a MigLayout's status.
type summary struct {
	selected, ready, progressing, failed, conflict, silent, lost, paused int32
	// blocked counts the failed nodes whose worst GPU is Blocked (waiting
	// for a device in use to be released, or for a reset), not Failed.
	blocked int32
	// changing counts the nodes Progressing or with a GPU changing now
	// (NodeState.Changing), Failed ones too: the Progressing condition.
	changing int32
	rows     []v1alpha1.NodeRow
}

// summarize counts the nodes and keeps at most maxNodeRows rows, in this
// order, each by name: nodes with a lost agent (their rows are what a
// restarted controller knows of them, see LostInStatus); nodes Failed
// (a GPU Blocked or Failed, or a NodeMigLayout the API server refused) or
// in conflict, which ask for an operator; nodes on their way (onTheWay);
// the others not Ready (paused, held for their turn, not reported yet);
// then the Ready ones. So a rollout over many nodes, or many nodes whose
// agent has not reported yet, never pushes out the row of a node that
// failed.
func summarize(states []NodeState) summary {
	var s summary
	ordered := slices.Clone(states)
	rank := func(st NodeState) int {
		switch {
		case st.Lost:
			return 0
		case st.Failed || st.Conflict:
			return 1
		case onTheWay(st):
			return 2
		case !st.Ready:
			return 3
		}
		return 4
	}
	slices.SortFunc(ordered, func(a, b NodeState) int {
		if ra, rb := rank(a), rank(b); ra != rb {
			return ra - rb
		}
		return strings.Compare(a.Row.Node, b.Row.Node)
	})
	for _, st := range ordered {
		s.selected++
		switch {
		case st.Conflict:
			s.conflict++
		case st.Ready:
			s.ready++
		case st.Lost:
			s.lost++
		case st.Failed:
			s.failed++
			if st.Row.Phase == v1alpha1.PhaseBlocked {
				s.blocked++
			}
		case st.Progressing:
			s.progressing++
		case st.Paused:
			s.paused++
		case !st.Reporting:
			s.silent++
		}
		if onTheWay(st) {
			s.changing++
		}
		if len(s.rows) < maxNodeRows {
			s.rows = append(s.rows, st.Row)
		}
	}
	return s
}

// msgWriteFailed starts the message of a node whose NodeMigLayout the API
// server refused to create or write.
const msgWriteFailed = "the controller could not write the node's NodeMigLayout"

// withWriteError marks st, a node whose NodeMigLayout the API server
// refused to create or write (writeRefused), as Failed: not Ready nor
// Progressing (its agent cannot see the change), phase Failed unless its
// agent is lost, and the refusal first in its row's message. Degraded names
// it (ReasonNodeMigLayoutWriteFailed).
func withWriteError(st NodeState, err error) NodeState {
	st.WriteError = err.Error()
	st.Ready, st.Progressing, st.Failed = false, false, true
	if !st.Lost {
		st.Row.Phase = v1alpha1.PhaseFailed
	}
	msg := msgWriteFailed + ": " + err.Error()
	if st.Row.Message != "" && st.Row.Message != msgNoReport {
		msg += "; " + st.Row.Message
	}
	st.Row.Message = truncate(msg, maxRowMessage)
	return st
}

// onTheWay: the node is Progressing, or a GPU of it is changing beside one
// that failed; not when its agent is lost or another MigLayout has it.
func onTheWay(st NodeState) bool {
	return !st.Lost && !st.Conflict && (st.Progressing || st.Changing)
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return migslices.Clip(s, n-3) + "..."
}
