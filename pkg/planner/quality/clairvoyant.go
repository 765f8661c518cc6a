package quality

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"slices"
	"sort"

	"github.com/miglayout/miglayout/pkg/mig"
)

// errClairvoyantTooLarge: the clairvoyant search gave up.
var errClairvoyantTooLarge = errors.New("clairvoyant search exceeds its state budget")

// clairvoyantResult is the best outcome of the clairvoyant search.
type clairvoyantResult struct {
	large, total int
	states       int
}

// clairvoyantSearch is the clairvoyant search of the loss model: an exact
// search over placement choices that knows the whole trace, maximising
// served large claims, then served claims. It bounds, trace by trace, every
// no-migration policy that serves a claim at once whenever some placement
// can, but no policy reaches it. The simulated strategies serve a claim a
// repartition delay later (its hold, and so its departure, shifted), so on
// a trace one may serve more than it (first-fit and nos 17 large claims
// against its 16 on one trace of the 2-GPU large-heavy mix; 16 with no
// delay): against them it is a reference, not a bound. At every arrival
// and departure, each waiting claim (arrival
// order) that fits somewhere without moving an allocated device is placed,
// and the search branches over every such (GPU, placement), up to the
// symmetries of the placement geometry. A placement fits where its memory
// slices are free and the GPU has the compute slices, instances, the
// profile's instance count and the media engines (mig.MediaEnginesFit) for
// it. Service is instant (no repartition
// delay, no per-GPU lock) and free devices cost nothing, so it is
// optimistic against the simulated strategies.
type clairvoyantSearch struct {
	m        *mig.Model
	claims   []claim
	prof     []int // profile index per claim
	profs    []*mig.Profile
	deadline float64
	memo     map[string][2]int
	limit    int
	// jpeg and ofa are the GPU's media engines (Model.MediaEngineTotals).
	jpeg, ofa int
	// mapped[perm][profile][start] is the start of a placement under a
	// permutation of memory slices that maps every profile's placements
	// onto its placements: GPU states it relates have the same future.
	mapped [][][]int
	buf    []byte
}

type cvDev struct {
	id     int
	start  int
	depart float64
}

type cvGPU struct {
	mask      uint64
	compute   int
	jpeg, ofa int // media engines taken
	cnt       [16]int8
	devs      []cvDev // by claim id
}

type cvState struct {
	next    int // next arrival
	pending []int
	gpus    []cvGPU
}

func solveClairvoyant(m *mig.Model, tr trace, gpus int, deadline float64, limit int) (clairvoyantResult, error) {
	return solveClairvoyantWith(m, tr, gpus, deadline, limit, true)
}

// solveClairvoyantWith is solveClairvoyant with the symmetry reduction on or off.
func solveClairvoyantWith(m *mig.Model, tr trace, gpus int, deadline float64, limit int, symmetry bool) (clairvoyantResult, error) {
	e := &clairvoyantSearch{m: m, claims: tr.claims, deadline: deadline, memo: map[string][2]int{}, limit: limit}
	e.jpeg, e.ofa = m.MediaEngineTotals()
	if len(m.Profiles) > 16 {
		return clairvoyantResult{}, errors.New("clairvoyant search supports at most 16 profiles")
	}
	idx := map[string]int{}
	for i := range m.Profiles {
		idx[m.Profiles[i].Name] = i
		e.profs = append(e.profs, &m.Profiles[i])
	}
	for _, c := range tr.claims {
		i, ok := idx[c.profile]
		if !ok {
			_, err := m.Profile(c.profile)
			return clairvoyantResult{}, err
		}
		e.prof = append(e.prof, i)
	}
	perms := slicePerms(m)
	if !symmetry {
		perms = perms[:0]
		id := make([]int, m.MemorySlices)
		for i := range id {
			id[i] = i
		}
		perms = append(perms, id)
	}
	for _, perm := range perms {
		byProf := make([][]int, len(m.Profiles))
		for pi, p := range e.profs {
			byProf[pi] = make([]int, m.MemorySlices)
			for _, pl := range p.Placements {
				start := m.MemorySlices
				for s := pl.Start; s < pl.End(); s++ {
					start = min(start, perm[s])
				}
				byProf[pi][pl.Start] = start
			}
		}
		e.mapped = append(e.mapped, byProf)
	}
	st := cvState{gpus: make([]cvGPU, gpus)}
	v, err := e.advance(st)
	if err != nil {
		return clairvoyantResult{states: len(e.memo)}, err
	}
	return clairvoyantResult{large: v[0], total: v[1], states: len(e.memo)}, nil
}

func better(a, b [2]int) bool { return a[0] > b[0] || a[0] == b[0] && a[1] > b[1] }

// advance moves to the next event instant after st's decisions.
func (e *clairvoyantSearch) advance(st cvState) ([2]int, error) {
	if st.next >= len(e.claims) && len(st.pending) == 0 {
		return [2]int{}, nil
	}
	t := math.Inf(1)
	if st.next < len(e.claims) {
		t = e.claims[st.next].arrive
	}
	for _, g := range st.gpus {
		for _, d := range g.devs {
			t = math.Min(t, d.depart)
		}
	}
	if math.IsInf(t, 1) {
		return [2]int{}, nil
	}
	ns := cvState{next: st.next, gpus: make([]cvGPU, len(st.gpus))}
	for _, id := range st.pending {
		if e.claims[id].arrive+e.deadline >= t {
			ns.pending = append(ns.pending, id)
		}
	}
	for i, g := range st.gpus {
		var ng cvGPU
		for _, d := range g.devs {
			if d.depart <= t {
				continue
			}
			ng.add(e, d)
		}
		ns.gpus[i] = ng
	}
	for ns.next < len(e.claims) && e.claims[ns.next].arrive <= t {
		ns.pending = append(ns.pending, ns.next)
		ns.next++
	}
	key := e.key(ns, t)
	if v, ok := e.memo[key]; ok {
		return v, nil
	}
	if len(e.memo) >= e.limit {
		return [2]int{}, errClairvoyantTooLarge
	}
	v, err := e.place(ns, 0, t)
	if err != nil {
		return v, err
	}
	e.memo[key] = v
	return v, nil
}

func (g *cvGPU) add(e *clairvoyantSearch, d cvDev) {
	p := e.profs[e.prof[d.id]]
	g.mask |= mask(d.start, p.MemorySlices)
	g.compute += p.ComputeSlices
	g.jpeg += p.JPEGEngines
	g.ofa += p.OFAEngines
	g.cnt[e.prof[d.id]]++
	g.devs = append(g.devs, d)
}

func mask(start, size int) uint64 { return ((uint64(1) << size) - 1) << start }

// place decides pending claim k onwards at time t.
func (e *clairvoyantSearch) place(st cvState, k int, t float64) ([2]int, error) {
	if k == len(st.pending) {
		return e.advance(st)
	}
	id := st.pending[k]
	c := e.claims[id]
	pi := e.prof[id]
	p := e.profs[pi]
	var best [2]int
	found := false
	seen := map[string]bool{}
	for gi, g := range st.gpus {
		if g.compute+p.ComputeSlices > e.m.ComputeSlices || len(g.devs) >= e.m.MaxInstances || int(g.cnt[pi]) >= p.MaxCount ||
			g.jpeg+p.JPEGEngines > e.jpeg || g.ofa+p.OFAEngines > e.ofa {
			continue
		}
		from := e.gpuKey(g)
		for _, pl := range p.Placements {
			if g.mask&mask(pl.Start, pl.Size) != 0 {
				continue
			}
			ng := cvGPU{mask: g.mask, compute: g.compute, jpeg: g.jpeg, ofa: g.ofa, cnt: g.cnt, devs: slices.Clone(g.devs)}
			ng.add(e, cvDev{id: id, start: pl.Start, depart: t + c.hold})
			// Skip a choice equivalent to one tried: the same GPU state up
			// to symmetry, from a GPU in the same state.
			if k := from + ">" + e.gpuKey(ng); seen[k] {
				continue
			} else {
				seen[k] = true
			}
			ns := cvState{next: st.next, pending: slices.Delete(slices.Clone(st.pending), k, k+1), gpus: slices.Clone(st.gpus)}
			ns.gpus[gi] = ng
			v, err := e.place(ns, k, t)
			if err != nil {
				return v, err
			}
			v[1]++
			if c.large {
				v[0]++
			}
			if !found || better(v, best) {
				best, found = v, true
			}
		}
	}
	if found {
		return best, nil
	}
	return e.place(st, k+1, t)
}

// key is the memo key of state st at time t: the next arrival, the
// waiting claims and each GPU's state (gpuKey), and t where claims wait (one
// placed now leaves at t plus its hold, so the same state at another time
// has another future; with none waiting, every later event's time is in
// the state). Each part is length-prefixed, so no two states share a key.
func (e *clairvoyantSearch) key(st cvState, t float64) string {
	var b []byte
	b = binary.AppendUvarint(b, uint64(st.next))
	b = binary.AppendUvarint(b, uint64(len(st.pending)))
	if len(st.pending) > 0 {
		b = binary.BigEndian.AppendUint64(b, math.Float64bits(t))
	}
	for _, id := range st.pending {
		b = binary.AppendUvarint(b, uint64(id))
	}
	gs := make([]string, len(st.gpus))
	for i, g := range st.gpus {
		gs[i] = e.gpuKey(g)
	}
	sort.Strings(gs)
	for _, g := range gs {
		b = binary.AppendUvarint(b, uint64(len(g)))
		b = append(b, g...)
	}
	return string(b)
}

// gpuKey is the canonical form of a GPU's state: its devices (claim,
// placement start, departure) under the slice permutation giving the least
// bytes.
func (e *clairvoyantSearch) gpuKey(g cvGPU) string {
	if len(g.devs) == 0 {
		return ""
	}
	devs := g.devs
	if !slices.IsSortedFunc(devs, func(a, b cvDev) int { return a.id - b.id }) {
		devs = slices.Clone(devs)
		slices.SortFunc(devs, func(a, b cvDev) int { return a.id - b.id })
	}
	const per = 11
	n := len(devs) * per
	if cap(e.buf) < 2*n {
		e.buf = make([]byte, 2*n)
	}
	best, cur := e.buf[:n], e.buf[n:2*n]
	for pi, mp := range e.mapped {
		for i, d := range devs {
			b := cur[i*per:]
			binary.BigEndian.PutUint16(b, uint16(d.id))
			b[2] = byte(mp[e.prof[d.id]][d.start])
			binary.BigEndian.PutUint64(b[3:], math.Float64bits(d.depart))
		}
		if pi == 0 || bytes.Compare(cur, best) < 0 {
			copy(best, cur)
		}
	}
	return string(best)
}

// slicePerms returns the permutations of m's memory slices that map the
// placements of every profile onto placements of the same profile
// (including the identity).
func slicePerms(m *mig.Model) [][]int {
	n := m.MemorySlices
	perm := make([]int, n)
	for i := range perm {
		perm[i] = i
	}
	var out [][]int
	valid := func() bool {
		for _, p := range m.Profiles {
			masks := map[uint64]bool{}
			for _, pl := range p.Placements {
				masks[mask(pl.Start, pl.Size)] = true
			}
			for _, pl := range p.Placements {
				var mm uint64
				for s := pl.Start; s < pl.End(); s++ {
					mm |= 1 << perm[s]
				}
				if !masks[mm] {
					return false
				}
			}
		}
		return true
	}
	var rec func(k int)
	rec = func(k int) {
		if k == n {
			if valid() {
				out = append(out, slices.Clone(perm))
			}
			return
		}
		for i := k; i < n; i++ {
			perm[k], perm[i] = perm[i], perm[k]
			rec(k + 1)
			perm[k], perm[i] = perm[i], perm[k]
		}
	}
	rec(0)
	return out
}
