package mig

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestDiffCreateOrder: devices are created largest profile first (most
// compute slices, then most memory) and, of one profile, from the lowest
// placement up.
func TestDiffCreateOrder(t *testing.T) {
	tests := map[string]struct {
		current, desired string
		want             []string
	}{
		"one profile: lowest placement first": {
			desired: "1g.10gb@1,1g.10gb@3,1g.10gb@6", want: []string{"1g.10gb@1", "1g.10gb@3", "1g.10gb@6"},
		},
		"more memory first among profiles of one compute slice": {
			desired: "1g.10gb@0,1g.20gb@2", want: []string{"1g.20gb@2", "1g.10gb@0"},
		},
		"largest profile first, then by placement": {
			current: "1g.10gb@2", desired: "1g.10gb@0,1g.10gb@1,1g.10gb@2,3g.40gb@4",
			want: []string{"3g.40gb@4", "1g.10gb@0", "1g.10gb@1"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			m := mustModel(t, "A100-SXM4-80GB")
			plan := m.Diff(MustParseLayout(tc.current), MustParseLayout(tc.desired))
			var got []string
			for _, d := range plan.Create {
				got = append(got, d.String())
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("create order (-want +got):\n%s", diff)
			}
		})
	}
}
