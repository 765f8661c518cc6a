package quality

import (
	"slices"
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
	// multisets are set's non-empty multisets as counts by profile (in
	// profiles' order), the heaviest first: what packExact tries a GPU
	// with.
	multisets [][]int
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
	type multiset struct {
		counts []int
		weight float64
		key    string
	}
	var sets []multiset
	for k := range fs.set {
		if k == "x" || strings.Trim(k, "0") == "" {
			continue
		}
		m := multiset{counts: make([]int, len(k)), key: k}
		for i := range k {
			m.counts[i] = int(k[i] - '0')
			m.weight += float64(m.counts[i]) * fs.weight[fs.profiles[i]]
		}
		sets = append(sets, m)
	}
	sort.Slice(sets, func(a, b int) bool {
		if sets[a].weight != sets[b].weight {
			return sets[a].weight > sets[b].weight
		}
		return sets[a].key > sets[b].key
	})
	for _, m := range sets {
		fs.multisets = append(fs.multisets, m.counts)
	}
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
// current GPU, or -1) first, then, where that fails, an exact search
// (packExact). It returns the bin of each item.
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
	return fs.packExact(items, bins, pref)
}

// packExact decides exactly whether items (profile names) fit bins GPUs,
// each GPU holding one multiset of the feasible set, and returns the bin
// of each item: the multisets go to the GPUs whose items (pref, as pack's)
// they keep most of, and an item to its own GPU where its multiset is
// there, so that the migration bound moves no more instances than it
// must. The GPUs are alike, so it searches over the counts still to place
// and the number of GPUs left, the GPU taking each feasible multiset in
// turn (the heaviest first), with a capacity bound (compute and memory
// slices left against the GPUs left) and a memo of the states that cannot
// be finished. A bounded search stood here before; on 16 GPUs it gave up
// on repacks that exist, so that the migration bound came out low and the
// share of the gap closed high.
func (fs *feasibleSet) packExact(items []string, bins int, pref []int) ([]int, bool) {
	n := len(fs.profiles)
	left := make([]int, n)
	for _, it := range items {
		i, ok := fs.idx[it]
		if !ok {
			return nil, false
		}
		left[i]++
	}
	compute, memory := make([]int, n), make([]int, n)
	for i, name := range fs.profiles {
		p, _ := fs.model.Profile(name)
		compute[i], memory[i] = p.ComputeSlices, p.MemorySlices
	}
	dead := map[string]bool{}
	var chosen [][]int
	state := make([]byte, 2*(n+1)) // counts and GPUs left, two bytes each
	var rec func(b int) bool
	rec = func(b int) bool {
		c, mem, empty := 0, 0, true
		for i, l := range left {
			c += l * compute[i]
			mem += l * memory[i]
			empty = empty && l == 0
		}
		if empty {
			return true
		}
		if c > b*fs.model.ComputeSlices || mem > b*fs.model.MemorySlices {
			return false
		}
		for i, l := range left {
			state[2*i], state[2*i+1] = byte(l), byte(l>>8)
		}
		state[2*n], state[2*n+1] = byte(b), byte(b>>8)
		key := string(state)
		if dead[key] {
			return false
		}
		for _, m := range fs.multisets {
			fits := true
			for i, k := range m {
				fits = fits && k <= left[i]
			}
			if !fits {
				continue
			}
			for i, k := range m {
				left[i] -= k
			}
			chosen = append(chosen, m)
			if rec(b - 1) {
				return true
			}
			chosen = chosen[:len(chosen)-1]
			for i, k := range m {
				left[i] += k
			}
		}
		dead[key] = true
		return false
	}
	if !rec(bins) {
		return nil, false
	}
	// The GPU of each multiset: the pairs keeping the most items where
	// they are first.
	had := make([][]int, bins) // per GPU, its items' counts (pref)
	for b := range had {
		had[b] = make([]int, n)
	}
	for i, it := range items {
		if pref != nil && pref[i] >= 0 && pref[i] < bins {
			had[pref[i]][fs.idx[it]]++
		}
	}
	type pair struct{ set, gpu, kept int }
	var pairs []pair
	for s := range chosen {
		for b := range bins {
			kept := 0
			for p, k := range chosen[s] {
				kept += min(k, had[b][p])
			}
			pairs = append(pairs, pair{s, b, kept})
		}
	}
	sort.SliceStable(pairs, func(a, b int) bool { return pairs[a].kept > pairs[b].kept })
	gpuOf, setOn := make([]int, len(chosen)), make([][]int, bins)
	for i := range gpuOf {
		gpuOf[i] = -1
	}
	for _, q := range pairs {
		if gpuOf[q.set] < 0 && setOn[q.gpu] == nil {
			gpuOf[q.set] = q.gpu
			setOn[q.gpu] = slices.Clone(chosen[q.set]) // the counts left to give out
		}
	}
	out := make([]int, len(items))
	var rest []int
	for i, it := range items {
		p := fs.idx[it]
		if pref != nil && pref[i] >= 0 && pref[i] < bins && setOn[pref[i]] != nil && setOn[pref[i]][p] > 0 {
			setOn[pref[i]][p]--
			out[i] = pref[i]
			continue
		}
		rest = append(rest, i)
	}
	for _, i := range rest {
		p := fs.idx[items[i]]
		for b := range setOn {
			if setOn[b] != nil && setOn[b][p] > 0 {
				setOn[b][p]--
				out[i] = b
				break
			}
		}
	}
	return out, true
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
