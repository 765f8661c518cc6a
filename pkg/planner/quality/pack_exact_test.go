package quality

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestPackExactAgainstEveryAssignment: on random multisets of up to 8
// devices and up to 3 GPUs, pack finds a packing exactly where one of all
// the assignments of devices to GPUs is feasible on every GPU, and the
// packing it returns is one. Where first-fit decreasing fails, this is the
// exact search's answer (a bounded search stood there before, and gave up
// on repacks that exist on 16 GPUs, which made the migration bound low).
func TestPackExactAgainstEveryAssignment(t *testing.T) {
	fs, _ := packTestSet(t)
	profiles := fs.profiles
	rng := rand.New(rand.NewPCG(1, 2))
	fits, exactFits := 0, 0
	for range 400 {
		bins := 1 + rng.IntN(3)
		items := make([]string, 1+rng.IntN(8))
		for i := range items {
			items[i] = profiles[rng.IntN(len(profiles))]
		}
		want := false
		assign := make([]int, len(items))
		var every func(i int)
		every = func(i int) {
			if want {
				return
			}
			if i == len(items) {
				want = feasibleOn(fs, items, assign, bins)
				return
			}
			for b := range bins {
				assign[i] = b
				every(i + 1)
			}
		}
		every(0)
		got, ok := fs.pack(items, bins, nil)
		if ok != want {
			t.Fatalf("pack of %v on %d GPUs: %v, want %v", items, bins, ok, want)
		}
		if ok {
			fits++
			if !feasibleOn(fs, items, got, bins) {
				t.Fatalf("pack of %v on %d GPUs gave %v, not feasible", items, bins, got)
			}
		}
		if exact, ok := fs.packExact(items, bins, nil); ok != want || ok && !feasibleOn(fs, items, exact, bins) {
			t.Fatalf("packExact of %v on %d GPUs: %v %v, want %v", items, bins, exact, ok, want)
		} else if ok {
			exactFits++
		}
	}
	if fits < 100 || exactFits < 100 {
		t.Errorf("only %d instances fit (%d by packExact): the sample says little", fits, exactFits)
	}
}

// feasibleOn reports whether assigning items to GPUs by assign leaves every
// one of the bins GPUs a feasible multiset.
func feasibleOn(fs *feasibleSet, items []string, assign []int, bins int) bool {
	counts := make([]map[string]int, bins)
	for b := range counts {
		counts[b] = map[string]int{}
	}
	for i, it := range items {
		if assign[i] < 0 || assign[i] >= bins {
			return false
		}
		counts[assign[i]][it]++
	}
	for _, c := range counts {
		if !fs.ok(c) {
			return false
		}
	}
	return true
}

// TestPackFindsEveryPackingThatExists: devices that are, by construction,
// one feasible multiset per GPU (up to 16 GPUs), shuffled, are packed:
// first-fit decreasing fails on some of them, and the exact search must
// find a packing all the same.
func TestPackFindsEveryPackingThatExists(t *testing.T) {
	fs, full := packTestSet(t)
	rng := rand.New(rand.NewPCG(3, 4))
	for range 300 {
		bins := 2 + rng.IntN(15)
		var items []string
		for range bins {
			k := full[rng.IntN(len(full))]
			for i := range k {
				for range int(k[i] - '0') {
					items = append(items, fs.profiles[i])
				}
			}
		}
		rng.Shuffle(len(items), func(i, j int) { items[i], items[j] = items[j], items[i] })
		got, ok := fs.pack(items, bins, nil)
		if !ok || !feasibleOn(fs, items, got, bins) {
			t.Fatalf("no packing of %v on %d GPUs found (%v, %v), though one exists", items, bins, got, ok)
		}
	}
}

// TestPackExactKeepsItemsOnTheirGPUs: the exact search gives its multisets
// to the GPUs whose items they keep most of, so that the migration bound
// moves fewer running instances than an arbitrary numbering of the GPUs:
// on packings built one feasible multiset per GPU, with every item's GPU
// its own, far fewer items move than without their GPUs given.
func TestPackExactKeepsItemsOnTheirGPUs(t *testing.T) {
	fs, full := packTestSet(t)
	rng := rand.New(rand.NewPCG(5, 6))
	movedWith, movedWithout := 0, 0
	for range 200 {
		bins := 2 + rng.IntN(15)
		var items []string
		var pref []int
		for b := range bins {
			k := full[rng.IntN(len(full))]
			for i := range k {
				for range int(k[i] - '0') {
					items = append(items, fs.profiles[i])
					pref = append(pref, b)
				}
			}
		}
		moved := func(p []int) int {
			got, ok := fs.packExact(items, bins, p)
			if !ok || !feasibleOn(fs, items, got, bins) {
				t.Fatalf("no packing of %v on %d GPUs found (%v, %v), though one exists", items, bins, got, ok)
			}
			n := 0
			for i := range got {
				if got[i] != pref[i] {
					n++
				}
			}
			return n
		}
		movedWith += moved(pref)
		movedWithout += moved(nil)
	}
	if movedWith*2 > movedWithout {
		t.Errorf("%d items moved with their GPUs given, %d without: want at most half", movedWith, movedWithout)
	}
	t.Logf("%d items moved with their GPUs given, %d without", movedWith, movedWithout)
}

// packTestSet is the A100's feasible set over the profiles of the bench's
// mixes and a +me one (where a greedy search falls short of an exact one),
// and the keys of its multisets in a fixed order.
func packTestSet(t *testing.T) (*feasibleSet, []string) {
	t.Helper()
	fs, err := newFeasibleSet(a100(t), []string{"7g.80gb", "4g.40gb", "3g.40gb", "2g.20gb", "1g.10gb", "1g.20gb", "1g.10gb+me"})
	if err != nil {
		t.Fatal(err)
	}
	var full []string
	for k := range fs.set {
		if k != "x" {
			full = append(full, k)
		}
	}
	slices.Sort(full)
	return fs, full
}
