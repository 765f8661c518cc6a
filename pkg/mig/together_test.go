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
		if got, brute := HoldTogether(models, want), bruteHold(a100, gpus, items); got != brute {
			t.Fatalf("HoldTogether(%d A100s, %v) = %v, brute force %v", gpus, want, got, brute)
		}
	}
}

func bruteHold(m *Model, gpus int, items []string) bool {
	assign := make([]int, len(items))
	var rec func(i int) bool
	rec = func(i int) bool {
		if i == len(items) {
			for g := range gpus {
				want := map[string]int{}
				for k, p := range items {
					if assign[k] == g {
						want[p]++
					}
				}
				if _, err := m.Fit(FitRequest{Want: want}); err != nil {
					return false
				}
			}
			return true
		}
		for g := range gpus {
			assign[i] = g
			if rec(i + 1) {
				return true
			}
		}
		return false
	}
	return rec(0)
}
