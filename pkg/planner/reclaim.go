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
// other GPUs, and the whole device, do not hold (reclaimCostsSpare). It runs after every pending pod is planned, so it takes no GPU
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
	// On a node that keeps spares, not where it costs one the node lacks.
	mine, others := map[string]int{}, map[string]int{}
	for prof := range g.node.n.Policy.Spares {
		mine[prof] = countProfile(g.free(), prof)
		for _, o := range g.node.gpus {
			if o != g {
				others[prof] += countProfile(o.free(), prof)
			}
		}
	}
	if reclaimCostsSpare(g.node.n.Policy.Spares, whole, mine, others) {
		return
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

// reclaimCostsSpare reports whether giving a GPU back as the one device
// whole loses a spare its node's policy keeps (spares, by profile): for
// some profile, the GPU's free devices (mine, by profile) hold more than
// whole does, and the node is then left with fewer than spares wants (the
// free devices of its other GPUs, others by profile, and whole). A spare
// the node cannot hold either way (a profile its GPUs' model does not
// offer, or one the GPU holds no free device of) costs nothing, and a
// GPU given back as a spare's profile gains one.
func reclaimCostsSpare(spares map[string]int, whole mig.Device, mine, others map[string]int) bool {
	for prof, want := range spares {
		gain := 0
		if whole.Profile == prof {
			gain = 1
		}
		if mine[prof] > gain && others[prof]+gain < want {
			return true
		}
	}
	return false
}

// ReclaimKeepsSpares reports whether giving the GPU of index idx back
// whole (one device of its model's largest profile, mig.Model.Whole) costs
// the node no spare its policy keeps (Policy.Spares) and lacks: the free
// devices (Layout less Pinned) of its other GPUs, with the whole device,
// still hold them, or the GPU's own free devices hold none (see
// reclaimCostsSpare). True on a node that keeps none.
func ReclaimKeepsSpares(n Node, idx int) bool {
	if len(n.Policy.Spares) == 0 {
		return true
	}
	mine, others := map[string]int{}, map[string]int{}
	var whole mig.Device
	for _, g := range n.GPUs {
		counts := others
		if g.Info.Index == idx {
			counts = mine
			if g.Info.Model != nil {
				whole, _ = g.Info.Model.Whole()
			}
		}
		for _, d := range g.Layout {
			if _, kept := n.Policy.Spares[d.Profile]; kept && !g.Pinned.Contains(d) {
				counts[d.Profile]++
			}
		}
	}
	return !reclaimCostsSpare(n.Policy.Spares, whole, mine, others)
}
