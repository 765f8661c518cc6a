package fullstack

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/miglayout/miglayout/api/v1alpha1"
	"github.com/miglayout/miglayout/test/cluster"
	"github.com/miglayout/miglayout/test/cluster/clustertest"
)

// raceLeaseDuration is the heartbeat Lease duration of nodeRace's agent.
const raceLeaseDuration = 10 * time.Second

// TestAgentLost stops a node's agent (gracefully: its Lease stays, as after
// a crash) and checks that its MigLayout reports the node AgentLost within
// about a lease duration, and Ready again once the agent is back.
func TestAgentLost(t *testing.T) {
	ctx := clustertest.Context(t, 4*time.Minute)
	const name = "e2e-heartbeat"
	t.Cleanup(func() { env.DeleteMigLayout(t, name) })
	ml := env.SetStaticMigLayout(t, ctx, name, map[string]string{groupLabel: "race"},
		clustertest.Rule("halves", a100, map[string]int32{"3g.40gb": 2}))
	env.WaitReady(t, ctx, ml, 1)

	lease, err := env.Client.CoordinationV1().Leases(cluster.AgentLeaseNamespace).Get(ctx, v1alpha1.AgentLeaseName(nodeRace, ""), metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the agent's heartbeat Lease: %v", err)
	}
	node, err := env.Client.CoreV1().Nodes().Get(ctx, nodeRace, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if h := lease.Spec.HolderIdentity; h == nil || *h != nodeRace {
		t.Errorf("Lease holder %v, want %s", h, nodeRace)
	}
	if d := lease.Spec.LeaseDurationSeconds; d == nil || time.Duration(*d)*time.Second != raceLeaseDuration {
		t.Errorf("Lease duration %v s, want %s", d, raceLeaseDuration)
	}
	if o := lease.OwnerReferences; len(o) != 1 || o[0].Kind != "Node" || o[0].UID != node.UID {
		t.Errorf("Lease owners %+v, want the Node (uid %s)", o, node.UID)
	}

	stopped := time.Now()
	env.Cluster.StopAgent(nodeRace)
	restarted := false
	t.Cleanup(func() {
		if !restarted {
			_ = env.Cluster.StartAgent(context.Background(), nodeRace)
		}
	})
	lost := env.WaitMigLayout(t, ctx, name, ml.Generation, 60*time.Second, "AgentLost", func(ml *v1alpha1.MigLayout) bool {
		return clustertest.HasCondition(ml.Status.Conditions, v1alpha1.ConditionDegraded, metav1.ConditionTrue, v1alpha1.ReasonAgentLost) &&
			clustertest.HasCondition(ml.Status.Conditions, v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonAgentLost)
	})
	took := time.Since(stopped)
	t.Logf("reported lost %s after the agent stopped", took.Round(time.Second))
	if took > 3*raceLeaseDuration {
		t.Errorf("reported lost %s after the agent stopped, want about its lease duration %s", took.Round(time.Second), raceLeaseDuration)
	}
	if len(lost.Status.Nodes) != 1 || lost.Status.Nodes[0].Phase != v1alpha1.PhaseUnknown ||
		!strings.Contains(lost.Status.Nodes[0].Message, "has not renewed its heartbeat Lease") {
		t.Errorf("node rows %+v, want %s Unknown with the heartbeat's message", lost.Status.Nodes, nodeRace)
	}
	if r := lost.Status.Nodes[0].GPUs; len(r) != 1 || r[0].Actual != "3g.40gb@0,3g.40gb@4" {
		t.Errorf("GPU rows %+v, want the last report", r)
	}
	waitEvent(t, ctx, name, v1alpha1.ReasonAgentLost)

	restarted = true
	if err := env.Cluster.StartAgent(ctx, nodeRace); err != nil {
		t.Fatal(err)
	}
	env.WaitReady(t, ctx, ml, 1)
	waitEvent(t, ctx, name, "AgentReturned")
}
