package planner

import (
	"time"

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
// plan) onto a GPU a large claim could have whole. Frozen nodes and nodes
// whose policy does not allow the largest profile are left alone, as is a
// GPU where a DeviceTaintRule names that device, and, on a node that keeps
// spares (Policy.Spares), a GPU whose free devices are spares the node's
// other GPUs do not hold. It runs after every pending pod is planned, so it takes no GPU
// a pod could use now.
func (p *planner) reclaimIdle() {
	// Reclaims in flight first, on every node: a GPU falling due now does
	// not take the slot of one already draining (which would be cancelled,
	// then take the slot back once the agent reports it, and so on).
	for _, reclaiming := range []bool{true, false} {
		for _, n := range p.nodes {
			after := n.n.Policy.ReclaimIdleAfter
			if n.n.Frozen || after <= 0 || p.snap.Now.IsZero() {
				continue
			}
			for _, g := range n.gpus {
				if g.g.Reclaiming == reclaiming {
					p.reclaim(g, after)
				}
			}
		}
	}
}

// reclaim gives g back whole where reclaimIdle may (see there).
func (p *planner) reclaim(g *gpuState, after time.Duration) {
	if !g.g.Reclaiming && (g.g.IdleSince.IsZero() || p.snap.Now.Sub(g.g.IdleSince) < after) {
		return
	}
	whole, ok := g.model.Whole()
	if !ok || !g.node.allows(whole.Profile) || g.g.Tainted.Contains(whole) || g.layout.Equal(mig.Layout{whole}) {
		return
	}
	if g.touched || g.g.Changing || len(g.fixed) > 0 || len(g.shared) > 0 || g.heldBy != "" || !p.mayChange(g) {
		return
	}
	// On a node that keeps spares, the other GPUs' free devices must
	// hold them.
	for prof, want := range g.node.n.Policy.Spares {
		have := 0
		for _, o := range g.node.gpus {
			if o != g {
				have += countProfile(o.free(), prof)
			}
		}
		if have < want {
			return
		}
	}
	g.touched = true
	g.node.touch()
	g.layout = mig.Layout{whole}
	g.reclaimed = true
	p.reclass(g)
	p.indexFree(g)
}

// countProfile counts the devices of profile prof in l.
func countProfile(l mig.Layout, prof string) int {
	n := 0
	for _, d := range l {
		if d.Profile == prof {
			n++
		}
	}
	return n
}

// SparesElsewhere reports whether the free devices (Layout less Pinned) of
// the node's GPUs other than the one of index idx hold the spares its
// policy keeps (Policy.Spares): giving that GPU back whole costs no spare.
// True on a node that keeps none.
func SparesElsewhere(n Node, idx int) bool {
	for prof, want := range n.Policy.Spares {
		have := 0
		for _, g := range n.GPUs {
			if g.Info.Index == idx {
				continue
			}
			for _, d := range g.Layout {
				if d.Profile == prof && !g.Pinned.Contains(d) {
					have++
				}
			}
		}
		if have < want {
			return false
		}
	}
	return true
}
