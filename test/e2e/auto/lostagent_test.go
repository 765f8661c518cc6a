package auto

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/miglayout/miglayout/api/v1alpha1"
	"github.com/miglayout/miglayout/pkg/controller"
	"github.com/miglayout/miglayout/test/cluster/clustertest"
)

// nodeBLeaseDuration is the heartbeat Lease duration of node B's agent:
// short, so that TestAutoFreezesLostNode sees it lost soon, but long enough
// that renewals delayed on a loaded machine do not freeze node B in the
// package's other tests.
const nodeBLeaseDuration = 15 * time.Second

// TestAutoFreezesLostNode: node B's agent stops; once the MigLayout reports it
// AgentLost, six pending 3g.40gb pods get node A's four halves, and the two
// left over wait: nothing is planned on node B, whose agent would never carry
// it out. When the agent is back, node B is repartitioned for them.
func TestAutoFreezesLostNode(t *testing.T) {
	ctx := clustertest.Context(t, 3*time.Minute)
	ml := wholeThenAuto(t, ctx)

	env.Cluster.StopAgent(nodeB)
	restarted := false
	t.Cleanup(func() {
		if !restarted {
			_ = env.Cluster.StartAgent(context.Background(), nodeB)
		}
	})
	env.WaitMigLayout(t, ctx, layoutName, ml.Generation, 60*time.Second, "node B AgentLost", func(ml *v1alpha1.MigLayout) bool {
		for _, r := range ml.Status.Nodes {
			if r.Node == nodeB {
				return r.Phase == v1alpha1.PhaseUnknown
			}
		}
		return false
	})
	specB := fmt.Sprint(env.GetNodeMigLayout(t, ctx, nodeB).Spec.GPUs)

	ns := env.NewNamespace(t, ctx, "lost")
	var names []string
	for i := range 6 {
		name := fmt.Sprintf("half-%d", i)
		names = append(names, name)
		if _, err := env.Client.ResourceV1().ResourceClaims(ns).Create(ctx, &resourceapi.ResourceClaim{
			ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: clustertest.ClaimSpec(sel3g)}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := env.Client.CoreV1().Pods(ns).Create(ctx, clustertest.Pod(ns, name, autoNodes, name, ""), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// Four run on node A; two wait.
	var waiting []string
	clustertest.Poll(t, ctx, 90*time.Second, "four pods running on node A", func(ctx context.Context) (bool, string) {
		waiting = waiting[:0]
		onA := 0
		for _, n := range names {
			p, err := env.Client.CoreV1().Pods(ns).Get(ctx, n, metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			switch p.Spec.NodeName {
			case nodeA:
				onA++
			case "":
				waiting = append(waiting, n)
			default:
				return false, fmt.Sprintf("pod %s bound to %s", n, p.Spec.NodeName)
			}
		}
		return onA == 4 && len(waiting) == 2, fmt.Sprintf("%d on node A, waiting %v", onA, waiting)
	})
	waiting = slices.Clone(waiting)
	for _, n := range waiting {
		waitPodEvent(t, ctx, ns, n, controller.EventWaitingForCapacity)
	}
	if got := fmt.Sprint(env.GetNodeMigLayout(t, ctx, nodeB).Spec.GPUs); got != specB {
		t.Errorf("node B's spec changed while its agent was lost: %s, was %s", got, specB)
	}

	// The agent is back: node B is planned for the two.
	restarted = true
	if err := env.Cluster.StartAgent(ctx, nodeB); err != nil {
		t.Fatal(err)
	}
	for _, n := range waiting {
		if p := env.WaitPodRunning(t, ctx, ns, n, 90*time.Second); p.Spec.NodeName != nodeB {
			t.Errorf("pod %s runs on %s, want %s", n, p.Spec.NodeName, nodeB)
		}
	}
}
