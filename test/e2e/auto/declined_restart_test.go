package auto

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/miglayout/miglayout/api/v1alpha1"
	"github.com/miglayout/miglayout/pkg/controller"
	"github.com/miglayout/miglayout/test/cluster/clustertest"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"
)

// TestAutoDeclinesSurviveControllerRestart: pod pinned may run on node A only
// (required node affinity), where pod guard's required anti-affinity keeps it off.
// Its 1g.10gb is made on node A, waits --auto-unbound-after unbound, and node A is
// left out of its plans: no node is left, so it counts as not servable. The
// controller then crashes and starts again (as after a failover): it reads that
// back from its SchedulerDeclinedNode event, with the chart's RBAC, so pinned still
// counts as not servable, and no new wait starts on node A's free device. Before, a
// controller that started planned pinned on node A again and waited another
// --auto-unbound-after before telling it so.
func TestAutoDeclinesSurviveControllerRestart(t *testing.T) {
	ctx := clustertest.Context(t, 3*time.Minute)
	ml := wholeThenAuto(t, ctx)
	ns := env.NewNamespace(t, ctx, "declined-restart")
	small := `device.attributes['mig.miglayout.io'].profile == '1g.10gb'`

	startGuard(t, ctx, ns)

	env.CreateClaim(t, ctx, ns, "pinned-gpu", small)
	pinned := clustertest.Pod(ns, "pinned", map[string]string{corev1.LabelHostname: nodeA}, "pinned-gpu", "")
	pinned.Spec.Affinity = apartFromGuard()
	env.CreatePod(t, ctx, pinned)
	// --auto-unbound-after, and as long from the controller's first plan
	// (kube-scheduler's Lease) where this test runs first.
	waitPodEventWithin(t, ctx, ns, "pinned", controller.EventSchedulerDeclinedNode, 3*unboundAfter)
	notServable := func(ml *v1alpha1.MigLayout) bool { return ml.Status.Auto != nil && ml.Status.Auto.NotServablePods == 1 }
	env.WaitMigLayout(t, ctx, layoutName, ml.Generation, 30*time.Second, "pod pinned counted as not servable", notServable)

	logPath := filepath.Join(env.Cluster.LogDir(), "controller.log")
	before, err := os.Stat(logPath)
	if err != nil {
		t.Fatal(err)
	}
	env.Cluster.KillController()
	if err := env.Cluster.StartController(ctx); err != nil {
		t.Fatal(err)
	}
	clustertest.Poll(t, ctx, 30*time.Second, "the restarted controller reading back the nodes left out", func(ctx context.Context) (bool, string) {
		data, err := os.ReadFile(logPath)
		if err != nil {
			return false, err.Error()
		}
		after := string(data[min(int(before.Size()), len(data)):])
		if strings.Contains(after, "Cannot read back the nodes left out") {
			t.Fatalf("the restarted controller could not read its events back:\n%s", after)
		}
		return strings.Contains(after, "Read back the nodes left out of pods' plans"), "not in controller.log yet"
	})
	// The restarted controller's first plans: pinned stays not servable.
	for end := time.Now().Add(3 * batchMax); time.Now().Before(end); time.Sleep(500 * time.Millisecond) {
		var got v1alpha1.MigLayout
		if err := env.CRC.Get(ctx, crclient.ObjectKey{Name: layoutName}, &got); err != nil {
			t.Fatal(err)
		}
		if !notServable(&got) {
			t.Fatalf("after the restart the MigLayout's Auto status is %+v, want pod pinned counted as not servable", got.Status.Auto)
		}
	}
}
