package mig

import "testing"

// TestPlacementOverlaps: two placements overlap where they share a memory
// slice, whichever comes first; placements side by side do not.
func TestPlacementOverlaps(t *testing.T) {
	tests := map[string]struct {
		p, q Placement
		want bool
	}{
		"side by side":       {p: Placement{Start: 0, Size: 4}, q: Placement{Start: 4, Size: 4}, want: false},
		"side by side, swap": {p: Placement{Start: 4, Size: 4}, q: Placement{Start: 0, Size: 4}, want: false},
		"one slice shared":   {p: Placement{Start: 0, Size: 4}, q: Placement{Start: 3, Size: 2}, want: true},
		"one inside another": {p: Placement{Start: 0, Size: 8}, q: Placement{Start: 6, Size: 1}, want: true},
		"apart":              {p: Placement{Start: 0, Size: 1}, q: Placement{Start: 6, Size: 2}, want: false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := tc.p.Overlaps(tc.q); got != tc.want {
				t.Errorf("%+v.Overlaps(%+v) = %v, want %v", tc.p, tc.q, got, tc.want)
			}
		})
	}
}
