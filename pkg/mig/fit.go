package mig

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
)

// FitRequest asks for a layout that holds exactly the multiset Want on one GPU.
type FitRequest struct {
	// Want maps profile name to instance count; it is the whole multiset of
	// the resulting layout. Counts of 0 are ignored; negative counts are an error.
	Want map[string]int
	// Current is the GPU's layout now. It must be valid on the model.
	Current Layout
	// Pinned are devices of Current that must stay where they are (allocated
	// to a claim, prepared, or running a process). They count towards Want.
	Pinned Layout
	// AllowMoves lets Fit destroy a current device whose profile is still
	// wanted and create it again elsewhere (a "move"). Without it, every such
	// device stays where it is, and Fit fails when that leaves no room.
	AllowMoves bool
	// Avoid are placements (memory slices) that no device Fit places may
	// overlap; current devices kept where they are may lie there. The
	// planner uses it for the placement a GPU is kept in for a waiting
	// large claim. Nil avoids nothing.
	Avoid []Placement
	// Forbid are devices (profile at placement) Fit may not create: a
	// current one may stay, none is placed afresh. The planner uses it for
	// devices a DeviceTaintRule names before they exist, which the
	// scheduler would give no pod. Nil forbids nothing.
	Forbid Layout
}

// FitResult is the layout Fit chose and how it differs from Current.
type FitResult struct {
	// Layout is the chosen layout, canonical order.
	Layout Layout
	// Kept, Destroyed and Created are the Diff from Current to Layout.
	Kept, Destroyed, Created Layout
	// Moves counts the destroys Want does not force: of the destroyed
	// devices, those beyond the ones Want leaves no room for by count
	// (Want holds fewer of their profile than Current's unpinned devices),
	// i.e. devices moved to another placement.
	Moves int
}

// Fit places the multiset req.Want onto a GPU of model m. Among the layouts
// that hold exactly Want, keep every pinned device, and keep unpinned current
// devices in place unless moves are allowed, it returns one that:
//  1. destroys the fewest current devices (so the fewest moves);
//  2. then leaves the most room for large profiles: for each profile from the
//     largest down, the number of placements where one more instance could
//     still be created (compared lexicographically). This is the placement-
//     aware form of "largest contiguous free range": a free range only helps
//     if a profile's valid placement fits in it;
//  3. then puts larger profiles at lower placements (deterministic).
//
// Errors wrap ErrUnknownProfile, ErrInvalidLayout (Current or Pinned bad) or
// ErrDoesNotFit, whose message says why (compute slices, instance counts, a
// pinned device outside Want, or no placement without moves).
func (m *Model) Fit(req FitRequest) (FitResult, error) {
	want, err := m.checkWant(req.Want)
	if err != nil {
		return FitResult{}, err
	}
	if err := m.Validate(req.Current); err != nil {
		return FitResult{}, fmt.Errorf("checking current layout: %w", err)
	}
	pinned := req.Pinned.Canonical()
	pinnedCount := map[string]int{}
	for _, d := range pinned {
		if !req.Current.Contains(d) {
			return FitResult{}, fmt.Errorf("%w: pinned device %s is not in the current layout %q", ErrInvalidLayout, d, req.Current.String())
		}
		pinnedCount[d.Profile]++
		if pinnedCount[d.Profile] > want[d.Profile] {
			return FitResult{}, fmt.Errorf("%w on %s: %s must stay (in use) but the wanted layout has %d of %s", ErrDoesNotFit, m.Name, d, want[d.Profile], d.Profile)
		}
	}
	// Unpinned current devices of a wanted profile are the candidates to keep;
	// the others go whatever happens.
	var free, cands Layout
	for _, d := range req.Current.Canonical() {
		if pinned.Contains(d) {
			continue
		}
		free = append(free, d)
		if want[d.Profile] > 0 {
			cands = append(cands, d)
		}
	}
	// keepMax is how many candidates of each profile can stay; maxKeep the
	// most candidates that can stay at once.
	keepMax, candCount := map[string]int{}, cands.Counts()
	maxKeep := 0
	for p, n := range candCount {
		keepMax[p] = want[p] - pinnedCount[p]
		maxKeep += min(n, keepMax[p])
	}
	forced := len(free) - maxKeep // destroys that Want forces

	s := &fitSearch{m: m, want: want, forbid: req.Forbid}
	for _, pl := range req.Avoid {
		s.avoid |= placementMask(pl)
	}
	var best Layout
	found := false
	keptCount := -1
	// Try keep sets from the largest down: fewest destroyed devices first.
	for keep := maxKeep; keep >= 0 && !found; keep-- {
		if !req.AllowMoves && keep < maxKeep {
			break
		}
		ForEachSubset(len(cands), keep, func(idx []int) {
			kept := slices.Clone(pinned)
			n := map[string]int{}
			for _, i := range idx {
				d := cands[i]
				if n[d.Profile]++; n[d.Profile] > keepMax[d.Profile] {
					return
				}
				kept = append(kept, d)
			}
			if l, ok := s.complete(kept); ok && (!found || s.better(l, best)) {
				best, found = l, true
			}
		})
		keptCount = keep
	}
	if !found {
		why := "no arrangement of placements holds it"
		if len(req.Forbid) > 0 {
			why = fmt.Sprintf("no arrangement holds it without creating a device it may not (%s)", req.Forbid.String())
		} else if len(req.Avoid) > 0 {
			why = fmt.Sprintf("no arrangement holds it outside the placements kept free (%s)", placementList(req.Avoid))
			if len(pinned) > 0 {
				why += fmt.Sprintf(" around the devices in use %q", pinned.String())
			}
		} else if !req.AllowMoves && len(free) > 0 {
			why = fmt.Sprintf("no arrangement holds it around %q without moving a device", req.Current.String())
		} else if len(pinned) > 0 {
			why = fmt.Sprintf("no arrangement holds it around the devices in use %q", pinned.String())
		}
		return FitResult{}, fmt.Errorf("%w on %s: %s: %s", ErrDoesNotFit, m.Name, formatWant(want), why)
	}
	plan := m.Diff(req.Current, best)
	return FitResult{Layout: best, Kept: plan.Keep, Destroyed: plan.Destroy, Created: plan.Create, Moves: len(free) - keptCount - forced}, nil
}

// checkWant validates the profile names and counts of want and the budgets a
// GPU imposes regardless of placement.
func (m *Model) checkWant(w map[string]int) (map[string]int, error) {
	out := map[string]int{}
	compute, instances := 0, 0
	var engines mediaEngines
	for _, name := range slices.Sorted(maps.Keys(w)) {
		n := w[name]
		if n < 0 {
			return nil, fmt.Errorf("%w: count %d for %s is negative", ErrInvalidLayout, n, name)
		}
		if n == 0 {
			continue
		}
		p, err := m.Profile(name)
		if err != nil {
			return nil, err
		}
		if n > p.MaxCount {
			return nil, fmt.Errorf("%w on %s: %s: %d instances of %s, at most %d fit", ErrDoesNotFit, m.Name, formatWant(w), n, name, p.MaxCount)
		}
		out[name] = n
		compute += n * p.ComputeSlices
		instances += n
		for range n {
			engines = engines.plus(p)
		}
	}
	if compute > m.ComputeSlices {
		return nil, fmt.Errorf("%w on %s: %s needs %d compute slices, the GPU has %d", ErrDoesNotFit, m.Name, formatWant(w), compute, m.ComputeSlices)
	}
	if instances > m.MaxInstances {
		return nil, fmt.Errorf("%w on %s: %s is %d GPU instances, at most %d fit", ErrDoesNotFit, m.Name, formatWant(w), instances, m.MaxInstances)
	}
	if !m.enginesFit(engines) {
		return nil, fmt.Errorf("%w on %s: %s needs %d optical flow accelerators and %d JPEG decoders, the GPU has %d and %d (media-extension profiles share them)",
			ErrDoesNotFit, m.Name, formatWant(w), engines.ofa, engines.jpeg, m.engineTotals().ofa, m.engineTotals().jpeg)
	}
	return out, nil
}

// placementList renders placements as "slices 0-3, 4-7".
func placementList(pls []Placement) string {
	parts := make([]string, len(pls))
	for i, pl := range pls {
		parts[i] = "slices " + sliceRange(pl.Start, pl.End()-1)
	}
	return strings.Join(parts, ", ")
}

// formatWant renders a profile multiset as "{3g.40gb:1, 1g.10gb:2}" with
// larger profiles first.
func formatWant(w map[string]int) string {
	names := slices.Collect(maps.Keys(w))
	sort.Slice(names, func(i, j int) bool { return profileLess(names[j], names[i]) })
	parts := make([]string, 0, len(names))
	for _, n := range names {
		if w[n] != 0 {
			parts = append(parts, fmt.Sprintf("%s:%d", n, w[n]))
		}
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

// profileLess orders profile names by compute slices, then memory, then name.
func profileLess(a, b string) bool {
	pa, errA := ParseProfileName(a)
	pb, errB := ParseProfileName(b)
	if errA != nil || errB != nil {
		return a < b
	}
	if pa.ComputeSlices != pb.ComputeSlices {
		return pa.ComputeSlices < pb.ComputeSlices
	}
	if pa.MemoryGB != pb.MemoryGB {
		return pa.MemoryGB < pb.MemoryGB
	}
	return a < b
}

// ForEachSubset calls fn with every k-subset of {0..n-1}, in lexicographic
// order, as ascending indexes; fn must not keep the slice. It does nothing
// when k is outside 0..n.
func ForEachSubset(n, k int, fn func([]int)) {
	if k < 0 || k > n {
		return
	}
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

type fitSearch struct {
	m    *Model
	want map[string]int
	// avoid masks the memory slices no placed device may overlap.
	avoid uint64
	// forbid are devices never placed (FitRequest.Forbid).
	forbid Layout
}

// complete places what kept lacks of the wanted multiset, and returns the best
// completed layout by s.better.
func (s *fitSearch) complete(kept Layout) (Layout, bool) {
	if s.m.Validate(kept) != nil {
		return nil, false
	}
	have := kept.Counts()
	var todo []*Profile // largest first, so dead ends show early
	for _, name := range slices.Sorted(maps.Keys(s.want)) {
		p, _ := s.m.Profile(name)
		for i := have[name]; i < s.want[name]; i++ {
			todo = append(todo, p)
		}
	}
	sort.SliceStable(todo, func(i, j int) bool {
		if todo[i].MemorySlices != todo[j].MemorySlices {
			return todo[i].MemorySlices > todo[j].MemorySlices
		}
		return todo[i].ComputeSlices > todo[j].ComputeSlices
	})
	occ := s.avoid
	for _, d := range kept {
		pl, _ := s.m.Placement(d)
		occ |= placementMask(pl)
	}
	var best Layout
	found := false
	cur := slices.Clone(kept)
	var rec func(i, minStart int)
	rec = func(i, minStart int) {
		if i == len(todo) {
			if !found || s.better(cur, best) {
				best, found = append(Layout{}, cur.Canonical()...), true
			}
			return
		}
		p := todo[i]
		for _, pl := range p.Placements {
			// Same profile as the previous item: place in ascending start
			// order so that permutations are not searched twice.
			if i > 0 && todo[i-1] == p && pl.Start <= minStart {
				continue
			}
			mask := placementMask(pl)
			if occ&mask != 0 {
				continue
			}
			d := Device{Profile: p.Name, Start: pl.Start}
			if len(s.forbid) > 0 && s.forbid.Contains(d) {
				continue
			}
			occ |= mask
			cur = append(cur, d)
			rec(i+1, pl.Start)
			cur = cur[:len(cur)-1]
			occ &^= mask
		}
	}
	rec(0, -1)
	return best, found
}

// better reports whether layout a is preferred over b among layouts that
// destroy equally many devices: more room for large profiles, then larger
// profiles at lower placements.
func (s *fitSearch) better(a, b Layout) bool {
	ra, rb := s.m.Headroom(a), s.m.Headroom(b)
	if c := slices.Compare(ra, rb); c != 0 {
		return c > 0
	}
	// Larger profiles at lower placements, as nvidia-smi and mig-parted lay
	// GPUs out, then the canonical text.
	ca, cb := a.Canonical(), b.Canonical()
	for i := range min(len(ca), len(cb)) {
		if ca[i].Start != cb[i].Start {
			return ca[i].Start < cb[i].Start
		}
		if ca[i].Profile != cb[i].Profile {
			return profileLess(cb[i].Profile, ca[i].Profile)
		}
	}
	return len(ca) < len(cb)
}

// Headroom returns, for each profile of the model from the largest (most
// compute slices, then most memory) to the smallest, the number of placements
// at which one more instance of it could be created on layout l. Comparing
// two vectors lexicographically tells which layout keeps more room for large
// profiles. l must be valid.
func (m *Model) Headroom(l Layout) []int {
	var occ uint64
	compute := 0
	var engines mediaEngines
	order := m.profilesLargestFirst()
	counts := make([]int, len(order)) // instances by profile, in order
	for _, d := range l {
		p, err := m.Profile(d.Profile)
		if err != nil {
			continue
		}
		occ |= placementMask(Placement{Start: d.Start, Size: p.MemorySlices})
		compute += p.ComputeSlices
		engines = engines.plus(p)
		if i := slices.IndexFunc(order, func(q *Profile) bool { return q.Name == p.Name }); i >= 0 {
			counts[i]++
		}
	}
	out := make([]int, len(order))
	if len(l) >= m.MaxInstances {
		return out
	}
	for i, p := range order {
		if counts[i] >= p.MaxCount || compute+p.ComputeSlices > m.ComputeSlices || !m.enginesFit(engines.plus(p)) {
			continue
		}
		for _, pl := range p.Placements {
			if occ&placementMask(pl) == 0 {
				out[i]++
			}
		}
	}
	return out
}

// RoomLost is the room for large profiles device d takes from an otherwise
// empty GPU of the model: Headroom without it minus Headroom with it, by
// profile from the largest down (so a smaller vector, compared
// lexicographically, spoils less). On an A100-SXM4-80GB a 1g.10gb at
// memory slice 6 loses less than one at slice 0 (which takes the only
// 4g.40gb placement), and a 3g.40gb at slice 4 less than one at slice 0.
// It is nil for a profile the model lacks or a placement it does not offer.
func (m *Model) RoomLost(d Device) []int {
	if err := m.Validate(Layout{d}); err != nil {
		return nil
	}
	before, after := m.Headroom(nil), m.Headroom(Layout{d})
	for i := range before {
		before[i] -= after[i]
	}
	return before
}

// Whole returns the device of the model's largest profile (most compute
// slices, then most memory) at its first placement: the GPU as one
// instance (7g.80gb@0 on an A100-SXM4-80GB). ok is false for a model
// without profiles.
func (m *Model) Whole() (d Device, ok bool) {
	ps := m.profilesLargestFirst()
	if len(ps) == 0 || len(ps[0].Placements) == 0 {
		return Device{}, false
	}
	return Device{Profile: ps[0].Name, Start: ps[0].Placements[0].Start}, true
}

func (m *Model) profilesLargestFirst() []*Profile {
	out := make([]*Profile, len(m.Profiles))
	for i := range m.Profiles {
		out[i] = &m.Profiles[i]
	}
	slices.SortStableFunc(out, func(a, b *Profile) int {
		if c := cmp.Compare(b.ComputeSlices, a.ComputeSlices); c != 0 {
			return c
		}
		if c := cmp.Compare(b.MemoryMiB, a.MemoryMiB); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	return out
}

func placementMask(p Placement) uint64 {
	return ((uint64(1) << p.Size) - 1) << p.Start
}
