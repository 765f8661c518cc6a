package fullstack

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/miglayout/miglayout/test/cluster/clustertest"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestGPUResetUnderRunningPod: a GPU is reset while a pod runs on one of its
// MIG devices (the driver's recovery after an error ends the GPU's processes
// and destroys its instances), and the agent makes the layout again: the
// pod's device comes back under its name with a new UUID. The kubelet does
// not prepare the claim again while the pod lives, so the agent rewrites
// the claim's CDI spec for the new device (a container of the pod that
// restarts would get the destroyed one's UUID otherwise); the CDI device
// the kubelet holds keeps its name. The H100 comes back from the reset with
// MIG mode off, as Hopper does: the agent turns it on again.
func TestGPUResetUnderRunningPod(t *testing.T) {
	for _, n := range []struct{ node, model, group string }{{nodeReset, a100, "reset"}, {nodeResetH, h100, "reset-h100"}} {
		t.Run(n.model, func(t *testing.T) {
			ctx := clustertest.Context(t, 3*time.Minute)
			_, _, claim, dev := podOnHalves(t, ctx, "e2e-reset-"+n.group, n.node, n.model, n.group)
			oldUUID := clustertest.NVMLDevices(env.Snapshot(t, n.node))[dev]
			specPath := cdiSpecOf(t, n.node, string(claim.UID))
			if spec, err := os.ReadFile(specPath); err != nil || !strings.Contains(string(spec), oldUUID) {
				t.Fatalf("the claim's CDI spec does not name its device %s (%s): %v\n%s", dev, oldUUID, err, spec)
			}

			resetGPU0(t, n.node)
			if on, want := env.Snapshot(t, n.node).GPUs[0].MIGCurrent, n.model == a100; on != want {
				t.Fatalf("MIG mode on %v after the reset, want %v", on, want)
			}
			waitRemade(t, ctx, n.node, dev, oldUUID, specPath)
			if !env.Snapshot(t, n.node).GPUs[0].MIGCurrent {
				t.Error("the device was made again with MIG mode off")
			}
			if got := cdiSpecOf(t, n.node, string(claim.UID)); got != specPath {
				t.Errorf("the claim's CDI spec moved from %s to %s", specPath, got)
			}
			env.WaitPoolMatchesNVML(t, ctx, n.node)
		})
	}
}

// TestGPUResetWhileBlocked: a pod runs on one of a GPU's MIG devices, and
// the GPU waits (Blocked, DeviceInUse) for it to end before it can take a
// new layout that has no room for it. The GPU is reset (or the node
// rebooted): every instance goes. The agent makes the pod's device again,
// under its name, before anything else, and the GPU goes on waiting: the
// new layout is not laid over the device's placement, which would leave
// the claim with a device that can never come back. Once the pod ends, the
// new layout is made.
func TestGPUResetWhileBlocked(t *testing.T) {
	ctx := clustertest.Context(t, 4*time.Minute)
	const name = "e2e-reset-blocked"
	selector, ns, claim, dev := podOnHalves(t, ctx, name, nodeReset, a100, "reset")
	oldUUID := clustertest.NVMLDevices(env.Snapshot(t, nodeReset))[dev]

	ml := env.SetStaticMigLayout(t, ctx, name, selector, clustertest.Rule("whole", a100, map[string]int32{"7g.80gb": 1}))
	waitGPU0Blocked(t, ctx, nodeReset, "GPU 0 waiting for the pod's device")

	resetGPU0(t, nodeReset)
	waitRemade(t, ctx, nodeReset, dev, oldUUID, cdiSpecOf(t, nodeReset, string(claim.UID)))
	waitGPU0Blocked(t, ctx, nodeReset, "GPU 0 waiting for the pod's device again after the reset")
	// The GPU goes on waiting for several settle and resync periods: the device made
	// again keeps its new UUID (no process runs on it: only the allocation keeps it), and
	// no device of the new layout appears.
	keptWhileBlocked(t, nodeReset, dev, clustertest.NVMLDevices(env.Snapshot(t, nodeReset))[dev], 8*time.Second)
	env.WaitPoolMatchesNVML(t, ctx, nodeReset)

	if err := env.Client.CoreV1().Pods(ns).Delete(ctx, "infer", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	env.WaitPodGone(t, ctx, ns, "infer")
	env.WaitReady(t, ctx, ml, 1)
}

// resetGPU0 resets GPU 0 of node as the driver's recovery after an error
// does: the GPU's processes end, its instances go (on Hopper its MIG mode
// too, nvmlsim.Sim.ResetGPU).
func resetGPU0(t *testing.T, node string) {
	t.Helper()
	sim, err := env.Cluster.Sim(node)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range env.Snapshot(t, node).Processes {
		if err := sim.StopProcess(p.PID); err != nil {
			t.Fatal(err)
		}
	}
	if err := sim.ResetGPU(0); err != nil {
		t.Fatal(err)
	}
}

// waitRemade waits until device dev of node, whose UUID was oldUUID, is in
// NVML again with another UUID, and the claim's CDI spec (specPath) names
// that one and no longer the old one.
func waitRemade(t *testing.T, ctx context.Context, node, dev, oldUUID, specPath string) {
	t.Helper()
	clustertest.Poll(t, ctx, 60*time.Second, "the claim's CDI spec naming the device made again", func(context.Context) (bool, string) {
		newUUID := clustertest.NVMLDevices(env.Snapshot(t, node))[dev]
		if newUUID == "" || newUUID == oldUUID {
			return false, fmt.Sprintf("%s is %q in NVML (was %s)", dev, newUUID, oldUUID)
		}
		spec, err := os.ReadFile(specPath)
		if err != nil {
			return false, err.Error()
		}
		if !strings.Contains(string(spec), newUUID) || strings.Contains(string(spec), oldUUID) {
			return false, fmt.Sprintf("%s is %s now; the spec reads:\n%s", dev, newUUID, spec)
		}
		return true, ""
	})
}

// podOnHalves applies the MigLayout name (two 3g.40gb on node's GPU of
// model, the node labelled group; deleted at the test's end) and runs a pod
// "infer" there whose claim asks for a 3g.40gb; it returns the MigLayout's
// node selector, the pod's namespace, its claim and the claim's device.
func podOnHalves(t *testing.T, ctx context.Context, name, node, model, group string) (map[string]string, string, *resourceapi.ResourceClaim, string) {
	t.Helper()
	t.Cleanup(func() { env.DeleteMigLayout(t, name) })
	selector := map[string]string{groupLabel: group}
	ml := env.SetStaticMigLayout(t, ctx, name, selector, clustertest.Rule("halves", model, map[string]int32{"3g.40gb": 2}))
	env.WaitReady(t, ctx, ml, 1)
	env.WaitPoolMatchesNVML(t, ctx, node)
	ns := env.NewNamespace(t, ctx, name)
	claim := env.CreateClaim(t, ctx, ns, "infer", `device.attributes['mig.miglayout.io'].profile == '3g.40gb'`)
	env.CreatePod(t, ctx, clustertest.Pod(ns, "infer", clustertest.OnNode(node), claim.Name, ""))
	env.WaitPodRunning(t, ctx, ns, "infer", 60*time.Second)
	pool, dev, ok := clustertest.Allocated(env.GetClaim(t, ctx, ns, claim.Name))
	if !ok || pool != node {
		t.Fatalf("claim allocated from pool %q device %q, want a device of %s", pool, dev, node)
	}
	return selector, ns, claim, dev
}
