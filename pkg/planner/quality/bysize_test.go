package quality

import (
	"math"
	"testing"
)

// TestTupleIndex: sorted tuples of 2 and 3 states are numbered densely and
// without collision.
func TestTupleIndex(t *testing.T) {
	const states = 6
	for _, g := range []int{1, 2, 3} {
		seen := map[int]bool{}
		var rec func(cur []int, from int)
		rec = func(cur []int, from int) {
			if len(cur) == g {
				i := tupleIndex(cur)
				if seen[i] {
					t.Errorf("%d GPUs: index %d given twice (%v)", g, i, cur)
				}
				seen[i] = true
				return
			}
			for s := from; s < states; s++ {
				rec(append(cur, s), s)
			}
		}
		rec(nil, 0)
		for i := range len(seen) {
			if !seen[i] {
				t.Errorf("%d GPUs: %d tuples but index %d unused", g, len(seen), i)
			}
		}
	}
}

// TestOptimumMatchesExact: the by-size solver, which keeps two arrival
// layers over densely numbered tuples, gives strategy (e)'s value on 2 GPUs.
func TestOptimumMatchesExact(t *testing.T) {
	m := a100(t)
	for _, mix := range DefaultMixes() {
		const n = 10
		dp, err := newOnlineDP(m, mix, 2, n, 0.9, 5_000_000)
		if err != nil {
			t.Fatal(err)
		}
		one, err := newOnlineDP(m, mix, 1, 0, 0.9, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		want := emptyValue(dp, dp.value, n)
		if got := newSizeWorld(one).optimum(2, one.rho*2, n); math.Abs(got-want) > 1e-9 {
			t.Errorf("%s: optimum %.12f, strategy (e) %.12f", mix.Name, got, want)
		}
	}
}

// TestBoundsBySizeOrder: on 1 and 2 GPUs, first-fit and best fit serve no
// more large claims than the optimum, and the optimum no more than
// migration, within the simulation's error.
func TestBoundsBySizeOrder(t *testing.T) {
	cfg := DefaultConfig()
	const paths = 20000
	rows, err := BoundsBySize(cfg, []int{1, 2}, paths)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2*len(cfg.Mixes) {
		t.Fatalf("%d rows", len(rows))
	}
	for _, r := range rows {
		// A share's standard error is below sqrt(0.25/(paths*large claims)).
		tol := 4 * math.Sqrt(0.25/float64(paths))
		if r.FirstFit > r.Optimum+tol || r.BestFit > r.Optimum+tol || r.Optimum > r.Migration+tol {
			t.Errorf("%s on %d GPUs: first-fit %.4f, best fit %.4f, optimum %.4f, migration %.4f", r.Mix, r.GPUs, r.FirstFit, r.BestFit, r.Optimum, r.Migration)
		}
		if r.Optimum <= r.FirstFit {
			t.Errorf("%s on %d GPUs: the optimum %.4f does not beat first-fit %.4f", r.Mix, r.GPUs, r.Optimum, r.FirstFit)
		}
	}
	if _, err := BoundsBySize(cfg, []int{4}, 1); err == nil {
		t.Error("4 GPUs: no error")
	}
}
