package planner

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/miglayout/miglayout/pkg/mig"
)

// gpuState is a GPU during planning.
type gpuState struct {
	node  *nodeState
	order int // position in the snapshot, for determinism
	// infoKeys memoises relevantInfo of the GPU by infoFlags.bits.
	infoKeys map[int]string
	g        GPU
	model    *mig.Model
	// kind is gpuKind of the GPU: what claims judged on a stand-in see;
	// kindInfo has it with the stand-in.
	kind     string
	kindInfo gpuKindInfo
	// layout is the planned layout (the current one until changed); fixed
	// are its devices that may not be destroyed: pinned, or reserved for a
	// pod served earlier in this plan. Of those, soft maps the reserved
	// devices that do not exist yet (created by this plan) to their pods:
	// a later addition may still move them, since nothing is there yet.
	layout, fixed mig.Layout
	soft          map[mig.Device]string
	// shared are devices of the planned layout given to a pod with admin
	// access: they must stay (never destroyed nor moved) but are not used
	// up, since the scheduler counts no admin-access allocation as in use;
	// another pod may still get them.
	shared  mig.Layout
	touched bool
	serves  []string // pods this plan's change of the GPU serves
	spares  []string // profiles of the spare devices it creates
	// class is the GPU's class key (classKey when reclass ran), cls the
	// class of that key it was listed in then.
	class string
	cls   *class
	// inFree marks the free-device lists this GPU is in.
	inFree map[string]bool
	// heldBy is the pending pod (of a large profile, that nothing can serve
	// now) this GPU is kept for, and held the placement (memory slices) it
	// waits for: no pod planned after it gets a device overlapping held, so
	// that the placement drains as the devices in use there end. Devices
	// outside held stay usable.
	heldBy string
	held   mig.Placement
	// reclaimed: this plan gives the idle GPU back whole (reclaimIdle).
	reclaimed bool
}

// blocks reports whether d overlaps the placement this GPU is kept for.
func (s *gpuState) blocks(d mig.Device) bool {
	if s.heldBy == "" {
		return false
	}
	pl, err := s.model.Placement(d)
	return err != nil || pl.Overlaps(s.held)
}

// avoid returns the placements an addition on this GPU must leave alone.
func (s *gpuState) avoid() []mig.Placement {
	if s.heldBy == "" {
		return nil
	}
	return []mig.Placement{s.held}
}

// free returns the devices of the planned layout that are neither pinned
// nor reserved.
func (s *gpuState) free() mig.Layout {
	var out mig.Layout
	for _, d := range s.layout {
		if !s.fixed.Contains(d) {
			out = append(out, d)
		}
	}
	return out
}

// offered reports whether free device d of the GPU is one kube-scheduler
// may give a pod now that the plan may count on: of a profile of the GPU's
// model, outside the placement the GPU is kept for, not named by a
// DeviceTaintRule, not shared by a pod with admin access.
func (s *gpuState) offered(d mig.Device) bool {
	return s.catalogued(d) && !s.blocks(d) && !s.g.Tainted.Contains(d) && !s.shared.Contains(d)
}

// catalogued reports whether d is of a profile of the GPU's model: a GPU
// instance of a profile the catalog lacks (made out of band, listed by the
// agent) is never planned for a pod, only destroyed where a change needs
// its memory slices.
func (s *gpuState) catalogued(d mig.Device) bool {
	_, err := s.model.Profile(d.Profile)
	return err == nil
}

// softLayout returns the reserved devices that do not exist yet.
func (s *gpuState) softLayout() mig.Layout {
	out := make(mig.Layout, 0, len(s.soft))
	for d := range s.soft {
		out = append(out, d)
	}
	return out.Canonical()
}

// hard returns the fixed devices that exist or are pinned, and the shared
// ones: never moved.
func (s *gpuState) hard() mig.Layout {
	var out mig.Layout
	for _, d := range s.fixed {
		if _, ok := s.soft[d]; !ok {
			out = append(out, d)
		}
	}
	for _, d := range s.shared {
		if !out.Contains(d) {
			out = append(out, d)
		}
	}
	return out
}

// staying returns the devices that stay whatever the plan: the fixed ones
// and the shared ones.
func (s *gpuState) staying() mig.Layout {
	out := slices.Clone(s.fixed)
	for _, d := range s.shared {
		if !out.Contains(d) {
			out = append(out, d)
		}
	}
	return out
}

func (s *gpuState) hasFree(profile string) (mig.Device, bool) {
	for _, d := range s.layout.Canonical() {
		if d.Profile == profile && !s.fixed.Contains(d) {
			return d, true
		}
	}
	return mig.Device{}, false
}

// classKey groups GPUs that are interchangeable for planning: same kind
// (model and the attributes its GPUs publish alike), planned layout, fixed
// devices, touched flag, node policy and kept placement.
func (s *gpuState) classKey() string {
	var b strings.Builder
	b.WriteString(s.kind)
	b.WriteByte('|')
	b.WriteString(s.layout.String())
	b.WriteByte('|')
	b.WriteString(s.fixed.String())
	b.WriteByte('|')
	b.WriteString(s.softLayout().String())
	b.WriteByte('|')
	b.WriteString(s.shared.String())
	b.WriteByte('|')
	b.WriteString(s.g.Layout.String())
	b.WriteByte('|')
	b.WriteString(s.g.Tainted.String())
	b.WriteByte('|')
	b.WriteString(s.g.Releasing.String())
	b.WriteByte('|')
	b.WriteString(strconv.FormatBool(s.touched))
	b.WriteByte('|')
	b.WriteString(s.node.policyKey)
	if s.heldBy != "" {
		// Kept GPUs offer only what lies outside the kept placement.
		b.WriteString("|held:")
		b.WriteString(strconv.Itoa(s.held.Start))
		b.WriteByte('+')
		b.WriteString(strconv.Itoa(s.held.Size))
	}
	return b.String()
}

type nodeState struct {
	n     *Node
	order int
	// room is what the node has left of its allocatable resources for
	// pending pods, the pods planned there counted (Room).
	room Room
	// mark is the planner's podMark while the node is one the pod being
	// planned may run on (serveSingle): a set without a map per pod.
	mark      uint64
	gpus      []*gpuState
	touched   int
	policyKey string
	allowed   map[string]bool // nil: every profile
	maxGPUs   int
	// group counts the GPUs changed across the node's Policy.Group; nil
	// when the group has no limit.
	group *groupCount
	// kind numbers fitsWhenFree's kind of the node (policy and GPUs),
	// made once: 0 until then.
	kind int
	// gpuKinds are the distinct kinds of its GPUs (gpuState.kind).
	gpuKinds []string
	// servedHere counts the pods this plan serves on the node; allOwner
	// is the one of them with a request for every matching device
	// (allocation mode All), if any. Such a pod shares the node with no
	// other pod of the plan: the scheduler gives it every device of the
	// node its request matches, a device planned for another pod
	// included, and fails it while one of them is allocated, whichever
	// of the two pods it takes first.
	servedHere int
	allOwner   string
	// planned are the pods (keys) this plan serves on the node, for
	// nodeAgrees.
	planned []string
	// waiting are the pods this plan leaves waiting that kube-scheduler
	// may still allocate on the node, ahead of pods the plan serves there
	// (nodeAgrees replays them; newWaiter).
	waiting []waiter
}

// opensTo reports whether the plan may serve pod on the node: not one that
// serves an All-mode pod already, and for an All-mode pod not one that
// serves another pod already. A pod whose every request has admin access
// (adminOnly) goes anywhere: it uses no device up.
func (n *nodeState) opensTo(pod Pod) bool {
	return adminOnly(pod) || n.opensToAll(asksAll(pod))
}

// opensToAll is opensTo for a pod that asks for every matching device
// (all) or not.
func (n *nodeState) opensToAll(all bool) bool {
	if n.allOwner != "" {
		return false
	}
	return n.servedHere == 0 || !all
}

// served counts pod as served on the node; it reports whether the pod
// asks for every matching device, so that the node is now its alone. A pod
// whose every request has admin access (adminOnly) is not counted: the
// scheduler's allocator counts admin-access devices as held by no one, so
// an All-mode pod is allocated beside it, in either order.
func (n *nodeState) served(pod Pod) bool {
	if adminOnly(pod) {
		return false
	}
	n.servedHere++
	if asksAll(pod) {
		n.allOwner = podKey(pod.Pod)
		return true
	}
	return false
}

// stateKey is what planning a pod on the node depends on, other drivers'
// devices and per-GPU attributes aside: its policy, how many more GPUs it
// (and its group) may change, and each GPU's class (or, while a change is
// in flight, its planned and fixed devices), in order. Two nodes with one
// stateKey serve the same pods, with devices of the same names.
func (n *nodeState) stateKey() string {
	var b strings.Builder
	b.WriteString(n.policyKey)
	fmt.Fprintf(&b, "|%d/%d", n.touched, n.maxGPUs)
	if n.group != nil {
		fmt.Fprintf(&b, "|g%d/%d", n.group.touched, n.group.max)
	}
	for _, w := range n.waiting {
		fmt.Fprintf(&b, "|w%s", podKey(w.pod.Pod))
	}
	for _, g := range n.gpus {
		b.WriteString("\x00")
		if g.g.Changing {
			fmt.Fprintf(&b, "changing %s|%s|%s|%s|%s|%t", g.kind, g.layout, g.fixed, g.softLayout(), g.shared, g.g.Retrying)
			continue
		}
		// Its class key as reclass stored it: every change to a GPU
		// not Changing reclasses it (the planner's tests check that
		// it is current: verifyClassKeys), and building the keys anew
		// for each node each pod of several devices passes is what
		// planning such pods spent most of its time on.
		if verifyClassKeys {
			if k := g.classKey(); k != g.class {
				panic(fmt.Sprintf("planner: GPU %d of node %s keyed %q, its state is %q", g.g.Info.Index, n.n.Node.Name, g.class, k))
			}
		}
		b.WriteString(g.class)
	}
	return b.String()
}

// verifyClassKeys makes stateKey check each GPU's stored class key against
// its state (tests only).
var verifyClassKeys = false

// groupCount is the GPUs changed (touched) across a Policy.Group, and its
// limit (Snapshot.GroupMaxGPUs).
type groupCount struct{ touched, max int }

// touch counts one more GPU changed on n.
func (n *nodeState) touch() {
	n.touched++
	if n.group != nil {
		n.group.touched++
	}
}

func (n *nodeState) allows(profile string) bool { return n.allowed == nil || n.allowed[profile] }

// class is a set of interchangeable GPUs, in snapshot order.
type class struct {
	key  string
	gpus []*gpuState
	head int
	// changeHead is where changeable starts: the GPUs before it are no
	// longer in the class or may never change again in this plan.
	changeHead int
	// adds memoises the addition of one device per profile; nil entries
	// mean that no addition exists.
	adds map[string]*addition
	// freeLoss memoises planner.freeLoss per free device of the class.
	freeLoss map[mig.Device][]int
	// headroom memoises the Headroom of the class's layout.
	headroom []int
}

// headroomOf is the Headroom of the layout of g, a GPU of the class.
func (c *class) headroomOf(g *gpuState) []int {
	if c.headroom == nil {
		c.headroom = g.model.Headroom(g.layout)
	}
	return c.headroom
}

// empty reports whether no GPU is left in the class.
func (c *class) empty() bool {
	c.members(func(*gpuState) bool { return false })
	return c.head >= len(c.gpus)
}

// freeList holds the GPUs that have (or had) a free device of one profile,
// in the order they got it; entries are checked when read.
type freeList struct {
	gpus []*gpuState
	head int
}

// members returns the GPUs still in the class.
func (c *class) members(yield func(*gpuState) bool) {
	for i := c.head; i < len(c.gpus); i++ {
		g := c.gpus[i]
		if g.cls != c { // moved to another class since
			if i == c.head {
				c.head++
			}
			continue
		}
		if !yield(g) {
			return
		}
	}
}

// changeable is members without the GPUs that may never change again in
// this plan (stuck): those are passed over for good, so that a plan whose
// nodes have mostly changed all the GPUs they may (Policy.MaxGPUsPerNode)
// does not walk past them for every pod. Outside a try on a node
// (tryNode, which puts back what it changed) the counts of GPUs changed
// only grow, so a GPU stuck once stays so.
func (c *class) changeable(stuck func(*gpuState) bool, yield func(*gpuState) bool) {
	c.changeHead = max(c.changeHead, c.head)
	for i := c.changeHead; i < len(c.gpus); i++ {
		g := c.gpus[i]
		if g.cls != c || stuck(g) {
			if i == c.changeHead {
				c.changeHead++
			}
			continue
		}
		if !yield(g) {
			return
		}
	}
}

// addition is the cheapest way found to add one device of a profile to a
// class of GPUs.
type addition struct {
	layout mig.Layout
	device mig.Device
	// moved maps each reserved device that does not exist yet (soft) to
	// where it goes in layout (itself when it stays).
	moved     map[mig.Device]mig.Device
	destroyed int
	headroom  []int
	// loss is what the new device takes from the room for large profiles,
	// counted on the devices that stay (fixed) only: Headroom(fixed before)
	// minus Headroom(fixed after, the new device included), largest profile
	// first. Free devices do not count: they can be destroyed for a later
	// claim.
	loss []int
}

// additionKey memoises additions by what decides them.
type additionKey struct {
	model, orig, layout, fixed, soft, shared, tainted, profile string
	// avoid is the placement kept for a waiting pod (zero: none).
	avoid mig.Placement
	// keepFree: no free device may be destroyed.
	keepFree bool
}

// add finds the layout that adds one device of profile p to layout while
// keeping every hard device (pinned, or reserved and existing) where it is
// and every soft one (reserved, created by this plan) somewhere, losing the
// least room for large profiles (addition.loss), then destroying the fewest
// devices of orig (the GPU's real layout) that layout still has, then
// leaving the most room.
// With keepFree no free device of layout is dropped. Neither the new device
// nor a soft one lands in an avoid placement. ok is false when no such
// layout exists.
func add(model *mig.Model, orig, layout, hard, soft mig.Layout, p string, avoid []mig.Placement, forbid mig.Layout, keepFree bool) (addition, bool) {
	var free mig.Layout
	for _, d := range layout.Canonical() {
		if !hard.Contains(d) && !soft.Contains(d) {
			free = append(free, d)
		}
	}
	fixedBefore := append(slices.Clone(hard), soft...)
	var best addition
	found := false
	maxDrop := len(free)
	if keepFree {
		maxDrop = 0
	}
	for drop := 0; drop <= maxDrop; drop++ {
		mig.ForEachSubset(len(free), drop, func(idx []int) {
			dropped := mig.Layout{}
			for _, i := range idx {
				dropped = append(dropped, free[i])
			}
			// Soft devices count in the wanted multiset but not as current
			// devices: Fit places them afresh with the new one.
			want := map[string]int{p: 1}
			var current mig.Layout
			for _, d := range layout {
				if !dropped.Contains(d) {
					want[d.Profile]++
					if !soft.Contains(d) {
						current = append(current, d)
					}
				}
			}
			res, err := model.Fit(mig.FitRequest{Want: want, Current: current, Pinned: hard, AllowMoves: true, Avoid: avoid, Forbid: forbid})
			if err != nil {
				return
			}
			// Devices of orig this addition destroys: those an earlier
			// addition of the plan destroyed already are not counted
			// again, so a GPU the plan changes anyway is not penalised.
			destroyed := 0
			for _, d := range orig {
				if layout.Contains(d) && !res.Layout.Contains(d) {
					destroyed++
				}
			}
			moved, dev := placeReserved(res.Layout, hard, soft, orig, p)
			fixedAfter := append(slices.Clone(hard), dev)
			for _, nd := range moved {
				fixedAfter = append(fixedAfter, nd)
			}
			cand := addition{layout: res.Layout, device: dev, moved: moved, destroyed: destroyed,
				headroom: model.Headroom(res.Layout), loss: headroomLoss(model, fixedBefore, fixedAfter)}
			if !found || cand.betterThan(&best) {
				best, found = cand, true
			}
		})
	}
	return best, found
}

// placeReserved decides, in a new layout, which devices hold the soft
// reservations and which is the new device of profile p: per profile, soft
// devices that kept their place stay, then the devices the plan creates
// (not in orig) are taken, in placement order.
func placeReserved(layout, hard, soft, orig mig.Layout, p string) (map[mig.Device]mig.Device, mig.Device) {
	moved := map[mig.Device]mig.Device{}
	taken := map[mig.Device]bool{}
	var waiting mig.Layout
	for _, d := range soft.Canonical() {
		if layout.Contains(d) {
			moved[d], taken[d] = d, true
		} else {
			waiting = append(waiting, d)
		}
	}
	pick := func(profile string) (mig.Device, bool) {
		var fallback *mig.Device
		for _, d := range layout.Canonical() {
			if d.Profile != profile || taken[d] || hard.Contains(d) {
				continue
			}
			if !orig.Contains(d) {
				taken[d] = true
				return d, true
			}
			if fallback == nil {
				fallback = &d
			}
		}
		if fallback != nil {
			taken[*fallback] = true
			return *fallback, true
		}
		return mig.Device{}, false
	}
	for _, d := range waiting {
		if nd, ok := pick(d.Profile); ok {
			moved[d] = nd
		}
	}
	dev, _ := pick(p)
	return moved, dev
}

// betterThan: less loss of room for large profiles, then fewer devices
// destroyed, then more room left.
func (a *addition) betterThan(b *addition) bool {
	if c := slices.Compare(a.loss, b.loss); c != 0 {
		return c < 0
	}
	if a.destroyed != b.destroyed {
		return a.destroyed < b.destroyed
	}
	return slices.Compare(a.headroom, b.headroom) > 0
}

// headroomLoss is Headroom(before) - Headroom(after), per profile.
func headroomLoss(m *mig.Model, before, after mig.Layout) []int {
	b, a := m.Headroom(before), m.Headroom(after)
	for i := range b {
		b[i] -= a[i]
	}
	return b
}
