package mig

import (
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
// memoises the remainder.
func HoldTogether(models []*Model, want map[string]int) bool {
	names := slices.Sorted(maps.Keys(want))
	rem := make([]int, len(names))
	for i, n := range names {
		rem[i] = max(0, want[n])
	}
	// The undominated count vectors of each model's maximal layouts, over
	// the wanted profiles.
	caps := map[*Model][][]int{}
	for _, m := range models {
		if _, ok := caps[m]; !ok {
			caps[m] = maximalCounts(m, names)
		}
	}
	// Compute slices wanted per profile (0 where no model knows it), and
	// the slices of the GPUs from each index on: a remainder needing more
	// than those is a dead end.
	slicesOf := make([]int, len(names))
	for i, n := range names {
		for _, m := range models {
			if p, err := m.Profile(n); err == nil {
				slicesOf[i] = p.ComputeSlices
				break
			}
		}
	}
	after := make([]int, len(models)+1)
	for i := len(models) - 1; i >= 0; i-- {
		after[i] = after[i+1] + models[i].ComputeSlices
	}
	failed := map[string]bool{}
	var rec func(gpu int, rem []int) bool
	rec = func(gpu int, rem []int) bool {
		need := 0
		for i, n := range rem {
			need += n * slicesOf[i]
		}
		if need == 0 && !slices.ContainsFunc(rem, func(n int) bool { return n > 0 }) {
			return true
		}
		if gpu == len(models) || need > after[gpu] {
			return false
		}
		key := strconv.Itoa(gpu) + ":" + joinInts(rem)
		if failed[key] {
			return false
		}
		for _, c := range caps[models[gpu]] {
			next := make([]int, len(rem))
			for i := range rem {
				next[i] = max(0, rem[i]-c[i])
			}
			if rec(gpu+1, next) {
				return true
			}
		}
		failed[key] = true
		return false
	}
	return rec(0, rem)
}

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

func joinInts(v []int) string {
	parts := make([]string, len(v))
	for i, n := range v {
		parts[i] = strconv.Itoa(n)
	}
	return strings.Join(parts, ",")
}
