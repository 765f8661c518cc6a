package planner

import (
	"github.com/miglayout/miglayout/pkg/mig"
)

// reclaimIdle gives back, as one device of its model's largest profile
// (mig.Model.Whole), each GPU idle for its node's Policy.ReclaimIdleAfter
// (GPU.IdleSince), or already being given back (GPU.Reclaiming), that this
// plan leaves alone: no device pinned, shared,
// reserved for a pod of this plan or kept for a waiting one, not changing,
// and within the limits on GPUs changed at once. The free devices a
// finished workload leaves would otherwise draw new small claims (the
// scheduler gives a free device to the first pod it fits, whatever the
// plan) onto a GPU a large claim could have whole. Frozen nodes, nodes
// that keep spares, and nodes whose policy does not allow the largest
// profile are left alone, as is a GPU where a DeviceTaintRule names that
// device. It runs after every pending pod is planned, so it takes no GPU
// a pod could use now.
func (p *planner) reclaimIdle() {
	now := p.snap.Now
	for _, n := range p.nodes {
		after := n.n.Policy.ReclaimIdleAfter
		if n.n.Frozen || after <= 0 || now.IsZero() || len(n.n.Policy.Spares) > 0 {
			continue
		}
		for _, g := range n.gpus {
			if !g.g.Reclaiming && (g.g.IdleSince.IsZero() || now.Sub(g.g.IdleSince) < after) {
				continue
			}
			whole, ok := g.model.Whole()
			if !ok || !n.allows(whole.Profile) || g.g.Tainted.Contains(whole) || g.layout.Equal(mig.Layout{whole}) {
				continue
			}
			if g.touched || g.g.Changing || len(g.fixed) > 0 || len(g.shared) > 0 || g.heldBy != "" || !p.mayChange(g) {
				continue
			}
			g.touched = true
			g.node.touch()
			g.layout = mig.Layout{whole}
			g.reclaimed = true
			p.reclass(g)
			p.indexFree(g)
		}
	}
}
