package mig

import (
	"math/rand/v2"
	"testing"
)

func TestHoldTogether(t *testing.T) {
	a100, a30 := mustModel(t, "A100-SXM4-80GB"), mustModel(t, "A30")
	tests := map[string]struct {
		models []*Model
		want   map[string]int
		ok     bool
	}{
		"nothing wanted":                    {models: nil, want: map[string]int{}, ok: true},
		"no GPU":                            {models: nil, want: map[string]int{"1g.10gb": 1}, ok: false},
		"two 3g fill an A100":               {models: []*Model{a100}, want: map[string]int{"3g.40gb": 2}, ok: true},
		"two 3g leave no memory for a 1g":   {models: []*Model{a100}, want: map[string]int{"3g.40gb": 2, "1g.10gb": 1}, ok: false},
		"a 4g and a 3g share an A100":       {models: []*Model{a100}, want: map[string]int{"4g.40gb": 1, "3g.40gb": 1}, ok: true},
		"one 4g per A100":                   {models: []*Model{a100}, want: map[string]int{"4g.40gb": 2}, ok: false},
		"each fits alone, not all together": {models: []*Model{a100, a100}, want: map[string]int{"7g.80gb": 1, "4g.40gb": 2}, ok: false},
		"7g, 4g and 3g on two A100s":        {models: []*Model{a100, a100}, want: map[string]int{"7g.80gb": 1, "4g.40gb": 1, "3g.40gb": 1}, ok: true},
		"fourteen 1g on two A100s":          {models: []*Model{a100, a100}, want: map[string]int{"1g.10gb": 14}, ok: true},
		"fifteen 1g on two A100s":           {models: []*Model{a100, a100}, want: map[string]int{"1g.10gb": 15}, ok: false},
		"a profile no model offers":         {models: []*Model{a100}, want: map[string]int{"2g.12gb": 1}, ok: false},
		"each model takes its own profile":  {models: []*Model{a30, a100}, want: map[string]int{"2g.12gb": 1, "3g.40gb": 1}, ok: true},
		"a zero count asks for nothing":     {models: []*Model{a100}, want: map[string]int{"7g.80gb": 1, "1g.10gb": 0}, ok: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := HoldTogether(tc.models, tc.want); got != tc.ok {
				t.Errorf("HoldTogether = %v, want %v", got, tc.ok)
			}
		})
	}
}

// TestHoldTogetherAgainstBruteForce compares HoldTogether with trying every
// assignment of the wanted devices to two or three A100s, each GPU checked
// with Fit.
func TestHoldTogetherAgainstBruteForce(t *testing.T) {
	a100 := mustModel(t, "A100-SXM4-80GB")
	profiles := []string{"1g.10gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 300 {
		gpus := 2 + rng.IntN(2)
		want := map[string]int{}
		var items []string
		for range 1 + rng.IntN(7) {
			p := profiles[rng.IntN(len(profiles))]
			want[p]++
			items = append(items, p)
		}
		models := make([]*Model, gpus)
		for i := range models {
			models[i] = a100
		}
		if got, brute := HoldTogether(models, want), bruteHoldModels(repeatModel(a100, gpus), items); got != brute {
			t.Fatalf("HoldTogether(%d A100s, %v) = %v, brute force %v", gpus, want, got, brute)
		}
	}
}

// TestHoldTogetherSearchIsBounded: spares an Auto MigLayout may ask for on
// nodes of 16 GPUs (each count fits alone) are decided in a bounded search
// (it once took seconds and 1.4 GiB): GPUs of one model are tried in one
// order, the bounds on what the GPUs left can hold cut most of it, and a
// search that still runs past holdTogetherSteps gives up, answering true.
func TestHoldTogetherSearchIsBounded(t *testing.T) {
	a100, h100 := mustModel(t, "A100-SXM4-80GB"), mustModel(t, "H100-SXM5-80GB")
	mixed := make([]*Model, 16)
	for i := range mixed {
		mixed[i] = []*Model{a100, h100}[i%2]
	}
	tests := map[string]struct {
		models   []*Model
		spares   map[string]int
		ok       bool
		maxSteps int
	}{
		"more memory slices than 16 A100s have": {models: repeatModel(a100, 16),
			spares: map[string]int{"1g.10gb": 18, "1g.10gb+me": 5, "1g.20gb": 29, "2g.20gb": 7, "3g.40gb": 5, "7g.80gb": 2}, maxSteps: 1},
		"the same on 15 A100s and an H100 between": {models: append(append(repeatModel(a100, 7), h100), repeatModel(a100, 8)...),
			spares: map[string]int{"1g.10gb": 18, "1g.10gb+me": 5, "1g.20gb": 29, "2g.20gb": 7, "3g.40gb": 5, "7g.80gb": 2}, maxSteps: 1},
		"fits 16 A100s": {models: repeatModel(a100, 16),
			spares: map[string]int{"1g.10gb": 18, "1g.10gb+me": 5, "1g.20gb": 10, "2g.20gb": 7, "3g.40gb": 5, "7g.80gb": 2}, ok: true, maxSteps: 100},
		"fits 8 A100s and 8 H100s, mixed": {models: mixed,
			spares: map[string]int{"1g.10gb": 18, "1g.10gb+me": 5, "1g.20gb": 10, "2g.20gb": 7, "3g.40gb": 5, "7g.80gb": 2}, ok: true, maxSteps: 100},
		// Thirteen 4g.40gb and two 7g.80gb leave the small devices a
		// tight fit on the 3 compute slices beside each 4g.40gb: the
		// search gives up.
		"too hard to tell": {models: repeatModel(a100, 16),
			spares: map[string]int{"1g.10gb": 19, "1g.10gb+me": 6, "1g.20gb": 8, "2g.20gb": 2, "3g.40gb": 1, "4g.40gb": 13, "7g.80gb": 2}, ok: true, maxSteps: holdTogetherSteps + 1},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			ok, steps := holdTogether(tc.models, tc.spares)
			if ok != tc.ok {
				t.Errorf("HoldTogether = %v, want %v", ok, tc.ok)
			}
			if steps > tc.maxSteps {
				t.Errorf("%d steps, want at most %d", steps, tc.maxSteps)
			}
		})
	}
}

// TestHoldTogetherAgainstBruteForceMixed is TestHoldTogetherAgainstBruteForce
// on GPUs of two models in any order: trying one model's GPUs in one
// order only loses no answer.
func TestHoldTogetherAgainstBruteForceMixed(t *testing.T) {
	a100, a30 := mustModel(t, "A100-SXM4-80GB"), mustModel(t, "A30")
	profiles := []string{"1g.6gb", "1g.10gb", "2g.12gb", "2g.20gb", "3g.40gb", "4g.24gb", "7g.80gb"}
	rng := rand.New(rand.NewPCG(5, 6))
	for range 300 {
		var models []*Model
		for range 2 + rng.IntN(2) {
			models = append(models, []*Model{a100, a30}[rng.IntN(2)])
		}
		want := map[string]int{}
		var items []string
		for range 1 + rng.IntN(6) {
			p := profiles[rng.IntN(len(profiles))]
			want[p]++
			items = append(items, p)
		}
		if got, brute := HoldTogether(models, want), bruteHoldModels(models, items); got != brute {
			t.Fatalf("HoldTogether(%v, %v) = %v, brute force %v", modelNames(models), want, got, brute)
		}
	}
}

func repeatModel(m *Model, n int) []*Model {
	out := make([]*Model, n)
	for i := range out {
		out[i] = m
	}
	return out
}

func modelNames(models []*Model) []string {
	var out []string
	for _, m := range models {
		out = append(out, m.Name)
	}
	return out
}

// bruteHoldModels tries every assignment of items to the GPUs of models,
// each GPU checked with Fit (a profile its model lacks fits none).
func bruteHoldModels(models []*Model, items []string) bool {
	assign := make([]int, len(items))
	var rec func(i int) bool
	rec = func(i int) bool {
		if i == len(items) {
			for g, m := range models {
				want := map[string]int{}
				for k, p := range items {
					if assign[k] == g {
						want[p]++
					}
				}
				if len(want) == 0 {
					continue
				}
				if _, err := m.Fit(FitRequest{Want: want}); err != nil {
					return false
				}
			}
			return true
		}
		for g := range models {
			assign[i] = g
			if rec(i + 1) {
				return true
			}
		}
		return false
	}
	return rec(0)
}

// TestHoldTogetherMemo: an answer is kept, and asked again with the GPUs in
// another order or the counts in another map, it is the same.
func TestHoldTogetherMemo(t *testing.T) {
	a100, a30 := mustModel(t, "A100-SXM4-80GB"), mustModel(t, "A30")
	want := map[string]int{"2g.12gb": 1, "3g.40gb": 2}
	first := HoldTogether([]*Model{a30, a100}, want)
	if !first {
		t.Fatal("an A30's 2g.12gb and an A100's two 3g.40gb do not fit")
	}
	if again := HoldTogether([]*Model{a100, a30}, map[string]int{"3g.40gb": 2, "2g.12gb": 1}); again != first {
		t.Errorf("asked again in another order: %v, want %v", again, first)
	}
	if HoldTogether([]*Model{a100, a30}, map[string]int{"3g.40gb": 3, "2g.12gb": 1}) {
		t.Error("three 3g.40gb on one A100: the answer of other counts was taken")
	}
	m := &boundedMemo{max: 2}
	m.put("a", true)
	m.put("b", false)
	m.put("c", true)
	if _, ok := m.get("a"); ok {
		t.Error("a memo over its size kept its entries")
	}
	if v, ok := m.get("c"); !ok || !v {
		t.Errorf("the entry put last: %v, %v", v, ok)
	}
}
