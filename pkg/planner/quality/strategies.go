package quality

import (
	"errors"
	"slices"

	"github.com/miglayout/miglayout/pkg/mig"
)

// room returns the layout of g with device d added, keeping every owned
// device and destroying the free devices that overlap d, then (if the
// compute or instance budget still does not allow d) further free devices
// from the highest placement down. ok is false when d overlaps an owned
// device or does not fit beside the owned devices.
func room(s *sim, g *simGPU, d mig.Device) (layout mig.Layout, destroyed int, ok bool) {
	pd, err := s.model.Placement(d)
	if err != nil {
		return nil, 0, false
	}
	owned := s.owned(g)
	for _, o := range owned {
		po, _ := s.model.Placement(o)
		if po.Overlaps(pd) {
			return nil, 0, false
		}
	}
	if s.model.Validate(append(slices.Clone(owned), d)) != nil {
		return nil, 0, false
	}
	var keep mig.Layout
	for _, f := range s.free(g) {
		pf, _ := s.model.Placement(f)
		if pf.Overlaps(pd) {
			destroyed++
			continue
		}
		keep = append(keep, f)
	}
	for {
		l := append(append(slices.Clone(owned), keep...), d)
		if s.model.Validate(l) == nil {
			return l.Canonical(), destroyed, true
		}
		// keep is canonical (by start): drop the last.
		keep = keep[:len(keep)-1]
		destroyed++
	}
}

// isFree reports whether d exists on g and is neither allocated nor reserved.
func isFree(g *simGPU, d mig.Device) bool {
	if !g.layout.Contains(d) {
		return false
	}
	_, owned := g.owner[d]
	return !owned
}

// firstFit is strategy (a), kube-scheduler with partitionable devices
// (DynamicMIG): for each pending claim in arrival order, a node where a
// device of its profile exists free or can be created without touching an
// allocated device, picked as kube-scheduler picks among nodes that score
// alike (schedulerNode), and on it the first (GPU, placement start) in
// device-name order where it can, destroying the free devices in the way.
type firstFit struct{}

func (firstFit) lock() bool     { return false }
func (firstFit) migrates() bool { return false }
func (firstFit) delay() bool    { return true }

func (firstFit) decide(s *sim) error {
	for _, id := range slices.Clone(s.pending) {
		p, _ := s.model.Profile(s.claims[id].profile)
		c, ok := pickNode(s, id, func(g *simGPU) (mig.Device, bool) {
			if !s.mayChange(g) {
				return mig.Device{}, false
			}
			for _, pl := range p.Placements {
				d := mig.Device{Profile: p.Name, Start: pl.Start}
				if isFree(g, d) {
					return d, true
				}
				if _, _, ok := room(s, g, d); ok {
					return d, true
				}
			}
			return mig.Device{}, false
		})
		if !ok {
			continue
		}
		if !isFree(c.g, c.d) {
			l, _, _ := room(s, c.g, c.d)
			if err := s.change(c.g.idx, l, false); err != nil {
				return err
			}
		}
		if err := s.assign(id, c.g.idx, c.d); err != nil {
			return err
		}
	}
	return nil
}

// bestFit is the greedy "keep the largest free range" rule in its
// cluster-wide form: for each pending claim, the placement that takes the
// least room for large profiles (the loss in mig.Model.Headroom of the
// allocated devices of the GPU it lands on, compared from the largest
// profile down), then the fewest destroyed, then device-name order. Free
// devices count as free room (they can be destroyed).
type bestFit struct{}

func (bestFit) lock() bool     { return false }
func (bestFit) migrates() bool { return false }
func (bestFit) delay() bool    { return true }

func (bestFit) decide(s *sim) error { return greedy(s, true) }

// largestRange is the same rule in its per-GPU form: the placement after
// which the GPU it lands on keeps the most room for large profiles
// (mig.Model.Headroom after, not its loss) — the tie-breaker pkg/planner
// uses among changes that destroy equally many devices.
type largestRange struct{}

func (largestRange) lock() bool     { return false }
func (largestRange) migrates() bool { return false }
func (largestRange) delay() bool    { return true }

func (largestRange) decide(s *sim) error { return greedy(s, false) }

// greedy places each pending claim by headroom: loss (cluster-wide) or
// after (per GPU).
func greedy(s *sim, loss bool) error {
	for _, id := range slices.Clone(s.pending) {
		p, _ := s.model.Profile(s.claims[id].profile)
		var (
			bestG     *simGPU
			bestD     mig.Device
			bestL     mig.Layout
			bestScore []int
			bestDestr int
			bestFree  bool
		)
		for _, g := range s.gpus {
			if !s.mayChange(g) {
				continue
			}
			owned := s.owned(g)
			before := s.model.Headroom(owned)
			for _, pl := range p.Placements {
				d := mig.Device{Profile: p.Name, Start: pl.Start}
				free := isFree(g, d)
				var l mig.Layout
				destr := 0
				if !free {
					var ok bool
					if l, destr, ok = room(s, g, d); !ok {
						continue
					}
				}
				after := s.model.Headroom(append(slices.Clone(owned), d))
				// score: higher is better.
				score := after
				if loss {
					score = make([]int, len(before))
					for i := range before {
						score[i] = after[i] - before[i]
					}
				}
				better := bestG == nil
				if !better {
					if c := slices.Compare(score, bestScore); c != 0 {
						better = c > 0
					} else {
						better = destr < bestDestr
					}
				}
				if better {
					bestG, bestD, bestL, bestScore, bestDestr, bestFree = g, d, l, score, destr, free
				}
			}
		}
		if bestG == nil {
			continue
		}
		if !bestFree {
			if err := s.change(bestG.idx, bestL, false); err != nil {
				return err
			}
		}
		if err := s.assign(id, bestG.idx, bestD); err != nil {
			return err
		}
	}
	return nil
}

// firstFreeDevice returns the first free device of profile p in
// device-name order, on any GPU.
func firstFreeDevice(s *sim, p string) (*simGPU, mig.Device, bool) {
	for _, g := range s.gpus {
		if d, ok := firstFreeOn(g, p); ok {
			return g, d, true
		}
	}
	return nil, mig.Device{}, false
}

// firstFreeOn returns the first free device of profile p on g in
// device-name order.
func firstFreeOn(g *simGPU, p string) (mig.Device, bool) {
	for _, d := range g.layout {
		if d.Profile == p && isFree(g, d) {
			return d, true
		}
	}
	return mig.Device{}, false
}

// nos is strategy (b), nos's MIG partitioner: pending claims take free
// devices of their profile (kube-scheduler's node choice, schedulerNode;
// the first such device there in device-name order); the rest is counted per profile cluster-wide,
// and GPU by GPU the allowed geometry (a profile multiset) providing the
// most of the missing profiles, among those that keep the used devices'
// counts, replaces every free device of the GPU. The geometry is chosen by
// counts alone; its devices are then created, largest first, each at its
// profile's first free placement, and those that do not fit are not
// created.
type nos struct {
	geoms []map[string]int
}

func (nos) lock() bool     { return true }
func (nos) migrates() bool { return false }
func (nos) delay() bool    { return true }

func (n nos) decide(s *sim) error {
	for _, id := range slices.Clone(s.pending) {
		prof := s.claims[id].profile
		if c, ok := pickNode(s, id, func(g *simGPU) (mig.Device, bool) { return firstFreeOn(g, prof) }); ok {
			if err := s.assign(id, c.g.idx, c.d); err != nil {
				return err
			}
		}
	}
	if len(s.pending) == 0 {
		return nil
	}
	demand := map[string]int{}
	for _, id := range s.pending {
		demand[s.claims[id].profile]++
	}
	for _, g := range s.gpus {
		if len(s.pending) == 0 {
			break
		}
		if !s.mayChange(g) {
			continue
		}
		used := ownedCounts(g)
		var best map[string]int
		bestN := 0
		for _, geom := range n.geoms {
			fits := true
			for p, u := range used {
				fits = fits && geom[p] >= u
			}
			if !fits {
				continue
			}
			provided := 0
			for p, want := range demand {
				provided += max(0, min(geom[p]-used[p], want))
			}
			if provided > bestN {
				best, bestN = geom, provided
			}
		}
		if best == nil {
			continue
		}
		l := s.owned(g)
		for _, name := range orderLargestFirst(s.model, best) {
			for range best[name] - used[name] {
				p, _ := s.model.Profile(name)
				for _, pl := range p.Placements {
					cand := append(slices.Clone(l), mig.Device{Profile: name, Start: pl.Start})
					if s.model.Validate(cand) == nil {
						l = cand
						break
					}
				}
			}
		}
		if err := s.change(g.idx, l, true); err != nil {
			return err
		}
		for _, id := range slices.Clone(s.pending) {
			prof := s.claims[id].profile
			for _, d := range g.layout {
				if d.Profile == prof && isFree(g, d) {
					if err := s.assign(id, g.idx, d); err != nil {
						return err
					}
					demand[prof]--
					break
				}
			}
		}
	}
	return nil
}

func orderLargestFirst(m *mig.Model, counts map[string]int) []string {
	var names []string
	for p, n := range counts {
		if n > 0 {
			names = append(names, p)
		}
	}
	slices.SortFunc(names, func(a, b string) int {
		pa, _ := m.Profile(a)
		pb, _ := m.Profile(b)
		if pa.ComputeSlices != pb.ComputeSlices {
			return pb.ComputeSlices - pa.ComputeSlices
		}
		if pa.MemorySlices != pb.MemorySlices {
			return pb.MemorySlices - pa.MemorySlices
		}
		if a < b {
			return -1
		}
		return 1
	})
	return names
}

// static is strategy (c) for one fixed layout per GPU: claims take free
// devices of their profile in device-name order; nothing is repartitioned.
type static struct{}

func (static) lock() bool     { return true }
func (static) migrates() bool { return false }
func (static) delay() bool    { return true }

func (static) decide(s *sim) error {
	// Free devices by profile, in device-name order, built once.
	var free map[string][]gpuDev
	for _, id := range slices.Clone(s.pending) {
		if free == nil {
			free = map[string][]gpuDev{}
			for _, g := range s.gpus {
				for _, d := range s.free(g) {
					free[d.Profile] = append(free[d.Profile], gpuDev{g.idx, d})
				}
			}
		}
		prof := s.claims[id].profile
		if l := free[prof]; len(l) > 0 {
			if err := s.assign(id, l[0].gpu, l[0].dev); err != nil {
				return err
			}
			free[prof] = l[1:]
		}
	}
	return nil
}

// migrate is strategy (d): running instances move freely. For each pending
// claim in arrival order: a free device of its profile; else the first GPU
// whose allocated devices plus the new one form a feasible multiset, its
// layout refitted with mig.Model.Fit (moves allowed, no pins); else a
// repack of every allocated device across GPUs (first-fit decreasing,
// preferring each device's current GPU). Changes are instant.
type migrate struct{}

func (migrate) lock() bool     { return false }
func (migrate) migrates() bool { return true }
func (migrate) delay() bool    { return false }

func (migrate) decide(s *sim) error {
	// Profiles that found no room this round: nothing frees up within a
	// decision, so later claims of them are skipped.
	failed := map[string]bool{}
	for _, id := range slices.Clone(s.pending) {
		prof := s.claims[id].profile
		if failed[prof] {
			continue
		}
		if g, d, ok := firstFreeDevice(s, prof); ok {
			if err := s.assign(id, g.idx, d); err != nil {
				return err
			}
			continue
		}
		// One GPU, refitted.
		done := false
		for _, g := range s.gpus {
			cnt := ownedCounts(g)
			cnt[prof]++
			if !s.feasible.ok(cnt) {
				continue
			}
			if err := refit(s, map[int][]int{g.idx: ownedClaims(g)}, id, g.idx); err != nil {
				return err
			}
			done = true
			break
		}
		if done {
			continue
		}
		// All GPUs, repacked.
		var items []string
		var ids, pref []int
		for _, g := range s.gpus {
			for _, cid := range ownedClaims(g) {
				items = append(items, s.claims[cid].profile)
				ids = append(ids, cid)
				pref = append(pref, g.idx)
			}
		}
		items = append(items, prof)
		ids = append(ids, id)
		pref = append(pref, -1)
		bins, ok := s.feasible.pack(items, len(s.gpus), pref)
		if !ok {
			failed[prof] = true
			continue
		}
		byGPU := map[int][]int{}
		newGPU := -1
		for i, cid := range ids {
			if cid == id {
				newGPU = bins[i]
				continue
			}
			byGPU[bins[i]] = append(byGPU[bins[i]], cid)
		}
		for _, g := range s.gpus {
			if _, ok := byGPU[g.idx]; !ok {
				byGPU[g.idx] = nil
			}
		}
		if err := refit(s, byGPU, id, newGPU); err != nil {
			return err
		}
	}
	return nil
}

func ownedClaims(g *simGPU) []int {
	var out []int
	for _, d := range g.layout {
		if id, ok := g.owner[d]; ok {
			out = append(out, id)
		}
	}
	return out
}

// refit gives each GPU in byGPU a layout holding exactly its claims (plus
// the new claim on newGPU), fitted with the fewest destroyed devices, moves
// allowed and nothing pinned; claims keep their device where Fit keeps it.
func refit(s *sim, byGPU map[int][]int, newID, newGPU int) error {
	layouts := map[int]mig.Layout{}
	where := map[int]gpuDev{}
	for gi, ids := range byGPU {
		g := s.gpus[gi]
		want := map[string]int{}
		for _, id := range ids {
			want[s.claims[id].profile]++
		}
		if gi == newGPU {
			want[s.claims[newID].profile]++
		}
		res, err := s.model.Fit(mig.FitRequest{Want: want, Current: g.layout, AllowMoves: true})
		if err != nil {
			return err
		}
		layouts[gi] = res.Layout
		taken := map[mig.Device]bool{}
		var movers []int
		for _, id := range ids {
			c := s.claims[id]
			if c.gpu == gi && res.Layout.Contains(c.dev) && !taken[c.dev] {
				taken[c.dev] = true
				continue
			}
			movers = append(movers, id)
		}
		for _, id := range movers {
			for _, d := range res.Layout {
				if d.Profile == s.claims[id].profile && !taken[d] {
					taken[d] = true
					where[id] = gpuDev{gi, d}
					break
				}
			}
		}
	}
	if err := s.repack(layouts, where); err != nil {
		return err
	}
	g := s.gpus[newGPU]
	for _, d := range g.layout {
		if d.Profile == s.claims[newID].profile && isFree(g, d) {
			return s.assign(newID, newGPU, d)
		}
	}
	return errNoDevice
}

var errNoDevice = errors.New("refit left no free device for the new claim")
