package controller

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2/ktesting"

	"github.com/miglayout/miglayout/api/v1alpha1"
	"github.com/miglayout/miglayout/pkg/agent"
	"github.com/miglayout/miglayout/pkg/mig"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestUnreadableGPUNeverRead: a GPU that NVML counts but the agent could
// never read (ERROR_NO_PERMISSION because its /dev/nvidia<N> is not given to
// the agent, or fallen off the bus before the NodeMigLayout was made) has no
// product name, so no rule matches it and it is in no spec. The MigLayout is
// not Ready and is Degraded/GPUUnreadable all the same, as its
// NodeMigLayout is.
func TestUnreadableGPUNeverRead(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ml := staticMigLayout("a", "uid-a", "a") // every GPU: 3g.40gb x2
	halves := specGPU(0, "3g.40gb@0,3g.40gb@4", `rule "halves": profiles 3g.40gb:2`)
	// Status as agent.BuildStatus writes it on a fresh NodeMigLayout.
	st := agent.BuildStatus(v1alpha1.NodeMigLayoutStatus{}, 1, &agent.SyncResult{Results: map[int]agent.GPUResult{
		1: {Phase: v1alpha1.PhaseFailed, Reason: v1alpha1.ReasonGPUUnreadable,
			Message: "NVML cannot read the GPU, so its devices are not published: ERROR_NO_PERMISSION"},
	}}, metav1.Now())
	gpus := append(inventory(a100(0).layout("3g.40gb@0,3g.40gb@4")), st.GPUs...)
	nml := ownedBy(nodeMigLayout("n1").spec(halves).build(), ml)
	nml.Status.GPUs = gpus
	got := reconcileOnce(t, ctx, ml, node("n1", map[string]string{"pool": "a"}), nml)
	ready := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionReady)
	degraded := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionDegraded)
	if ready == nil || ready.Status == metav1.ConditionTrue {
		t.Errorf("Ready = %+v; want not True: GPU 1 of n1 is unreadable and publishes no device", ready)
	}
	if degraded == nil || degraded.Status != metav1.ConditionTrue || degraded.Reason != v1alpha1.ReasonGPUUnreadable {
		t.Errorf("Degraded = %+v; want True/GPUUnreadable", degraded)
	}
}

// TestGPUNVMLNoLongerShows: a GPU once seen that NVML no longer counts
// (taken out, or not enumerated since a reboot) stays in the spec and in
// the status, Degraded, with what it was and how to forget it: its loss is
// seen. On a NodeMigLayout made afresh (the way to forget it) the agent has
// no earlier row, and the GPU leaves the spec.
func TestGPUNVMLNoLongerShows(t *testing.T) {
	halves := specGPU(1, "3g.40gb@0,3g.40gb@4", `rule "halves": profiles 3g.40gb:2`)
	prev := v1alpha1.NodeMigLayoutStatus{GPUs: inventory(a100(1).layout("3g.40gb@0,3g.40gb@4"))}
	prev.GPUs[0].UUID = "GPU-1"
	// The agent's next pass: NVML shows no GPU 1 any more.
	res := &agent.SyncResult{Results: map[int]agent.GPUResult{
		1: {Phase: v1alpha1.PhaseFailed, Reason: v1alpha1.ReasonGPUMissing, Message: "the node has no GPU with index 1"},
	}}
	st := agent.BuildStatus(prev, 2, res, metav1.Now())
	if len(st.GPUs) != 1 || !strings.Contains(st.GPUs[0].Message, "it was GPU-1") || !strings.Contains(st.GPUs[0].Message, "delete this NodeMigLayout") {
		t.Errorf("status rows %+v, want GPU 1 saying what it was and how to forget it", st.GPUs)
	}
	rs := rules(rule("halves").counts("3g.40gb", 2))
	if got, _ := DesiredGPUs(mig.DefaultCatalog(), rs, st.GPUs, []v1alpha1.GPUSpec{halves}); len(got) != 1 {
		t.Errorf("spec %+v, want GPU 1 kept while its loss shows", got)
	}
	afresh := agent.BuildStatus(v1alpha1.NodeMigLayoutStatus{}, 1, res, metav1.Now())
	if got, _ := DesiredGPUs(mig.DefaultCatalog(), rs, afresh.GPUs, []v1alpha1.GPUSpec{halves}); len(got) != 0 {
		t.Errorf("spec %+v on a NodeMigLayout made afresh, want GPU 1 gone", got)
	}
}

// TestPendingGPURowSaysWhy: when agent passes keep failing as a whole (the
// API server refuses the drain publication: a ValidatingAdmissionPolicy or
// RBAC mistake), the agent shows the GPU Pending with reason PassFailed and
// the error; the node's row in the MigLayout says so too.
func TestPendingGPURowSaysWhy(t *testing.T) {
	const why = "the pass stopped before this GPU's change was done; retrying: publishing the drain: resourceslices is forbidden"
	nml := nodeMigLayout("n").spec(specGPU(0, "3g.40gb@0,3g.40gb@4", "")).
		status(a100(0).layout("7g.80gb@0").phase(v1alpha1.PhasePending, agent.ReasonPassFailed, why)).build()
	st := EvaluateNode("n", nml, nil, AgentHealth{})
	if !strings.Contains(st.Row.Message, agent.ReasonPassFailed) || !strings.Contains(st.Row.Message, "forbidden") {
		t.Errorf("row message %q does not say why GPU 0 is Pending (%s: %s)", st.Row.Message, agent.ReasonPassFailed, why)
	}
}

// TestUnlistedGPUStuck: the agent reports Blocked or Failed a GPU no spec
// lists (in Static mode no rule matches it; in Auto mode no plan changed
// it): a GPU instance it left half made and cannot roll back, or devices
// ResourceClaims hold that it could not make again. The MigLayout is not
// Ready and is Degraded with the agent's reason, the node counts as failed
// and the GPU as a problem, as the node's NodeMigLayout says; a GPU no
// spec lists that is Ready leaves the MigLayout Ready.
func TestUnlistedGPUStuck(t *testing.T) {
	tests := map[string]struct {
		got       agent.GPUResult
		wantReady metav1.ConditionStatus
		wantPhase v1alpha1.GPUPhase // of GPU 1's row
	}{
		"a GPU instance left half made": {
			got: agent.GPUResult{Phase: v1alpha1.PhaseFailed, Reason: v1alpha1.ReasonNVMLError,
				Message: "rolling back GPU instances without a full-size compute instance: NVML error"},
			wantReady: metav1.ConditionFalse, wantPhase: v1alpha1.PhaseFailed,
		},
		"devices claims hold not made again": {
			got: agent.GPUResult{Phase: v1alpha1.PhaseBlocked, Reason: v1alpha1.ReasonDeviceInUse,
				Message: "devices ResourceClaims hold could not be made again"},
			wantReady: metav1.ConditionFalse, wantPhase: v1alpha1.PhaseBlocked,
		},
		"ready": {got: agent.GPUResult{Phase: v1alpha1.PhaseReady}, wantReady: metav1.ConditionTrue, wantPhase: v1alpha1.PhaseReady},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			defer forgetMetrics("a")
			ml := staticMigLayout("a", "uid-a", "a")
			ml.Spec.Rules = rules(rule("halves").counts("3g.40gb", 2).indices(0))
			halves := specGPU(0, "3g.40gb@0,3g.40gb@4", `rule "halves": profiles 3g.40gb:2`)
			gpu1 := a100(1).layout("3g.40gb@0")
			if tc.got.Phase != v1alpha1.PhaseReady {
				gpu1 = gpu1.phase(tc.got.Phase, tc.got.Reason, tc.got.Message)
			}
			nml := ownedBy(nodeMigLayout("n1").spec(halves).status(a100(0).layout("3g.40gb@0,3g.40gb@4"), gpu1).build(), ml)
			nml.Status.ObservedGeneration = nml.Generation
			got := reconcileOnce(t, ctx, ml, node("n1", map[string]string{"pool": "a"}), nml)
			ready := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionReady)
			degraded := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionDegraded)
			if ready == nil || ready.Status != tc.wantReady {
				t.Errorf("Ready = %+v; want %s", ready, tc.wantReady)
			}
			wantDegraded, wantFailed := metav1.ConditionTrue, int32(1)
			if tc.wantReady == metav1.ConditionTrue {
				wantDegraded, wantFailed = metav1.ConditionFalse, 0
			}
			if degraded == nil || degraded.Status != wantDegraded || wantDegraded == metav1.ConditionTrue && degraded.Reason != tc.got.Reason {
				t.Errorf("Degraded = %+v; want %s (%s)", degraded, wantDegraded, tc.got.Reason)
			}
			if got.Status.FailedNodes != wantFailed {
				t.Errorf("failedNodes = %d, want %d", got.Status.FailedNodes, wantFailed)
			}
			if len(got.Status.Nodes) != 1 || len(got.Status.Nodes[0].GPUs) != 2 || got.Status.Nodes[0].GPUs[1].Phase != tc.wantPhase {
				t.Fatalf("rows %+v; want n1 with GPU 1 %s", got.Status.Nodes, tc.wantPhase)
			}
			if tc.wantReady == metav1.ConditionFalse {
				if n := testutil.ToFloat64(gpuProblemsMetric.WithLabelValues("a", tc.got.Reason)); n != 1 {
					t.Errorf("miglayout_controller_gpu_problems{reason=%q} = %v, want 1", tc.got.Reason, n)
				}
			}
		})
	}
}
