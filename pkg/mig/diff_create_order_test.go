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

// TestDiffCreateOrderMemoryThenName: among profiles of one compute slice
// the one with more memory is created first even where its name sorts
// first ("1g.10gb" before "1g.5gb" on an A100-SXM4-40GB), and of two
// profiles equal in both the one whose name sorts last goes first
// ("1g.10gb+me" before "1g.10gb"), whatever their placements.
func TestDiffCreateOrderMemoryThenName(t *testing.T) {
	tests := map[string]struct {
		model, desired string
		want           []string
	}{
		"more memory first though its name sorts first": {
			model: "A100-SXM4-40GB", desired: "1g.5gb@0,1g.10gb@6",
			want: []string{"1g.10gb@6", "1g.5gb@0"},
		},
		"same size: by name, last first": {
			model: "A100-SXM4-80GB", desired: "1g.10gb@0,1g.10gb+me@6",
			want: []string{"1g.10gb+me@6", "1g.10gb@0"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			m := mustModel(t, tc.model)
			var got []string
			for _, d := range m.Diff(nil, MustParseLayout(tc.desired)).Create {
				got = append(got, d.String())
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("create order (-want +got):\n%s", diff)
			}
		})
	}
}

// TestPlanEmpty: a plan is empty only when it neither destroys nor
// creates a device.
func TestPlanEmpty(t *testing.T) {
	tests := map[string]struct {
		current, desired string
		want             bool
	}{
		"same layout":   {current: "3g.40gb@0,3g.40gb@4", desired: "3g.40gb@4,3g.40gb@0", want: true},
		"only creates":  {current: "3g.40gb@0", desired: "3g.40gb@0,3g.40gb@4"},
		"only destroys": {current: "3g.40gb@0,3g.40gb@4", desired: "3g.40gb@0"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			m := mustModel(t, "A100-SXM4-80GB")
			if got := m.Diff(MustParseLayout(tc.current), MustParseLayout(tc.desired)).Empty(); got != tc.want {
				t.Errorf("Empty() = %t, want %t", got, tc.want)
			}
		})
	}
}
