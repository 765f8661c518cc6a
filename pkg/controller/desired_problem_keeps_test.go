package controller

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/miglayout/miglayout/api/v1alpha1"
	"github.com/miglayout/miglayout/pkg/mig"
)

// TestDesiredGPUsKeepsWhatBadInputWouldLose: a rule that cannot be applied
// to a GPU (three 3g.40gb and a 1g.10gb do not fit an A100), or no rule for
// it any more, loses nothing and starts nothing: the GPU keeps the layout
// its spec asked for where it holds it, and a change its agent has begun
// is carried out (not left part way); a change not begun is dropped, and a
// GPU the spec did not list stays out of it.
func TestDesiredGPUsKeepsWhatBadInputWouldLose(t *testing.T) {
	const (
		halves = "3g.40gb@0,3g.40gb@4"
		before = `rule "good": profiles 3g.40gb:2`
		bad    = `rule "good" cannot be applied; `
		none   = "no rule matches the GPU now; "
	)
	badRule := rules(rule("good").counts("3g.40gb", 2).counts("1g.10gb", 1))
	otherGPU := rules(rule("good").indices(1).counts("3g.40gb", 2))
	for name, tc := range map[string]struct {
		rules   []v1alpha1.LayoutRule
		gpu     *gpuBuilder
		current []v1alpha1.GPUSpec
		want    []v1alpha1.GPUSpec
	}{
		"bad rule, layout held": {
			rules: badRule, gpu: a100(0).layout(halves), current: []v1alpha1.GPUSpec{specGPU(0, halves, before)},
			want: []v1alpha1.GPUSpec{specGPU(0, halves, bad+"the GPU keeps the layout it holds")},
		},
		"bad rule, change stopped part way": {
			rules:   badRule,
			gpu:     a100(0).layout("3g.40gb@0").phase(v1alpha1.PhaseFailed, v1alpha1.ReasonNVMLError, "creating GPU instance: ERROR_UNKNOWN"),
			current: []v1alpha1.GPUSpec{specGPU(0, halves, before)},
			want:    []v1alpha1.GPUSpec{specGPU(0, halves, bad+"the change begun, to "+halves+", is carried out")},
		},
		"bad rule, change not begun": {
			rules: badRule, gpu: a100(0).layout(wholeLayout), current: []v1alpha1.GPUSpec{specGPU(0, halves, before)},
			want: []v1alpha1.GPUSpec{specGPU(0, wholeLayout, bad+"the GPU keeps the layout it holds (the change to "+halves+" was dropped before it started)")},
		},
		"bad rule, change draining": {
			rules: badRule, gpu: a100(0).layout(wholeLayout).phase(v1alpha1.PhaseDraining, v1alpha1.ReasonDraining, ""),
			current: []v1alpha1.GPUSpec{specGPU(0, halves, before)},
			want:    []v1alpha1.GPUSpec{specGPU(0, wholeLayout, bad+"the GPU keeps the layout it holds (the change to "+halves+" was dropped before it started)")},
		},
		"bad rule, GPU not in the spec": {
			rules: badRule, gpu: a100(0).layout(wholeLayout),
		},
		"no rule any more, change stopped part way": {
			rules:   otherGPU,
			gpu:     a100(0).layout("3g.40gb@0").phase(v1alpha1.PhaseFailed, v1alpha1.ReasonNVMLError, "creating GPU instance: ERROR_UNKNOWN"),
			current: []v1alpha1.GPUSpec{specGPU(0, halves, before)},
			want:    []v1alpha1.GPUSpec{specGPU(0, halves, none+"the change begun, to "+halves+", is carried out")},
		},
		"no rule any more, layout held": {
			rules: otherGPU, gpu: a100(0).layout(halves), current: []v1alpha1.GPUSpec{specGPU(0, halves, before)},
		},
		"no rule any more, change not begun": {
			rules: otherGPU, gpu: a100(0).layout(wholeLayout), current: []v1alpha1.GPUSpec{specGPU(0, halves, before)},
		},
		// Blocked by a device in use, the change may have destroyed the
		// devices before it (as for a pause or a conflict): carried out.
		"bad rule, change blocked part way": {
			rules:   badRule,
			gpu:     a100(0).layout("1g.10gb@6").phase(v1alpha1.PhaseBlocked, v1alpha1.ReasonDeviceInUse, "in use, not destroyed: gpu-0-mig-1g10gb-19-6"),
			current: []v1alpha1.GPUSpec{specGPU(0, halves, before)},
			want:    []v1alpha1.GPUSpec{specGPU(0, halves, bad+"the change begun, to "+halves+", is carried out")},
		},
		"no rule any more, change blocked part way": {
			rules:   otherGPU,
			gpu:     a100(0).layout("1g.10gb@6").phase(v1alpha1.PhaseBlocked, v1alpha1.ReasonDeviceInUse, "in use, not destroyed: gpu-0-mig-1g10gb-19-6"),
			current: []v1alpha1.GPUSpec{specGPU(0, halves, before)},
			want:    []v1alpha1.GPUSpec{specGPU(0, halves, none+"the change begun, to "+halves+", is carried out")},
		},
		// Rows the agent does not act on: nothing begun there.
		"no rule any more, GPU unreadable": {
			rules: otherGPU, gpu: a100(0).migOff().phase(v1alpha1.PhaseFailed, v1alpha1.ReasonGPUUnreadable, "ERROR_GPU_IS_LOST"),
			current: []v1alpha1.GPUSpec{specGPU(0, halves, before)},
		},
		"no rule any more, device plugin active": {
			rules:   otherGPU,
			gpu:     a100(0).layout(wholeLayout).phase(v1alpha1.PhaseFailed, v1alpha1.ReasonDevicePluginActive, "nvidia.com/gpu: 1"),
			current: []v1alpha1.GPUSpec{specGPU(0, halves, before)},
		},
		// Withheld for NVIDIA's device plugin, a GPU NVML cannot read has
		// the same row: the entry stays as written.
		"bad rule, device plugin active": {
			rules:   badRule,
			gpu:     a100(0).migOff().phase(v1alpha1.PhaseFailed, v1alpha1.ReasonDevicePluginActive, "nvidia.com/gpu: 1"),
			current: []v1alpha1.GPUSpec{specGPU(0, halves, before)},
			want:    []v1alpha1.GPUSpec{specGPU(0, halves, before)},
		},
		// A MIG mode change set, waiting for a reset, is under way
		// whatever the row's phase: kept, not cancelled.
		"no rule any more, device plugin active, MIG on pending": {
			rules:   otherGPU,
			gpu:     a100(0).migOff().pendingMode(true).phase(v1alpha1.PhaseFailed, v1alpha1.ReasonDevicePluginActive, "nvidia.com/gpu: 1"),
			current: []v1alpha1.GPUSpec{specGPU(0, halves, before)},
			want:    []v1alpha1.GPUSpec{specGPU(0, halves, none+"the change begun, to "+halves+", is carried out")},
		},
		"bad rule, layout refused once MIG was on, MIG off pending": {
			rules:   badRule,
			gpu:     a100(0).pendingMode(false).phase(v1alpha1.PhaseFailed, v1alpha1.ReasonInvalidLayout, "NVML refuses 3g.40gb@4"),
			current: []v1alpha1.GPUSpec{specGPU(0, halves, before)},
			want:    []v1alpha1.GPUSpec{specGPU(0, halves, bad+"the change begun, to "+halves+", is carried out")},
		},
		// NVML cannot read the GPU: its row says nothing of what it holds
		// (MIG off, no layout), and its entry stays as written.
		"bad rule, GPU unreadable": {
			rules:   badRule,
			gpu:     a100(0).migOff().phase(v1alpha1.PhaseFailed, v1alpha1.ReasonGPUUnreadable, "ERROR_GPU_IS_LOST"),
			current: []v1alpha1.GPUSpec{specGPU(0, halves, before)},
			want:    []v1alpha1.GPUSpec{specGPU(0, halves, before)},
		},
		"bad rule, change retried after a failed pass": {
			rules:   badRule,
			gpu:     a100(0).layout("3g.40gb@0").phase(v1alpha1.PhasePending, v1alpha1.ReasonPassFailed, "reading allocations: timeout"),
			current: []v1alpha1.GPUSpec{specGPU(0, halves, before)},
			want:    []v1alpha1.GPUSpec{specGPU(0, halves, bad+"the change begun, to "+halves+", is carried out")},
		},
	} {
		t.Run(name, func(t *testing.T) {
			got, problems := DesiredGPUs(mig.DefaultCatalog(), tc.rules, inventory(tc.gpu), tc.current)
			wantProblems := 0
			if len(tc.rules[0].GPUIndices) == 0 {
				wantProblems = 1
			}
			if len(problems) != wantProblems {
				t.Errorf("problems %+v, want %d", problems, wantProblems)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("desired GPUs (-want +got):\n%s", diff)
			}
			// Written, the entries are what the next pass computes: no
			// write follows a write while the node stays as it is.
			again, _ := DesiredGPUs(mig.DefaultCatalog(), tc.rules, inventory(tc.gpu), got)
			if diff := cmp.Diff(got, again); diff != "" {
				t.Errorf("the next pass writes again (-first +next):\n%s", diff)
			}
		})
	}
}

// TestProblemGPUKeptInSpecHasOneRow: a GPU whose rule cannot be applied and
// whose spec keeps an entry is listed once in its node's row, Failed, so
// that its problem is not told again after the controller restarts.
func TestProblemGPUKeptInSpecHasOneRow(t *testing.T) {
	const halves = "3g.40gb@0,3g.40gb@4"
	badRule := rules(rule("good").counts("3g.40gb", 2).counts("1g.10gb", 1))
	for name, gpu := range map[string]*gpuBuilder{
		"layout held":  a100(0).layout(halves),
		"change begun": a100(0).layout("3g.40gb@0").phase(v1alpha1.PhaseRepartitioning, v1alpha1.ReasonRepartitioning, ""),
		// Its Blocked event is not told again either.
		"change blocked": a100(0).layout("1g.10gb@6").phase(v1alpha1.PhaseBlocked, v1alpha1.ReasonDeviceInUse, "in use, not destroyed: gpu-0-mig-1g10gb-19-6"),
	} {
		t.Run(name, func(t *testing.T) {
			spec, problems := DesiredGPUs(mig.DefaultCatalog(), badRule, inventory(gpu), []v1alpha1.GPUSpec{specGPU(0, halves, "x")})
			if len(spec) != 1 || len(problems) != 1 {
				t.Fatalf("spec %+v, problems %+v: want one of each", spec, problems)
			}
			nml := nodeMigLayout("n").spec(spec...).status(gpu).build()
			nml.Status.ObservedGeneration = 1
			st := withUntouchedGPUs(EvaluateNode("n", nml, problems, AgentHealth{}), nml)
			want := []v1alpha1.GPURow{{Index: 0, Product: gpu.g.Product, Desired: halves, Actual: gpu.g.Layout, Phase: v1alpha1.PhaseFailed}}
			if diff := cmp.Diff(want, st.Row.GPUs); diff != "" {
				t.Errorf("rows (-want +got):\n%s", diff)
			}
			if st.Changing != (gpu.g.Phase == v1alpha1.PhaseRepartitioning) {
				t.Errorf("changing %t, want %t", st.Changing, !st.Changing)
			}
			prev := v1alpha1.MigLayoutStatus{Nodes: []v1alpha1.NodeRow{st.Row}}
			if events, _ := Transitions(&prev, Observation{Nodes: []NodeState{st}}, nil); len(events) > 0 {
				t.Errorf("told again after a restart: %+v", events)
			}
		})
	}
}

// TestProblemGPUNewlyBlockedToldAfterRestart: a GPU whose rule cannot be
// applied, its kept change Repartitioning before a controller restart and
// Blocked after it, is told Blocked.
func TestProblemGPUNewlyBlockedToldAfterRestart(t *testing.T) {
	const halves = "3g.40gb@0,3g.40gb@4"
	badRule := rules(rule("good").counts("3g.40gb", 2).counts("1g.10gb", 1))
	evaluate := func(gpu *gpuBuilder) NodeState {
		spec, problems := DesiredGPUs(mig.DefaultCatalog(), badRule, inventory(gpu), []v1alpha1.GPUSpec{specGPU(0, halves, "x")})
		nml := nodeMigLayout("n").spec(spec...).status(gpu).build()
		nml.Status.ObservedGeneration = 1
		return withUntouchedGPUs(EvaluateNode("n", nml, problems, AgentHealth{}), nml)
	}
	was := evaluate(a100(0).layout("3g.40gb@0").phase(v1alpha1.PhaseRepartitioning, v1alpha1.ReasonRepartitioning, ""))
	now := evaluate(a100(0).layout("1g.10gb@6").phase(v1alpha1.PhaseBlocked, v1alpha1.ReasonDeviceInUse, "in use, not destroyed: gpu-0-mig-1g10gb-19-6"))
	prev := v1alpha1.MigLayoutStatus{Nodes: []v1alpha1.NodeRow{was.Row}}
	events, _ := Transitions(&prev, Observation{Nodes: []NodeState{now}}, nil)
	if !slices.ContainsFunc(events, func(e Event) bool { return e.Reason == EventBlocked }) {
		t.Errorf("events %+v: want %s", events, EventBlocked)
	}
}
