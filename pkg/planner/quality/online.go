package quality

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"sync"

	"github.com/miglayout/miglayout/pkg/mig"
)

// onlineEpsilon is the reward of any served claim beside 1 per large claim:
// the optimal online policy maximises large claims served, then claims
// served.
const onlineEpsilon = 1e-6

// onlineDP is the optimal online placement policy of the loss model on a
// cluster small enough to enumerate: the policy that, knowing the arrival
// rate, the demand mix and the mean hold (but not the trace), places each
// claim where the expected number of large claims served over the rest of
// the trace (then of claims served) is highest. Like the clairvoyant search
// it serves a claim whenever some placement can and never moves an
// allocated device; unlike it, it does not know when claims arrive or
// leave. It is the best such policy in expectation in a model where a claim
// that does not fit when it arrives is lost at once; played in the
// simulator, where a claim waits Config.Deadline, it serves a little more
// than its value function says (a departure within the deadline is a
// second chance), as do the other strategies. A policy that turns claims
// away while a placement exists (admission control) is outside its scope:
// admissionValues solves that one (strategy (e′)).
//
// Arrivals are Poisson and holds exponential, so the state that matters is
// the allocated devices of each GPU (which claim holds them and since when
// does not) and the number of arrivals left; the value function is solved
// exactly by dynamic programming over the embedded jump chain: from a state
// with k allocated devices the next event is an arrival with probability
// ρ/(ρ+k) and the end of each device's hold with probability 1/(ρ+k), where
// ρ is the arrival rate times the mean hold.
type onlineDP struct {
	m     *mig.Model
	profs []*mig.Profile // the mix's profiles
	share []float64      // arrival share per profile
	rho   float64
	gpus  int
	// GPU states: the allocated devices of one GPU, canonical.
	states  []mig.Layout
	stateID map[string]int
	// add[s][p][k]: the state after placing a device of profs[p] at its
	// k-th placement, -1 where it does not fit.
	add [][][]int
	// del[s][i]: the state after device i of states[s] leaves.
	del [][]int
	// cluster states: sorted tuples of GPU states.
	tuples  [][]int
	tupleID map[string]int
	// arr[c][p]: the cluster states an arrival of profs[p] may lead to from
	// cluster state c; dep[c]: those a departure leads to (one per device);
	// devs[c]: allocated devices; order: cluster states by devs.
	arr   [][][]int
	dep   [][]int
	devs  []int
	order []int
	// value[n][c]: expected reward with n arrivals left in cluster state c.
	value [][]float64
	// admission caches admissionValues by reward per claim.
	admissionMu sync.Mutex
	admission   map[float64]*admissionEntry
}

type admissionEntry struct {
	once  sync.Once
	value [][]float64
}

var errOnlineTooLarge = errors.New("optimal online policy exceeds its state budget")

// onlineCache shares solved policies between traces of the same mix.
var onlineCache sync.Map // key string -> *onlineEntry

type onlineEntry struct {
	once sync.Once
	dp   *onlineDP
	err  error
}

// solveOnline returns the optimal online policy for mix on gpus GPUs with
// up to n arrivals, at offered load (as genTrace), solving it once per
// configuration. It fails with errOnlineTooLarge where the cluster states
// times arrivals exceed limit.
func solveOnline(m *mig.Model, mix Mix, gpus, n int, load float64, limit int) (*onlineDP, error) {
	key := fmt.Sprintf("%s/%s/%v/%d/%d/%g/%d", m.Name, mix.Name, mix.Weights, gpus, n, load, limit)
	v, _ := onlineCache.LoadOrStore(key, &onlineEntry{})
	e := v.(*onlineEntry)
	e.once.Do(func() { e.dp, e.err = newOnlineDP(m, mix, gpus, n, load, limit) })
	return e.dp, e.err
}

func newOnlineDP(m *mig.Model, mix Mix, gpus, n int, load float64, limit int) (*onlineDP, error) {
	dp := &onlineDP{m: m, gpus: gpus, stateID: map[string]int{}, tupleID: map[string]int{}}
	total, meanW := 0.0, 0.0
	for _, name := range slices.Sorted(maps.Keys(mix.Weights)) {
		p, err := m.Profile(name)
		if err != nil {
			return nil, fmt.Errorf("mix %s: %w", mix.Name, err)
		}
		w := mix.Weights[name]
		if w <= 0 {
			continue
		}
		dp.profs = append(dp.profs, p)
		dp.share = append(dp.share, w)
		total += w
	}
	for i, p := range dp.profs {
		dp.share[i] /= total
		meanW += dp.share[i] * weight(m, p)
	}
	dp.rho = load * float64(gpus) / meanW
	dp.enumerate()
	if err := dp.enumerateTuples(limit / max(n+1, 1)); err != nil {
		return nil, err
	}
	dp.solve(n)
	return dp, nil
}

// enumerate lists every set of allocated devices one GPU can hold, from
// the empty GPU by adding one device at a time.
func (dp *onlineDP) enumerate() {
	dp.state(nil)
	for s := 0; s < len(dp.states); s++ {
		cur := dp.states[s]
		byProf := make([][]int, len(dp.profs))
		for pi, p := range dp.profs {
			byProf[pi] = make([]int, len(p.Placements))
			for k, pl := range p.Placements {
				next := append(slices.Clone(cur), mig.Device{Profile: p.Name, Start: pl.Start})
				if dp.m.Validate(next) != nil {
					byProf[pi][k] = -1
					continue
				}
				byProf[pi][k] = dp.state(next)
			}
		}
		dp.add = append(dp.add, byProf)
	}
	dp.del = make([][]int, len(dp.states))
	for s, cur := range dp.states {
		for i := range cur {
			dp.del[s] = append(dp.del[s], dp.state(slices.Delete(slices.Clone(cur), i, i+1)))
		}
	}
}

func (dp *onlineDP) state(l mig.Layout) int {
	l = l.Canonical()
	k := l.String()
	if id, ok := dp.stateID[k]; ok {
		return id
	}
	id := len(dp.states)
	dp.stateID[k] = id
	dp.states = append(dp.states, l)
	return id
}

func tupleKey(t []int) string { return fmt.Sprint(t) }

// enumerateTuples lists the cluster states: multisets of GPU states.
func (dp *onlineDP) enumerateTuples(limit int) error {
	t := make([]int, dp.gpus)
	var rec func(i, from int) error
	rec = func(i, from int) error {
		if i == dp.gpus {
			if len(dp.tuples) >= limit {
				return errOnlineTooLarge
			}
			dp.tupleID[tupleKey(t)] = len(dp.tuples)
			dp.tuples = append(dp.tuples, slices.Clone(t))
			return nil
		}
		for s := from; s < len(dp.states); s++ {
			t[i] = s
			if err := rec(i+1, s); err != nil {
				return err
			}
		}
		return nil
	}
	return rec(0, 0)
}

// tuple returns the cluster state with GPU i in GPU state s.
func (dp *onlineDP) tuple(t []int, i, s int) int {
	u := slices.Clone(t)
	u[i] = s
	sort.Ints(u)
	id, ok := dp.tupleID[tupleKey(u)]
	if !ok {
		panic(fmt.Sprintf("cluster state %v not enumerated", u))
	}
	return id
}

// transitions lists, per cluster state, the states an arrival of each
// profile may lead to and those each departure leads to, and orders the
// cluster states by allocated devices.
func (dp *onlineDP) transitions() {
	dp.order = make([]int, len(dp.tuples))
	dp.devs = make([]int, len(dp.tuples))
	order, devs := dp.order, dp.devs
	for c, t := range dp.tuples {
		order[c] = c
		for _, s := range t {
			devs[c] += len(dp.states[s])
		}
	}
	sort.SliceStable(order, func(a, b int) bool { return devs[order[a]] < devs[order[b]] })
	dp.arr = make([][][]int, len(dp.tuples))
	dp.dep = make([][]int, len(dp.tuples))
	arr, dep := dp.arr, dp.dep
	for c, t := range dp.tuples {
		arr[c] = make([][]int, len(dp.profs))
		for pi := range dp.profs {
			for i, s := range t {
				if i > 0 && t[i-1] == s {
					continue // same GPU state: same choices
				}
				for _, ns := range dp.add[s][pi] {
					if ns >= 0 {
						arr[c][pi] = append(arr[c][pi], dp.tuple(t, i, ns))
					}
				}
			}
		}
		for i, s := range t {
			for _, ns := range dp.del[s] {
				dep[c] = append(dep[c], dp.tuple(t, i, ns))
			}
		}
	}
}

// solve fills value[0..n] with the optimal policy's values.
func (dp *onlineDP) solve(n int) { dp.value = dp.values(n, nil) }

// values returns the value table of a policy for 0..n arrivals left, in
// order of arrivals left, and within one n in order of allocated devices (a
// departure leads to fewer). choose picks, for a claim of profile pi
// arriving in cluster state c, one of the cluster states next it may lead
// to (by index); nil is the optimal policy (the best next state).
func (dp *onlineDP) values(n int, choose func(c, pi int, next []int) int) [][]float64 {
	return dp.solveValues(n, onlineEpsilon, false, choose)
}

// admissionValues is the value table of the optimal online policy that may
// also turn an arriving claim away while a placement exists (admission
// control), for a reward of 1 per large claim served plus reward per claim
// served: at each arrival it takes the better of turning the claim away
// and its best placement. Its tables are kept per reward (the DP's states
// and transitions are shared).
func (dp *onlineDP) admissionValues(n int, reward float64) [][]float64 {
	dp.admissionMu.Lock()
	if dp.admission == nil {
		dp.admission = map[float64]*admissionEntry{}
	}
	e, ok := dp.admission[reward]
	if !ok {
		e = &admissionEntry{}
		dp.admission[reward] = e
	}
	dp.admissionMu.Unlock()
	e.once.Do(func() {
		e.value = dp.solveValues(n, reward, true, nil)
	})
	return e.value
}

// solveValues is values with reward per claim served (beside 1 per large
// claim) and, with admit, the choice of turning an arriving claim away
// while a placement exists (choose is nil then).
func (dp *onlineDP) solveValues(n int, reward float64, admit bool, choose func(c, pi int, next []int) int) [][]float64 {
	if dp.arr == nil {
		dp.transitions()
	}
	arr, dep, devs, order := dp.arr, dp.dep, dp.devs, dp.order
	value := make([][]float64, n+1)
	value[0] = make([]float64, len(dp.tuples))
	for k := 1; k <= n; k++ {
		cur, prev := make([]float64, len(dp.tuples)), value[k-1]
		for _, c := range order {
			a := 0.0
			for pi, p := range dp.profs {
				best := prev[c] // the claim is lost
				if next := arr[c][pi]; len(next) > 0 {
					r := reward
					if isLarge(p) {
						r++
					}
					switch {
					case choose != nil:
						best = r + prev[next[choose(c, pi, next)]]
					case admit:
						for _, nc := range next {
							best = max(best, r+prev[nc])
						}
					default:
						best = r + prev[next[0]]
						for _, nc := range next[1:] {
							best = max(best, r+prev[nc])
						}
					}
				}
				a += dp.share[pi] * best
			}
			d := 0.0
			for _, nc := range dep[c] {
				d += cur[nc]
			}
			cur[c] = (dp.rho*a + d) / (dp.rho + float64(devs[c]))
		}
		value[k] = cur
	}
	return value
}

// onlineStrategy plays an onlineDP on a trace: each pending claim, in
// arrival order, goes where the value of the state it leads to (with the
// arrivals still to come) is highest; ties go to device-name order.
// Service is instant, as for the other bounds.
//
// With admission set it plays admissionValues for reward instead (strategy
// (e′)): a pending claim is placed only where that is worth at least as
// much as leaving it pending (turned away for the policy, which takes it
// up again at the next event while its deadline has not passed).
type onlineStrategy struct {
	dp     *onlineDP
	arrive []float64 // arrival times, ascending
	// admission: play admissionValues(reward); value is its table.
	admission bool
	reward    float64
	value     [][]float64
}

func (onlineStrategy) lock() bool     { return false }
func (onlineStrategy) migrates() bool { return false }
func (onlineStrategy) delay() bool    { return false }

func (o onlineStrategy) decide(s *sim) error {
	left := len(o.arrive) - sort.Search(len(o.arrive), func(i int) bool { return o.arrive[i] > s.now })
	table := o.dp.value
	if o.admission {
		table = o.value
	}
	if left >= len(table) {
		return fmt.Errorf("optimal online policy solved for %d arrivals, %d left", len(table)-1, left)
	}
	val := table[left]
	for _, id := range slices.Clone(s.pending) {
		cur := make([]int, len(s.gpus))
		for i, g := range s.gpus {
			st, ok := o.dp.stateID[s.owned(g).Canonical().String()]
			if !ok {
				return fmt.Errorf("GPU %d: allocated devices %s outside the policy's states", i, s.owned(g))
			}
			cur[i] = st
		}
		p, _ := s.model.Profile(s.claims[id].profile)
		pi := slices.IndexFunc(o.dp.profs, func(q *mig.Profile) bool { return q.Name == p.Name })
		if pi < 0 {
			return fmt.Errorf("claim %d: profile %s outside the mix", id, p.Name)
		}
		bestG, bestD, bestV := -1, mig.Device{}, 0.0
		for gi := range s.gpus {
			for k, pl := range p.Placements {
				ns := o.dp.add[cur[gi]][pi][k]
				if ns < 0 {
					continue
				}
				v := val[o.dp.tuple(cur, gi, ns)]
				if bestG < 0 || v > bestV+1e-12 {
					bestG, bestD, bestV = gi, mig.Device{Profile: p.Name, Start: pl.Start}, v
				}
			}
		}
		if bestG < 0 {
			continue
		}
		if o.admission {
			r := o.reward
			if isLarge(p) {
				r++
			}
			if val[o.dp.tuple(cur, 0, cur[0])] > r+bestV+1e-12 {
				continue // worth more turned away, for now
			}
		}
		g := s.gpus[bestG]
		if !isFree(g, bestD) {
			l, _, ok := room(s, g, bestD)
			if !ok {
				return fmt.Errorf("claim %d: %s on GPU %d does not fit", id, bestD, bestG)
			}
			if err := s.change(bestG, l, false); err != nil {
				return err
			}
		}
		if err := s.assign(id, bestG, bestD); err != nil {
			return err
		}
	}
	return nil
}
