package auto

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/miglayout/miglayout/api/v1alpha1"
	migslices "github.com/miglayout/miglayout/pkg/slices"
	"github.com/miglayout/miglayout/test/cluster/clustertest"
)

// TestAutoGivesIdleGPUsBackWhole: a pod's 1g.10gb is made on a whole GPU; once the pod
// and its claim are gone and the GPU has stayed idle for the policy's
// reclaimIdleGPUsAfterSeconds, the controller gives it back as one 7g.80gb, which the
// agent makes and publishes, with nothing else asking for it.
func TestAutoGivesIdleGPUsBackWhole(t *testing.T) {
	ctx := clustertest.Context(t, 2*time.Minute)
	wholeThenAuto(t, ctx)
	ml := env.SetMigLayout(t, ctx, layoutName, v1alpha1.MigLayoutSpec{
		NodeSelector: metav1.LabelSelector{MatchLabels: autoNodes},
		Mode:         v1alpha1.ModeAuto,
		Policy:       &v1alpha1.AutoPolicy{MaxGPUsPerNode: 2, ReclaimIdleGPUsAfterSeconds: ptr.To[int32](10)},
	})
	env.WaitReady(t, ctx, ml, 2)

	ns := env.NewNamespace(t, ctx, "reclaim")
	node, dev := runSmallPod(t, ctx, ns)
	if !strings.Contains(dev, "-mig-1g10gb-") {
		t.Fatalf("claim small-gpu allocated %s/%s, want a 1g.10gb", node, dev)
	}
	gpu, _, _ := migslices.DeviceGPUIndex(dev)
	t.Logf("pod small runs on %s/%s", node, dev)

	released := time.Now()
	if err := env.Client.CoreV1().Pods(ns).Delete(ctx, "small", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.ResourceV1().ResourceClaims(ns).Delete(ctx, "small-gpu", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	clustertest.Poll(t, ctx, 60*time.Second, fmt.Sprintf("%s GPU %d to be one 7g.80gb again", node, gpu), func(context.Context) (bool, string) {
		layouts := clustertest.Layouts(env.Snapshot(t, node))
		return gpu < len(layouts) && layouts[gpu] == "7g.80gb@0", fmt.Sprintf("layouts %v", layouts)
	})
	if since := time.Since(released); since < 10*time.Second {
		t.Errorf("GPU given back %s after the pod went, before the 10 s it must stay idle", since)
	}
	nml := env.GetNodeMigLayout(t, ctx, node)
	for _, g := range nml.Spec.GPUs {
		if int(g.Index) == gpu && !strings.Contains(g.Reason, "back whole") {
			t.Errorf("GPU %d spec reason %q, want it to say the idle GPU is given back whole", gpu, g.Reason)
		}
	}
	env.WaitPoolMatchesNVML(t, ctx, node)
	t.Logf("%s GPU %d is one 7g.80gb again %.1fs after the pod was deleted", node, gpu, time.Since(released).Seconds())
}

// runSmallPod creates, in ns, claim small-gpu for a 1g.10gb and pod small using it on
// the Auto nodes, waits for the pod to run and returns the node and device the claim
// was allocated.
func runSmallPod(t *testing.T, ctx context.Context, ns string) (node, device string) {
	t.Helper()
	env.CreateClaim(t, ctx, ns, "small-gpu", `device.attributes['mig.miglayout.io'].profile == '1g.10gb'`)
	env.CreatePod(t, ctx, clustertest.Pod(ns, "small", autoNodes, "small-gpu", ""))
	env.WaitPodRunning(t, ctx, ns, "small", 60*time.Second)
	node, device, ok := clustertest.Allocated(env.GetClaim(t, ctx, ns, "small-gpu"))
	if !ok {
		t.Fatal("claim small-gpu is not allocated")
	}
	return node, device
}
