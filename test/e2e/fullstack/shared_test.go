package fullstack

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/miglayout/miglayout/test/cluster/clustertest"
	"github.com/miglayout/miglayout/test/kubelet"
)

// TestSharedClaimOutlivesItsFirstPod: two idle pods share one claim (one
// MIG device; the kubelet prepares it once, for both). The first pod ends:
// the claim stays prepared and reserved for the second, and a layout change
// that has no room for the device waits for it (Blocked, DeviceInUse)
// without destroying it, though no process runs on it. Once the second pod
// ends, the claim is unprepared and the new layout is made.
func TestSharedClaimOutlivesItsFirstPod(t *testing.T) {
	ctx := clustertest.Context(t, 4*time.Minute)
	const name = "e2e-shared"
	ns := sevenths(t, ctx, name)
	claim := env.CreateClaim(t, ctx, ns, "shared", `device.attributes['mig.miglayout.io'].profile == '1g.10gb'`)
	for _, p := range []string{"first", "second"} {
		pod := clustertest.Pod(ns, p, clustertest.OnNode(nodeWipe), claim.Name, "")
		pod.Labels = map[string]string{kubelet.IdleLabel: "true"}
		env.CreatePod(t, ctx, pod)
	}
	env.WaitPodRunning(t, ctx, ns, "first", 60*time.Second)
	env.WaitPodRunning(t, ctx, ns, "second", 60*time.Second)
	c := env.GetClaim(t, ctx, ns, claim.Name)
	pool, dev, ok := clustertest.Allocated(c)
	if !ok || pool != nodeWipe || len(c.Status.ReservedFor) != 2 {
		t.Fatalf("claim allocated %q/%q, reserved for %v; want a device of %s reserved for both pods", pool, dev, c.Status.ReservedFor, nodeWipe)
	}
	uuid := clustertest.NVMLDevices(env.Snapshot(t, nodeWipe))[dev]
	seeing := 0
	for _, p := range env.Cluster.Kubelet(nodeWipe).Pods() {
		if p.Namespace != ns {
			continue
		}
		if fmt.Sprint(p.DeviceUUIDs) == fmt.Sprint([]string{uuid}) {
			seeing++
		} else {
			t.Errorf("pod %s sees %v, want the claim's device %s", p.Name, p.DeviceUUIDs, uuid)
		}
	}
	if seeing != 2 {
		t.Errorf("%d pods of the kubelet see the claim's device %s, want both", seeing, uuid)
	}
	spec := cdiSpecOf(t, nodeWipe, string(claim.UID))

	if err := env.Client.CoreV1().Pods(ns).Delete(ctx, "first", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	env.WaitPodGone(t, ctx, ns, "first")
	clustertest.Poll(t, ctx, 30*time.Second, "claim reserved for the second pod only", func(ctx context.Context) (bool, string) {
		c := env.GetClaim(t, ctx, ns, claim.Name)
		return len(c.Status.ReservedFor) == 1 && c.Status.ReservedFor[0].Name == "second", fmt.Sprintf("reserved for %v", c.Status.ReservedFor)
	})
	if _, err := os.Stat(spec); err != nil {
		t.Errorf("the claim's CDI spec is gone while the second pod runs: %v", err)
	}

	// A whole-GPU layout has no room for the device: the GPU waits for it.
	ml := env.SetStaticMigLayout(t, ctx, name, wipeSelector, clustertest.Rule("whole", a100, map[string]int32{"7g.80gb": 1}))
	waitGPU0Blocked(t, ctx, nodeWipe, "GPU 0 waiting for the shared device")
	keptWhileBlocked(t, nodeWipe, dev, uuid, 6*time.Second)

	if err := env.Client.CoreV1().Pods(ns).Delete(ctx, "second", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	env.WaitPodGone(t, ctx, ns, "second")
	clustertest.Poll(t, ctx, 30*time.Second, "the claim's CDI spec removed", func(context.Context) (bool, string) {
		_, err := os.Stat(spec)
		return os.IsNotExist(err), fmt.Sprintf("stat %s: %v", spec, err)
	})
	env.WaitReady(t, ctx, ml, 1)
	if got := clustertest.Layouts(env.Snapshot(t, nodeWipe)); len(got) != 1 || !strings.Contains(got[0], "7g.80gb") {
		t.Errorf("layouts %v, want the whole GPU", got)
	}
}
