package fullstack

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/miglayout/miglayout/api/v1alpha1"
	"github.com/miglayout/miglayout/test/cluster/clustertest"
)

// TestLostGPU makes GPU 1 of a node fall off the bus (every NVML call on it
// gives ERROR_GPU_IS_LOST) and checks that the agent keeps the node's other
// GPU published and reported, withdraws the lost GPU's devices from the
// pool, and reports it GPUUnreadable up to the MigLayout; once the GPU is
// back, its devices are published again and the MigLayout is Ready.
func TestLostGPU(t *testing.T) {
	ctx := clustertest.Context(t, 3*time.Minute)
	const name = "e2e-lostgpu"
	ml := lostNodeHalves(t, ctx, name)

	// A pod runs on one of GPU 1's halves; its container shows the device
	// healthy (the plugin's health reports, through the kubelet).
	ns := env.NewNamespace(t, ctx, name)
	claim := env.CreateClaim(t, ctx, ns, "infer", `device.attributes['mig.miglayout.io'].profile == '3g.40gb' && device.attributes['mig.miglayout.io'].parentIndex == 1`)
	env.CreatePod(t, ctx, clustertest.Pod(ns, "infer", clustertest.OnNode(nodeLost), claim.Name, ""))
	env.WaitPodRunning(t, ctx, ns, "infer", 60*time.Second)
	waitDeviceHealth(t, ctx, ns, "infer", corev1.ResourceHealthStatusHealthy, "")

	sim, err := env.Cluster.Sim(nodeLost)
	if err != nil {
		t.Fatal(err)
	}
	if err := sim.LoseGPU(1); err != nil {
		t.Fatal(err)
	}
	recovered := false
	t.Cleanup(func() {
		if !recovered {
			_ = sim.RecoverGPU(1)
		}
	})
	degraded := env.WaitMigLayout(t, ctx, name, ml.Generation, 60*time.Second, "GPUUnreadable", func(ml *v1alpha1.MigLayout) bool {
		return clustertest.HasCondition(ml.Status.Conditions, v1alpha1.ConditionDegraded, metav1.ConditionTrue, v1alpha1.ReasonGPUUnreadable)
	})
	if c := clustertest.Condition(degraded.Status.Conditions, v1alpha1.ConditionDegraded); c == nil || !strings.Contains(c.Message, "ERROR_GPU_IS_LOST") {
		t.Errorf("Degraded %+v does not say why", c)
	}
	published := env.WaitPoolMatchesNVML(t, ctx, nodeLost)
	if len(published) != 2 {
		t.Errorf("published %v, want GPU 0's two halves only", published)
	}
	for dev := range published {
		if !strings.HasPrefix(dev, "gpu-0-") {
			t.Errorf("device %s of the lost GPU is still published", dev)
		}
	}
	nml := env.GetNodeMigLayout(t, ctx, nodeLost)
	rows := map[int32]v1alpha1.GPUStatus{}
	for _, g := range nml.Status.GPUs {
		rows[g.Index] = g
	}
	if g := rows[0]; g.Phase != v1alpha1.PhaseReady || g.Layout != "3g.40gb@0,3g.40gb@4" {
		t.Errorf("GPU 0 row %+v, want Ready with its halves", g)
	}
	if g := rows[1]; g.Phase != v1alpha1.PhaseFailed || g.Reason != v1alpha1.ReasonGPUUnreadable || g.UUID == "" {
		t.Errorf("GPU 1 row %+v, want Failed GPUUnreadable with its UUID", g)
	}
	if out := describe(t, ctx, "nodemiglayout", nodeLost); !strings.Contains(out, "GPUUnreadable") {
		t.Errorf("kubectl describe nodemiglayout %s shows no GPUUnreadable:\n%s", nodeLost, out)
	}
	// The pod's container shows its device unhealthy, and why.
	waitDeviceHealth(t, ctx, ns, "infer", corev1.ResourceHealthStatusUnhealthy, "GPU 1 cannot be read")

	recovered = true
	if err := sim.RecoverGPU(1); err != nil {
		t.Fatal(err)
	}
	env.WaitReady(t, ctx, ml, 1)
	if got := len(env.WaitPoolMatchesNVML(t, ctx, nodeLost)); got != 4 {
		t.Errorf("%d devices published after recovery, want 4", got)
	}
	waitDeviceHealth(t, ctx, ns, "infer", corev1.ResourceHealthStatusHealthy, "")
}

// lostNodeHalves applies the MigLayout name (deleted at the test's end),
// two 3g.40gb on each of nodeLost's A100s, and waits until they are
// published.
func lostNodeHalves(t *testing.T, ctx context.Context, name string) *v1alpha1.MigLayout {
	t.Helper()
	t.Cleanup(func() { env.DeleteMigLayout(t, name) })
	ml := env.SetStaticMigLayout(t, ctx, name, map[string]string{groupLabel: "lostgpu"},
		clustertest.Rule("halves", a100, map[string]int32{"3g.40gb": 2}))
	env.WaitReady(t, ctx, ml, 1)
	if got := len(env.WaitPoolMatchesNVML(t, ctx, nodeLost)); got != 4 {
		t.Fatalf("%d devices published, want 4 halves", got)
	}
	return ml
}

// waitDeviceHealth waits until the first container of pod (in ns) shows
// the device of its claim "gpu" with health want, and a message containing
// message (none where message is empty), in status.allocatedResourcesStatus.
func waitDeviceHealth(t *testing.T, ctx context.Context, ns, pod string, want corev1.ResourceHealthStatus, message string) {
	t.Helper()
	clustertest.Poll(t, ctx, 60*time.Second, fmt.Sprintf("pod %s's device %s", pod, want), func(ctx context.Context) (bool, string) {
		return podDeviceHealth(ctx, ns, pod, want, message)
	})
}

// podDeviceHealth reports whether the first container of pod (in ns) shows
// the device of its claim "gpu" with health want, and a message containing
// message (none where message is empty), and what it shows.
func podDeviceHealth(ctx context.Context, ns, pod string, want corev1.ResourceHealthStatus, message string) (bool, string) {
	p, err := env.Client.CoreV1().Pods(ns).Get(ctx, pod, metav1.GetOptions{})
	if err != nil {
		return false, err.Error()
	}
	if len(p.Status.ContainerStatuses) == 0 {
		return false, "no container status"
	}
	rs := p.Status.ContainerStatuses[0].AllocatedResourcesStatus
	if len(rs) != 1 || rs[0].Name != "claim:gpu" || len(rs[0].Resources) != 1 {
		return false, fmt.Sprintf("allocatedResourcesStatus %+v", rs)
	}
	h := rs[0].Resources[0]
	msg := ptr.Deref(h.Message, "")
	ok := h.Health == want && (message == "" && msg == "" || message != "" && strings.Contains(msg, message))
	return ok, fmt.Sprintf("%s %s: %q", h.ResourceID, h.Health, msg)
}
