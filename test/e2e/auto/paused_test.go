package auto

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/miglayout/miglayout/api/v1alpha1"
	"github.com/miglayout/miglayout/pkg/controller"
	"github.com/miglayout/miglayout/test/cluster/clustertest"
)

// TestAutoPausedPlansNothing: with the Auto MigLayout paused (kubectl
// miglayout pause), a pod whose 3g.40gb only a repartition makes (both nodes
// hold whole GPUs) waits, told why, and neither node's spec nor GPUs change;
// resumed, the planner makes the device and the pod runs.
func TestAutoPausedPlansNothing(t *testing.T) {
	ctx := clustertest.Context(t, 3*time.Minute)
	ml := wholeThenAuto(t, ctx)
	t.Cleanup(func() {
		// The package's other tests expect an Auto MigLayout that plans.
		_ = env.CRC.Patch(context.Background(), ml.DeepCopy(), crclient.RawPatch("application/merge-patch+json", []byte(`{"spec":{"paused":false}}`)))
	})
	// Paused as an operator does, with the kubectl plugin.
	if out, err := env.Cluster.Kubectl(ctx, "miglayout", "pause", layoutName); err != nil || string(out) != "miglayout "+layoutName+" paused\n" {
		t.Fatalf("kubectl miglayout pause %s: %q, %v", layoutName, out, err)
	}
	if err := env.CRC.Get(ctx, crclient.ObjectKeyFromObject(ml), ml); err != nil || !ml.Spec.Paused {
		t.Fatalf("after kubectl miglayout pause: spec.paused %t (%v), want set", ml.Spec.Paused, err)
	}
	env.WaitMigLayout(t, ctx, layoutName, ml.Generation, 30*time.Second, "Paused", func(ml *v1alpha1.MigLayout) bool {
		return clustertest.HasCondition(ml.Status.Conditions, v1alpha1.ConditionPaused, metav1.ConditionTrue, v1alpha1.ReasonPaused)
	})
	specs := map[string]string{}
	for _, n := range []string{nodeA, nodeB} {
		specs[n] = fmt.Sprint(env.GetNodeMigLayout(t, ctx, n).Spec.GPUs)
	}

	ns := env.NewNamespace(t, ctx, "paused")
	if _, err := env.Client.ResourceV1().ResourceClaims(ns).Create(ctx, &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "half"}, Spec: clustertest.ClaimSpec(sel3g)}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Client.CoreV1().Pods(ns).Create(ctx, clustertest.Pod(ns, "half", autoNodes, "half", ""), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitPodEvent(t, ctx, ns, "half", controller.EventWaitingForCapacity)
	for _, n := range []string{nodeA, nodeB} {
		if got := fmt.Sprint(env.GetNodeMigLayout(t, ctx, n).Spec.GPUs); got != specs[n] {
			t.Errorf("%s's spec changed while paused: %s, was %s", n, got, specs[n])
		}
		if got := clustertest.Layouts(env.Snapshot(t, n)); !slices.Equal(got, []string{"7g.80gb@0", "7g.80gb@0"}) {
			t.Errorf("%s's GPUs changed while paused: %v", n, got)
		}
	}
	if p, err := env.Client.CoreV1().Pods(ns).Get(ctx, "half", metav1.GetOptions{}); err != nil || p.Spec.NodeName != "" {
		t.Fatalf("pod half while paused: bound to %q (%v), want pending", p.Spec.NodeName, err)
	}

	if err := env.CRC.Patch(ctx, ml, crclient.RawPatch("application/merge-patch+json", []byte(`{"spec":{"paused":false}}`))); err != nil {
		t.Fatal(err)
	}
	env.WaitPodRunning(t, ctx, ns, "half", 90*time.Second)
}
