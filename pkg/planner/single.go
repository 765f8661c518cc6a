package planner

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/miglayout/miglayout/pkg/mig"
)

// serveSingle serves a pod that needs exactly one device.
func (p *planner) serveSingle(ctx context.Context, pod Pod, nodes []*nodeState) error {
	key := podKey(pod.Pod)
	p.podMark++
	mark := p.podMark
	for _, n := range nodes {
		n.mark = mark
	}
	ok := func(n *nodeState) bool { return n.mark == mark }
	// Profiles that satisfy the claim, per kind of GPU (gpuKind), best
	// first.
	profiles := map[string][]string{}
	rank := map[string]map[string]int{}
	anyProfile := false
	for _, k := range p.kinds {
		ps, err := p.match.singleProfiles(ctx, pod.Claims[0], k)
		if err != nil {
			return fmt.Errorf("planning pod %s: %w", key, err)
		}
		profiles[k.key] = ps
		rank[k.key] = map[string]int{}
		for i, prof := range ps {
			rank[k.key][prof] = i
		}
		anyProfile = anyProfile || len(ps) > 0
	}
	if !anyProfile {
		p.result.Unservable[key] = noProfileReason(p.models, pod.Claims[0].Name)
		return nil
	}

	// Every way to serve the pod is compared by one rule: least room for
	// large profiles taken from the devices that stay (best fit across
	// GPUs: a small device goes where it spoils the least, whether it
	// exists already or is created), then the fewest free devices
	// destroyed, then no change over a change, then a GPU the plan changes
	// anyway, then the most room left, the preferred profile, snapshot
	// order. So a free device on an otherwise empty GPU is not taken when
	// one can be created beside devices in use elsewhere: the empty GPU
	// stays whole for a large claim.
	type choice struct {
		g         *gpuState
		add       *addition // nil: a free device that exists or is coming
		dev       mig.Device
		loss      []int
		destroyed int
		headroom  []int
		idx       int    // preference index of the profile
		cls       *class // the class g stands for, nil for a GPU in flight
	}
	cands := make([]choice, 0, 16)
	better := func(c choice, best *choice) bool {
		if best == nil {
			return true
		}
		if cmp := slices.Compare(c.loss, best.loss); cmp != 0 {
			return cmp < 0
		}
		if c.destroyed != best.destroyed {
			return c.destroyed < best.destroyed
		}
		if (c.add == nil) != (best.add == nil) {
			return c.add == nil
		}
		if c.g.touched != best.g.touched {
			return c.g.touched
		}
		if cmp := slices.Compare(c.headroom, best.headroom); cmp != 0 {
			return cmp > 0
		}
		if c.idx != best.idx {
			return c.idx < best.idx
		}
		return c.g.order < best.g.order
	}
	// Free devices coming with a change in flight (such GPUs are in no
	// class): the first GPU per profile.
	names := sets.New[string]()
	for _, ps := range profiles {
		names.Insert(ps...)
	}
	for _, prof := range sets.List(names) {
		g, d := p.firstFree(prof, func(g *gpuState) bool {
			_, fits := rank[g.kind][prof]
			return fits && ok(g.node) // GPUs in flight are never kept (hold picks from classes)
		})
		if g == nil {
			continue
		}
		cands = append(cands, choice{g: g, dev: d, loss: p.freeLoss(g, d), headroom: g.model.Headroom(g.layout), idx: rank[g.kind][prof]})
	}
	live := p.order[:0]
	for _, ck := range p.order {
		c := p.classes[ck]
		if c.empty() {
			delete(p.classes, ck)
			continue
		}
		live = append(live, ck)
	}
	p.order = live
	untouched := p.untouchedMayChange()
	for _, ck := range p.order {
		c := p.classes[ck]
		// The first GPU of the class this pod may use, and the first it
		// may change.
		var first, firstChange *gpuState
		c.members(func(g *gpuState) bool {
			if !ok(g.node) {
				return true
			}
			first = g
			return false
		})
		// Where no GPU left as it is may change (every group at its
		// limit), none of its class may (a class's GPUs are all changed
		// or all not).
		if first != nil && (first.touched || untouched) {
			if p.mayChange(first) {
				firstChange = first
			} else {
				c.changeable(p.neverChanges, func(g *gpuState) bool {
					if ok(g.node) && p.mayChange(g) {
						firstChange = g
						return false
					}
					return true
				})
			}
		}
		if first == nil {
			continue
		}
		for _, d := range first.layout { // its free devices
			i, fits := rank[first.kind][d.Profile]
			if !fits || first.fixed.Contains(d) || first.blocks(d) {
				continue
			}
			cands = append(cands, choice{g: first, dev: d, loss: p.classFreeLoss(c, first, d), headroom: c.headroomOf(first), idx: i, cls: c})
		}
		if firstChange == nil {
			continue
		}
		for i, prof := range profiles[firstChange.kind] {
			if !firstChange.node.allows(prof) {
				continue
			}
			a := p.classAddition(c, firstChange, prof)
			if a == nil {
				continue
			}
			cands = append(cands, choice{g: firstChange, add: a, dev: a.device, loss: a.loss, destroyed: a.destroyed, headroom: a.headroom, idx: i, cls: c})
		}
	}
	// The best way the scheduler agrees with: on a node where some pod
	// is not exact, the way only if the scheduler, taking the node's
	// pods in its order, gives each of them devices (nodeAgrees).
	p.accepts[key] = profiles
	var best *choice
	// Nodes whose scheduler replay refused a way of a class: that way is
	// tried on the class's next GPU on another node (the same state, so the
	// same way), up to sameWayNodes of them. A refusal says nothing of
	// another class's way on the node (another GPU, other devices).
	type refusal struct {
		cls  *class
		node *nodeState
	}
	refused := map[refusal]bool{}
	tries := map[*class]int{}
	for len(cands) > 0 {
		// The best left (the first of equals), taken out.
		i := 0
		for j := 1; j < len(cands); j++ {
			if better(cands[j], &cands[i]) {
				i = j
			}
		}
		c := &choice{}
		*c = cands[i]
		cands = slices.Delete(cands, i, i+1)
		if p.needsReplay(c.g.node, key) {
			agrees, err := p.agreesWith(ctx, pod, c.g, c.add)
			if err != nil {
				return fmt.Errorf("planning pod %s: %w", key, err)
			}
			if !agrees {
				refused[refusal{c.cls, c.g.node}] = true
				if c.cls != nil {
					usable := func(n *nodeState) bool { return ok(n) && !refused[refusal{c.cls, n}] }
					var g *gpuState
					if len(c.g.node.waiting) > 0 {
						// The refusal may come from pods waiting on
						// that node (nodeState.waiting), which other
						// nodes of the class lack: the class's next
						// GPU on a node without any is tried, not
						// counted.
						g = p.nextInClass(c.cls, c.g, c.add != nil, func(n *nodeState) bool { return usable(n) && len(n.waiting) == 0 })
					}
					if g == nil && tries[c.cls] < sameWayNodes {
						tries[c.cls]++
						g = p.nextInClass(c.cls, c.g, c.add != nil, usable)
					}
					if g != nil {
						next := *c
						next.g = g
						cands = append(cands, next)
					}
				}
				continue
			}
		}
		best = c
		break
	}
	if best == nil {
		// No free device fits, and none may be created: never, where
		// every profile that satisfies the claim is one the policies
		// forbid creating.
		if !p.anyAllowed(nodes, profiles) {
			names := sets.New[string]()
			for _, ps := range profiles {
				names.Insert(ps...)
			}
			p.result.Unservable[key] = fmt.Sprintf("claim %s is satisfied by %s, which the Auto policy (allowedProfiles) of no node the pod may run on allows", pod.Claims[0].Name, strings.Join(sets.List(names), ", "))
			return nil
		}
		if held := p.hold(key, profiles, ok); held != nil {
			p.result.Kept[key] = Kept{Node: held.node.n.Node.Name, GPU: held.g.Info.Index, Profile: profiles[held.kind][0], Placement: held.held}
			return nil
		}
		p.result.Unservable[key] = NoRoom
		return nil
	}
	g := best.g
	if best.add == nil {
		p.reserve(g, best.dev, key, false)
		return nil
	}
	p.applyAddition(g, best.add)
	p.reserve(g, best.add.device, key, true)
	return nil
}

// sameWayNodes bounds the other nodes a class's way to serve a pod is
// tried on once the scheduler replay refuses it (each try replays a node).
const sameWayNodes = 8

// noProfile starts the reason of a pod of one device no profile of the
// Auto nodes' GPU models satisfies (serveSingle).
const noProfile = "no profile of the Auto nodes' GPU models"

// noProfileReason is the reason of a pod of one device, of claim claim, no
// profile of the Auto nodes' GPU models (models, named) satisfies.
func noProfileReason(models []*mig.Model, claim string) string {
	names := make([]string, len(models))
	for i, m := range models {
		names[i] = m.Name
	}
	slices.Sort(names)
	names = slices.Compact(names) // variants of one model (Model.Key)
	return fmt.Sprintf("%s (%s) satisfies claim %s", noProfile, strings.Join(names, ", "), claim)
}

// nextInClass returns the first GPU of class c after g on a node usable
// accepts (one that may change, for a way that changes it), nil if none.
func (p *planner) nextInClass(c *class, g *gpuState, change bool, usable func(*nodeState) bool) *gpuState {
	if change && !g.touched && !p.untouchedMayChange() {
		return nil // no GPU of its class may change
	}
	var next *gpuState
	after := false
	c.members(func(m *gpuState) bool {
		if m == g {
			after = true
			return true
		}
		if !after || !usable(m.node) || change && !p.mayChange(m) {
			return true
		}
		next = m
		return false
	})
	return next
}

// largeComputeSlices is where a profile counts as large (3g, 4g, 7g): a
// pending pod of such a profile that nothing can serve holds a GPU.
const largeComputeSlices = 3

// hold keeps a placement of one GPU for a pod of a large profile that no
// GPU can take now: on a feasible node, the placement of the pod's preferred
// profile in which the fewest devices that must stay are in the way, those
// whose claims end soon (GPU.Releasing) counted apart and after the others
// (among equals, the one whose device leaves the most room for large
// profiles), on the GPU where those numbers are lowest, then whose devices
// that stay leave the
// least room for large profiles (mig.Model.Headroom: what the hold takes
// from other pods is worth the least there), then with the fewest such
// devices overall. Pods planned after it (younger, smaller or of lower
// priority) get no device overlapping the placement, so it drains as its
// claims end instead of filling with small devices: a large claim then
// waits for the work in one placement to end, not for an unlikely moment
// when one happens to be free. Devices outside the placement stay usable (a
// GPU kept for a 4g.40gb still takes a 3g.40gb in its other half). It
// returns the held GPU, or nil when the pod's profiles are small or no GPU
// can be held.
func (p *planner) hold(pod string, profiles map[string][]string, ok func(*nodeState) bool) *gpuState {
	var best *gpuState
	var bestPl mig.Placement
	var bestRoom []int
	var bestIn blockers
	bestAll := 0
	// GPUs of a class block the pod's profile equally: the first one the
	// pod may hold stands for the class (GPUs in flight are in no class).
	for _, ck := range p.order {
		c := p.classes[ck]
		if c == nil {
			continue
		}
		var g *gpuState
		c.members(func(m *gpuState) bool {
			if ok(m.node) && m.heldBy == "" {
				g = m
				return false
			}
			return true
		})
		if g == nil {
			continue
		}
		ps := profiles[g.kind]
		if len(ps) == 0 {
			continue
		}
		prof, err := g.model.Profile(ps[0])
		if err != nil || prof.ComputeSlices < largeComputeSlices || !g.node.allows(prof.Name) {
			continue
		}
		in := blockers{firm: -1}
		var inPl mig.Placement
		var inRoom []int
		for _, pl := range prof.Placements {
			dev := mig.Device{Profile: prof.Name, Start: pl.Start}
			if g.g.Tainted.Contains(dev) {
				continue // a device never made there
			}
			n := g.blockersOf(pl)
			// Among placements equally blocked, the one whose device
			// leaves the most room for large profiles on its own (a
			// 3g.40gb keeps the right half of an A100: only the left
			// takes a 4g.40gb).
			// (Computed on a tie only.)
			switch {
			case in.firm < 0 || n.less(in):
				in, inPl, inRoom = n, pl, nil
			case n == in:
				if inRoom == nil {
					inRoom = g.model.Headroom(mig.Layout{{Profile: prof.Name, Start: inPl.Start}})
				}
				if room := g.model.Headroom(mig.Layout{dev}); slices.Compare(room, inRoom) > 0 {
					inPl, inRoom = pl, room
				}
			}
		}
		if in.firm < 0 {
			continue
		}
		staying := g.staying()
		room := g.model.Headroom(staying)
		if best == nil || in.less(bestIn) || in == bestIn && holdTie(room, bestRoom, len(staying), bestAll, g.order, best.order) {
			best, bestPl, bestRoom, bestIn, bestAll = g, inPl, room, in, len(staying)
		}
	}
	if best != nil {
		best.heldBy, best.held = pod, bestPl
		p.reclass(best)
	}
	return best
}

// blockers counts the devices that must stay in the way of a placement:
// firm ones, and those whose claims end soon (GPU.Releasing).
type blockers struct{ firm, releasing int }

// less orders placements for hold: fewer devices staying in use first,
// then fewer releasing ones.
func (b blockers) less(o blockers) bool {
	if b.firm != o.firm {
		return b.firm < o.firm
	}
	return b.releasing < o.releasing
}

// blockersOf counts the devices that stay whatever the plan (staying) and
// overlap pl.
func (s *gpuState) blockersOf(pl mig.Placement) blockers {
	var n blockers
	for _, d := range s.staying() {
		if dp, err := s.model.Placement(d); err == nil && dp.Overlaps(pl) {
			if s.g.Releasing.Contains(d) {
				n.releasing++
			} else {
				n.firm++
			}
		}
	}
	return n
}

// holdTie breaks a tie between two GPUs a pod could hold: less room left by
// the devices that stay, then fewer such devices, then snapshot order.
func holdTie(room, bestRoom []int, n, bestN, order, bestOrder int) bool {
	if c := slices.Compare(room, bestRoom); c != 0 {
		return c < 0
	}
	if n != bestN {
		return n < bestN
	}
	return order < bestOrder
}

// freeLoss is the room for large profiles (mig.Model.Headroom, largest
// profile first) that reserving the free device d of g takes from the
// devices that stay; see addition.loss.
func (p *planner) freeLoss(g *gpuState, d mig.Device) []int {
	staying := g.staying()
	return headroomLoss(g.model, staying, append(slices.Clone(staying), d))
}

// classFreeLoss is freeLoss memoised on the class.
func (p *planner) classFreeLoss(c *class, g *gpuState, d mig.Device) []int {
	if l, ok := c.freeLoss[d]; ok {
		return l
	}
	if c.freeLoss == nil {
		c.freeLoss = map[mig.Device][]int{}
	}
	l := p.freeLoss(g, d)
	c.freeLoss[d] = l
	return l
}

// anyAllowed reports whether some node of nodes has a GPU one of whose
// satisfying profiles (by kind of GPU) its policy allows creating. It walks
// each node's kinds of GPU once (GPUs of a kind share their profiles). A
// node without a policy allows every profile its GPUs offer, and none its
// GPUs lack: an A30 node without a policy beside an A100 node allowing only
// 2g.20gb does not make a 1g.10gb claim one that waits for room.
func (p *planner) anyAllowed(nodes []*nodeState, profiles map[string][]string) bool {
	type policyKind struct{ policy, kind string }
	seen := map[policyKind]bool{}
	offers := func(k string) bool { return len(profiles[k]) > 0 }
	for _, n := range nodes {
		if n.allowed == nil {
			if slices.ContainsFunc(n.gpuKinds, offers) {
				return true
			}
			continue
		}
		for _, k := range n.gpuKinds {
			pk := policyKind{n.policyKey, k}
			if seen[pk] {
				continue
			}
			seen[pk] = true
			if slices.ContainsFunc(profiles[k], n.allows) {
				return true
			}
		}
	}
	return false
}
