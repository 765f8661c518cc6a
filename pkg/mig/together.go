package mig

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// HoldTogether reports whether free GPUs of the given models (one entry per
// GPU) can hold every device of want at once, each GPU a valid layout: want
// maps profile name to a count; a profile a model lacks fits none of its
// GPUs. It is exact: a multiset fits a GPU exactly when some maximal layout
// of its model holds at least as many of each profile, and a GPU that takes
// as much as one maximal layout allows never leaves the others a harder
// remainder, so the search tries, per GPU, each maximal layout's counts and
// memoises the remainder. GPUs of one model are interchangeable: their
// choices are tried in one order only (a multiset, not every sequence),
// and a remainder that needs more compute slices, memory slices or devices
// of a profile than the GPUs left can hold at most is a dead end. Beyond
// holdTogetherSteps steps (a node of many GPUs and many wanted profiles
// the bounds do not cut) it gives up and answers true: it could not tell.
// Its answers are kept (holdTogetherMemo): the controller asks again at
// every pass of a MigLayout with spares, for each distinct node.
func HoldTogether(models []*Model, want map[string]int) bool {
	// Models as maximalCounts knows them: a catalog model by pointer (two
	// catalogs may name a model alike), a variant by its Key.
	var key strings.Builder
	keys := make([]string, len(models))
	for i, m := range models {
		keys[i] = fmt.Sprintf("%p", m)
		if m.Variant != "" {
			keys[i] = m.Key()
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		key.WriteString(k)
		key.WriteByte(',')
	}
	for _, n := range slices.Sorted(maps.Keys(want)) {
		fmt.Fprintf(&key, "|%s=%d", n, want[n])
	}
	if ok, known := holdTogetherMemo.get(key.String()); known {
		return ok
	}
	ok, _ := holdTogether(models, want)
	holdTogetherMemo.put(key.String(), ok)
	return ok
}

// holdTogetherMemo keeps HoldTogether's answers, at most
// holdTogetherMemoSize (then it starts afresh).
var holdTogetherMemo = &boundedMemo{max: holdTogetherMemoSize}

const holdTogetherMemoSize = 4096

// boundedMemo is a map safe for concurrent use that starts afresh once it
// holds max entries.
type boundedMemo struct {
	mu  sync.Mutex
	max int
	m   map[string]bool
}

func (b *boundedMemo) get(key string) (value, ok bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	value, ok = b.m[key]
	return value, ok
}

func (b *boundedMemo) put(key string, value bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.m == nil || len(b.m) >= b.max {
		b.m = map[string]bool{}
	}
	b.m[key] = value
}

// holdTogether is HoldTogether, with the steps its search took.
func holdTogether(models []*Model, want map[string]int) (ok bool, steps int) {
	// Profiles asked for: one of count 0 adds a dimension to every
	// choice, so fewer of them are dominated, for nothing.
	names := slices.Sorted(maps.Keys(want))
	names = slices.DeleteFunc(names, func(n string) bool { return want[n] <= 0 })
	rem := make([]int, len(names))
	for i, n := range names {
		rem[i] = max(0, want[n])
	}
	// GPUs of one model next to each other, so their choices can be
	// tried in one order.
	models = slices.Clone(models)
	slices.SortStableFunc(models, func(a, b *Model) int { return strings.Compare(a.Key(), b.Key()) })
	// The undominated count vectors of each model's maximal layouts, over
	// the wanted profiles, and the most of each profile one GPU holds.
	caps := map[*Model][][]int{}
	most := map[*Model][]int{}
	for _, m := range models {
		if _, ok := caps[m]; !ok {
			caps[m] = maximalCounts(m, names)
			most[m] = make([]int, len(names))
			for _, c := range caps[m] {
				for i := range c {
					most[m][i] = max(most[m][i], c[i])
				}
			}
		}
	}
	// Compute and memory slices per device of each profile (0 where no
	// model knows it), and the slices and the most devices of each profile
	// of the GPUs from each index on: a remainder needing more than those
	// is a dead end.
	slicesOf, memOf := make([]int, len(names)), make([]int, len(names))
	for i, n := range names {
		for _, m := range models {
			if p, err := m.Profile(n); err == nil {
				slicesOf[i], memOf[i] = p.ComputeSlices, p.MemorySlices
				break
			}
		}
	}
	after, memAfter := make([]int, len(models)+1), make([]int, len(models)+1)
	mostAfter := make([][]int, len(models)+1)
	mostAfter[len(models)] = make([]int, len(names))
	for i := len(models) - 1; i >= 0; i-- {
		after[i] = after[i+1] + models[i].ComputeSlices
		memAfter[i] = memAfter[i+1] + models[i].MemorySlices
		mostAfter[i] = make([]int, len(names))
		for k := range names {
			mostAfter[i][k] = mostAfter[i+1][k] + most[models[i]][k]
		}
	}
	failed := map[string]bool{}
	var key []byte
	// rec: can GPUs gpu.. hold rem, GPU gpu taking a choice of index at
	// least from (the choice of the GPU before, where of the same model).
	var rec func(gpu, from int, rem []int) bool
	rec = func(gpu, from int, rem []int) bool {
		if steps++; steps > holdTogetherSteps {
			return true
		}
		need, mem := 0, 0
		for i, n := range rem {
			need += n * slicesOf[i]
			mem += n * memOf[i]
		}
		if need == 0 && !slices.ContainsFunc(rem, func(n int) bool { return n > 0 }) {
			return true
		}
		if gpu == len(models) || need > after[gpu] || mem > memAfter[gpu] {
			return false
		}
		for i, n := range rem {
			if n > mostAfter[gpu][i] {
				return false
			}
		}
		key = strconv.AppendInt(key[:0], int64(gpu), 10)
		key = append(key, '/')
		key = strconv.AppendInt(key, int64(from), 10)
		for _, n := range rem {
			key = append(key, ':')
			key = strconv.AppendInt(key, int64(n), 10)
		}
		if failed[string(key)] {
			return false
		}
		k := string(key)
		same := gpu+1 < len(models) && models[gpu+1] == models[gpu]
		for ci, c := range caps[models[gpu]][from:] {
			next := make([]int, len(rem))
			for i := range rem {
				next[i] = max(0, rem[i]-c[i])
			}
			nextFrom := 0
			if same {
				nextFrom = from + ci
			}
			if rec(gpu+1, nextFrom, next) {
				return true
			}
		}
		failed[k] = true
		return false
	}
	return rec(0, 0, rem), steps
}

// holdTogetherSteps bounds HoldTogether's search.
const holdTogetherSteps = 200_000

// maximalByModel caches Model.MaximalLayouts (milliseconds per model) by
// model: a catalog model by pointer (catalogs are loaded once), a variant
// by its Key (variants are made again on every plan, from what agents
// report), so it holds a handful of entries.
var maximalByModel sync.Map

// maximalCounts returns, for the profiles names, the count vectors of m's
// maximal layouts that no other one dominates.
func maximalCounts(m *Model, names []string) [][]int {
	var key any = m
	if m.Variant != "" {
		key = m.Key()
	}
	cached, ok := maximalByModel.Load(key)
	if !ok {
		cached, _ = maximalByModel.LoadOrStore(key, m.MaximalLayouts())
	}
	var all [][]int
	for _, l := range cached.([]Layout) {
		counts := l.Counts()
		v := make([]int, len(names))
		for i, n := range names {
			v[i] = counts[n]
		}
		all = append(all, v)
	}
	var out [][]int
	for i, v := range all {
		dominated := false
		for j, w := range all {
			if i != j && dominates(w, v) && (!slices.Equal(w, v) || j < i) {
				dominated = true
				break
			}
		}
		if !dominated {
			out = append(out, v)
		}
	}
	return out
}

// dominates reports whether w holds at least as many of each as v.
func dominates(w, v []int) bool {
	for i := range v {
		if w[i] < v[i] {
			return false
		}
	}
	return true
}
