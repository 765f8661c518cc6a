package planner

import "testing"

// TestFrozenReasonsNameThreeNodes: where every Auto node is Frozen, the
// reason names the first three and counts the others.
func TestFrozenReasonsNameThreeNodes(t *testing.T) {
	var nodes []Node
	for _, name := range []string{"a", "b", "c", "d"} {
		nodes = append(nodes, node(name).frozenBy("its agent is lost").gpu("A100-SXM4-80GB", "7g.80gb@0", "").build())
	}
	p := pod("p", 1).nodeSelector("gpu", "none").claim(profileIs("1g.10gb"), 1).build()
	want := trace{Unservable: map[string]string{"default/p": "no Auto-mode node can be changed now: node a: its agent is lost; node b: its agent is lost; node c: its agent is lost; and 1 more"}}
	checkTrace(t, want, planTrace(t, nodes, []Pod{p}))
}
