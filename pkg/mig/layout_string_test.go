package mig

import (
	"slices"
	"testing"
)

// TestLayoutStringIsCanonical: a layout's text lists its devices by
// placement start, then profile name, whatever their order in the slice,
// and leaves the layout as it was.
func TestLayoutStringIsCanonical(t *testing.T) {
	for want, l := range map[string]Layout{
		"":                                  nil,
		"7g.80gb@0":                         {{"7g.80gb", 0}},
		"3g.40gb@0,2g.20gb@4,1g.10gb@6":     {{"1g.10gb", 6}, {"3g.40gb", 0}, {"2g.20gb", 4}},
		"1g.10gb@0,1g.10gb+me@0,1g.20gb@12": {{"1g.20gb", 12}, {"1g.10gb+me", 0}, {"1g.10gb", 0}},
	} {
		before := slices.Clone(l)
		if got := l.String(); got != want {
			t.Errorf("%v.String() = %q, want %q", before, got, want)
		}
		if !slices.Equal(before, l) {
			t.Errorf("String reordered the layout: %v, was %v", l, before)
		}
	}
}
