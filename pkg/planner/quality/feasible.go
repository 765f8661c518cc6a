package quality

import (
	"sort"
	"strings"

	"github.com/miglayout/miglayout/pkg/mig"
)

// feasibleSet is the set of profile multisets (over the mixes' profiles)
// that some valid layout of the model holds: what a GPU can hold when
// running instances may be moved within it.
type feasibleSet struct {
	model    *mig.Model
	profiles []string // largest first
	idx      map[string]int
	set      map[string]bool
	weight   map[string]float64
}

func newFeasibleSet(m *mig.Model, profiles []string) (*feasibleSet, error) {
	fs := &feasibleSet{model: m, idx: map[string]int{}, set: map[string]bool{}, weight: map[string]float64{}}
	var profs []*mig.Profile
	for _, name := range profiles {
		p, err := m.Profile(name)
		if err != nil {
			return nil, err
		}
		profs = append(profs, p)
		fs.weight[name] = weight(m, p)
	}
	sort.SliceStable(profs, func(i, j int) bool {
		if profs[i].ComputeSlices != profs[j].ComputeSlices {
			return profs[i].ComputeSlices > profs[j].ComputeSlices
		}
		return profs[i].MemorySlices > profs[j].MemorySlices
	})
	for i, p := range profs {
		fs.profiles = append(fs.profiles, p.Name)
		fs.idx[p.Name] = i
	}
	var cands []mig.Device
	for _, p := range profs {
		for _, pl := range p.Placements {
			cands = append(cands, mig.Device{Profile: p.Name, Start: pl.Start})
		}
	}
	var cur mig.Layout
	var rec func(from int)
	rec = func(from int) {
		fs.set[fs.key(cur.Counts())] = true
		for i := from; i < len(cands); i++ {
			cur = append(cur, cands[i])
			if m.Validate(cur) == nil {
				rec(i + 1)
			}
			cur = cur[:len(cur)-1]
		}
	}
	rec(0)
	return fs, nil
}

func (fs *feasibleSet) key(counts map[string]int) string {
	b := make([]byte, len(fs.profiles))
	for p, n := range counts {
		i, ok := fs.idx[p]
		if !ok {
			if n > 0 {
				return "x"
			}
			continue
		}
		b[i] = byte('0' + n)
	}
	for i := range b {
		if b[i] == 0 {
			b[i] = '0'
		}
	}
	return string(b)
}

// ok reports whether a GPU can hold the multiset counts.
func (fs *feasibleSet) ok(counts map[string]int) bool { return fs.set[fs.key(counts)] }

// pack assigns items (profile names) to bins GPUs so that every GPU's
// multiset is feasible: first-fit decreasing, trying pref[i] (the item's
// current GPU, or -1) first, then a bounded exhaustive search. It returns
// the bin of each item.
func (fs *feasibleSet) pack(items []string, bins int, pref []int) ([]int, bool) {
	order := make([]int, len(items))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool {
		return fs.weight[items[order[a]]] > fs.weight[items[order[b]]]
	})
	counts := make([]map[string]int, bins)
	for i := range counts {
		counts[i] = map[string]int{}
	}
	out := make([]int, len(items))
	try := func(b int, p string) bool {
		counts[b][p]++
		if fs.ok(counts[b]) {
			return true
		}
		counts[b][p]--
		return false
	}
	ffd := true
	for _, i := range order {
		placed := false
		if pref != nil && pref[i] >= 0 && try(pref[i], items[i]) {
			out[i], placed = pref[i], true
		}
		for b := 0; b < bins && !placed; b++ {
			if try(b, items[i]) {
				out[i], placed = b, true
			}
		}
		if !placed {
			ffd = false
			break
		}
	}
	if ffd {
		return out, true
	}
	// Capacity bound, then a bounded search skipping bins whose contents
	// equal an earlier one's.
	compute, memory := 0, 0
	for _, it := range items {
		p, _ := fs.model.Profile(it)
		compute += p.ComputeSlices
		memory += p.MemorySlices
	}
	if compute > bins*fs.model.ComputeSlices || memory > bins*fs.model.MemorySlices {
		return nil, false
	}
	for i := range counts {
		counts[i] = map[string]int{}
	}
	budget := 20000
	var rec func(k int) bool
	rec = func(k int) bool {
		if k == len(order) {
			return true
		}
		if budget--; budget < 0 {
			return false
		}
		i := order[k]
		seen := map[string]bool{}
		for b := range bins {
			key := fs.key(counts[b])
			if seen[key] {
				continue
			}
			seen[key] = true
			if try(b, items[i]) {
				out[i] = b
				if rec(k + 1) {
					return true
				}
				counts[b][items[i]]--
			}
		}
		return false
	}
	return out, rec(0)
}

// maximalLayouts returns the model's maximal layouts that use only the
// given profiles, and their distinct multisets (geometries) in the same
// order.
func maximalLayouts(m *mig.Model, profiles []string) ([]mig.Layout, []map[string]int) {
	ok := map[string]bool{}
	for _, p := range profiles {
		ok[p] = true
	}
	var out []mig.Layout
	var geoms []map[string]int
	seen := map[string]bool{}
	for _, l := range m.MaximalLayouts() {
		all := true
		for _, d := range l {
			all = all && ok[d.Profile]
		}
		if !all {
			continue
		}
		out = append(out, l)
		c := l.Counts()
		var parts []string
		for _, p := range profiles {
			parts = append(parts, p+":"+string(rune('0'+c[p])))
		}
		if k := strings.Join(parts, ","); !seen[k] {
			seen[k] = true
			geoms = append(geoms, c)
		}
	}
	return out, geoms
}
