package planner

import (
	"slices"
	"strconv"
	"strings"

	"github.com/miglayout/miglayout/pkg/mig"
)

// gpuState is a GPU during planning.
type gpuState struct {
	node  *nodeState
	order int // position in the snapshot, for determinism
	g     GPU
	model *mig.Model
	// layout is the planned layout (the current one until changed); fixed
	// are its devices that may not be destroyed: pinned, or reserved for a
	// pod served earlier in this plan.
	layout, fixed mig.Layout
	touched       bool
	serves        []string
	class         string
	// inFree marks the free-device lists this GPU is in.
	inFree map[string]bool
	// heldBy is the pending pod (of a large profile, that nothing can serve
	// now) this GPU is kept for: no other pod of the plan gets a device on
	// it, so that it drains as its devices in use end.
	heldBy string
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

func (s *gpuState) hasFree(profile string) (mig.Device, bool) {
	for _, d := range s.layout.Canonical() {
		if d.Profile == profile && !s.fixed.Contains(d) {
			return d, true
		}
	}
	return mig.Device{}, false
}

// classKey groups GPUs that are interchangeable for planning: same model,
// planned layout, fixed devices, touched flag and node policy.
func (s *gpuState) classKey() string {
	var b strings.Builder
	b.WriteString(s.model.Name)
	b.WriteByte('|')
	b.WriteString(s.layout.String())
	b.WriteByte('|')
	b.WriteString(s.fixed.String())
	b.WriteByte('|')
	b.WriteString(strconv.FormatBool(s.touched))
	b.WriteByte('|')
	b.WriteString(s.node.policyKey)
	return b.String()
}

type nodeState struct {
	n         *Node
	order     int
	gpus      []*gpuState
	touched   int
	policyKey string
	allowed   map[string]bool // nil: every profile
	maxGPUs   int
}

func (n *nodeState) allows(profile string) bool { return n.allowed == nil || n.allowed[profile] }

// class is a set of interchangeable GPUs, in snapshot order.
type class struct {
	key  string
	gpus []*gpuState
	head int
	// adds memoises the addition of one device per profile; nil entries
	// mean that no addition exists.
	adds map[string]*addition
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
		if g.class != c.key {
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

// addition is the cheapest way found to add one device of a profile to a
// class of GPUs.
type addition struct {
	layout    mig.Layout
	device    mig.Device
	destroyed int
	headroom  []int
	// loss is what the new device takes from the room for large profiles,
	// counted on the devices that stay (fixed) only: Headroom(fixed) minus
	// Headroom(fixed + the new device), largest profile first. Free devices
	// do not count: they can be destroyed for a later claim.
	loss []int
}

// additionKey memoises additions by what decides them.
type additionKey struct {
	model, layout, fixed, profile string
}

// add finds the layout that adds one device of profile p to layout while
// keeping every fixed device, destroying the fewest free devices, then
// leaving the most headroom. ok is false when no such layout exists.
func add(model *mig.Model, layout, fixed mig.Layout, p string) (addition, bool) {
	var free mig.Layout
	for _, d := range layout.Canonical() {
		if !fixed.Contains(d) {
			free = append(free, d)
		}
	}
	var best addition
	found := false
	// Drop free devices only when nothing fits otherwise, fewest first.
	for drop := 0; drop <= len(free) && !found; drop++ {
		forEachSubset(len(free), drop, func(idx []int) {
			dropped := mig.Layout{}
			for _, i := range idx {
				dropped = append(dropped, free[i])
			}
			want := map[string]int{p: 1}
			var current mig.Layout
			for _, d := range layout {
				if !dropped.Contains(d) {
					want[d.Profile]++
					current = append(current, d)
				}
			}
			res, err := model.Fit(mig.FitRequest{Want: want, Current: current, Pinned: fixed, AllowMoves: true})
			if err != nil {
				return
			}
			destroyed := len(layout) - len(res.Kept)
			// A device of the wanted profile that is created anew.
			var dev mig.Device
			for _, d := range res.Created {
				if d.Profile == p {
					dev = d
				}
			}
			cand := addition{layout: res.Layout, device: dev, destroyed: destroyed, headroom: model.Headroom(res.Layout),
				loss: headroomLoss(model, fixed, dev)}
			if !found || cand.destroyed < best.destroyed || cand.destroyed == best.destroyed && cand.betterPlaced(&best) {
				best, found = cand, true
			}
		})
	}
	return best, found
}

// betterPlaced: less loss of room for large profiles, then more room left.
func (a *addition) betterPlaced(b *addition) bool {
	if c := slices.Compare(a.loss, b.loss); c != 0 {
		return c < 0
	}
	return slices.Compare(a.headroom, b.headroom) > 0
}

// headroomLoss is Headroom(fixed) - Headroom(fixed + d), per profile.
func headroomLoss(m *mig.Model, fixed mig.Layout, d mig.Device) []int {
	before := m.Headroom(fixed)
	after := m.Headroom(append(slices.Clone(fixed), d))
	for i := range before {
		before[i] -= after[i]
	}
	return before
}

// forEachSubset calls fn with every k-subset of {0..n-1}, lexicographically.
func forEachSubset(n, k int, fn func([]int)) {
	idx := make([]int, k)
	var rec func(pos, from int)
	rec = func(pos, from int) {
		if pos == k {
			fn(idx)
			return
		}
		for i := from; i <= n-(k-pos); i++ {
			idx[pos] = i
			rec(pos+1, i+1)
		}
	}
	rec(0, 0)
}
