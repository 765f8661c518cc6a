package quality

import "github.com/miglayout/miglayout/pkg/mig"

// schedulerNode is kube-scheduler's choice of a node for claim id among
// nodes (node numbers, in node order), the nodes where the claim can be
// allocated a device. DRA devices add nothing to a node's score, so they
// score alike and kube-scheduler picks one of them at random (selectHost);
// a hash of the claim stands in for the draw, so that a trace plays the
// same way every run. Every strategy whose claims kube-scheduler places
// (miglayout, firstfit, nos) picks its node so: the strategies differ in the
// devices they publish, not in how the scheduler chooses among nodes.
// nodes must not be empty.
func schedulerNode(id int, nodes []int) int {
	return nodes[int((uint32(id)*2654435761>>16)%uint32(len(nodes)))]
}

// nodeChoice is the device a node offers a claim: the first in that
// node's allocation order, on GPU g.
type nodeChoice struct {
	g *simGPU
	d mig.Device
}

// pickNode collects, over s.gpus in order, the first choice each node
// offers (offer returns whether GPU g offers one, and which) and returns the
// one on the node schedulerNode picks for claim id; false where no node
// offers one. A node whose earlier GPU offered a device is not asked again.
func pickNode(s *sim, id int, offer func(g *simGPU) (mig.Device, bool)) (nodeChoice, bool) {
	var nodes []int
	first := map[int]nodeChoice{}
	for _, g := range s.gpus {
		if _, seen := first[g.node]; seen {
			continue
		}
		if d, ok := offer(g); ok {
			first[g.node] = nodeChoice{g: g, d: d}
			nodes = append(nodes, g.node)
		}
	}
	if len(nodes) == 0 {
		return nodeChoice{}, false
	}
	return first[schedulerNode(id, nodes)], true
}
