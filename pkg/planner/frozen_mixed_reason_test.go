package planner

import (
	"context"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
)

// TestFrozenNodesNeverReasonOfMixedNodes: where one frozen node's models
// have no profile for the claim and another's policy leaves out the one
// that would do, the pod is told of the policy, whatever the nodes' order:
// not that no profile of either model serves it.
func TestFrozenNodesNeverReasonOfMixedNodes(t *testing.T) {
	const want = "claim big-gpu is satisfied by 7g.80gb, which the Auto policy (allowedProfiles) of no node the pod may run on allows"
	for name, a100First := range map[string]bool{"A30 first": false, "A100 first": true} {
		t.Run(name, func(t *testing.T) {
			nodes := []Node{node("a30").frozen().gpu("A30-24GB", "4g.24gb@0", "").build(),
				node("a100").frozen().policy(Policy{AllowedProfiles: []string{"1g.10gb"}}).gpu("A100-SXM4-80GB", "7g.80gb@0", "").build()}
			if a100First {
				nodes[0], nodes[1] = nodes[1], nodes[0]
			}
			pods := []Pod{pod("big", 1).claim("device.attributes['mig.miglayout.io'].memory >= 70000", 1).build()}
			got, err := Plan(context.Background(), Snapshot{Driver: driver, Nodes: nodes, Pending: pods, Classes: []*resourceapi.DeviceClass{migClass()}, Now: t0})
			if err != nil {
				t.Fatal(err)
			}
			if why := got.Unservable["default/big"]; len(why) < len(want) || why[:len(want)] != want {
				t.Errorf("told %q, want it to start %q", why, want)
			}
		})
	}
}
