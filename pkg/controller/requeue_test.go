package controller

import (
	"testing"
	"time"
)

func TestSoonerKeepsTheShorterDelayAndIgnoresNone(t *testing.T) {
	cases := map[string]struct {
		a, b, want time.Duration
	}{
		"first shorter":           {a: time.Second, b: time.Minute, want: time.Second},
		"second shorter":          {a: time.Minute, b: time.Second, want: time.Second},
		"equal":                   {a: time.Second, b: time.Second, want: time.Second},
		"none then one":           {a: 0, b: time.Minute, want: time.Minute},
		"one then none":           {a: time.Minute, b: 0, want: time.Minute},
		"none at all":             {a: 0, b: 0, want: 0},
		"negative second ignored": {a: time.Minute, b: -time.Second, want: time.Minute},
		"negative first ignored":  {a: -time.Second, b: time.Minute, want: time.Minute},
		"only negatives":          {a: -time.Second, b: -time.Minute, want: 0},
		"none then negative":      {a: 0, b: -time.Second, want: 0},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := sooner(tc.a, tc.b); got != tc.want {
				t.Errorf("sooner(%v, %v) = %v, want %v", tc.a, tc.b, got, tc.want)
			}
		})
	}
}

func TestEarliestKeepsTheEarlierTimeAndIgnoresZero(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	t1 := t0.Add(time.Minute)
	cases := map[string]struct {
		a, b, want time.Time
	}{
		"first earlier":  {a: t0, b: t1, want: t0},
		"second earlier": {a: t1, b: t0, want: t0},
		"equal":          {a: t1, b: t1, want: t1},
		"zero then one":  {a: time.Time{}, b: t1, want: t1},
		"one then zero":  {a: t1, b: time.Time{}, want: t1},
		"both zero":      {want: time.Time{}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := earliest(tc.a, tc.b); !got.Equal(tc.want) {
				t.Errorf("earliest(%v, %v) = %v, want %v", tc.a, tc.b, got, tc.want)
			}
		})
	}
}
