package mig

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestHeadroomOrder: Headroom lists the placements left for each profile
// from the largest to the smallest: most compute slices first, then most
// memory (1g.20gb before 1g.10gb), then by name.
func TestHeadroomOrder(t *testing.T) {
	tests := map[string]struct {
		layout string
		want   []int // 7g.80gb, 4g.40gb, 3g.40gb, 2g.20gb, 1g.20gb, 1g.10gb, 1g.10gb+me
	}{
		"empty GPU":              {layout: "", want: []int{1, 1, 2, 3, 4, 7, 7}},
		"a 3g.40gb on the right": {layout: "3g.40gb@4", want: []int{0, 1, 1, 2, 2, 4, 4}},
		// Its only instance made, 1g.10gb+me has no room left while
		// 1g.10gb has; the two keep their places in the vector.
		"a 1g.10gb+me at slice 6": {layout: "1g.10gb+me@6", want: []int{0, 1, 1, 3, 3, 6, 0}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			m := mustModel(t, "A100-SXM4-80GB")
			if diff := cmp.Diff(tc.want, m.Headroom(MustParseLayout(tc.layout))); diff != "" {
				t.Errorf("Headroom(%q) (-want +got):\n%s", tc.layout, diff)
			}
		})
	}
}

// TestParseLayoutBounds: a blank layout is the empty layout, and placement
// starts run from 0 to 63.
func TestParseLayoutBounds(t *testing.T) {
	tests := map[string]struct {
		in      string
		want    Layout
		wantErr bool
	}{
		"blank":    {in: "  ", want: Layout{}},
		"start 63": {in: "1g.10gb@63", want: Layout{{"1g.10gb", 63}}},
		"start 64": {in: "1g.10gb@64", wantErr: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := ParseLayout(tc.in)
			if (err != nil) != tc.wantErr {
				t.Fatalf("ParseLayout(%q) error = %v, want error %v", tc.in, err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("ParseLayout(%q) (-want +got):\n%s", tc.in, diff)
			}
		})
	}
}

// TestRoomLost: the room a device takes from an otherwise empty GPU, by
// profile from the largest down; nil for a device the model cannot make.
func TestRoomLost(t *testing.T) {
	tests := map[string]struct {
		device Device
		want   []int // 7g.80gb, 4g.40gb, 3g.40gb, 2g.20gb, 1g.20gb, 1g.10gb, 1g.10gb+me
	}{
		// 1g.10gb+me and 1g.20gb count their own max (one each) too.
		"1g.10gb in the 4g.40gb placement": {device: Device{"1g.10gb", 0}, want: []int{1, 1, 1, 1, 1, 1, 1}},
		"1g.10gb at slice 4":               {device: Device{"1g.10gb", 4}, want: []int{1, 0, 1, 1, 1, 1, 1}},
		"1g.10gb at slice 6":               {device: Device{"1g.10gb", 6}, want: []int{1, 0, 1, 0, 1, 1, 1}},
		"3g.40gb on the left":              {device: Device{"3g.40gb", 0}, want: []int{1, 1, 1, 2, 2, 4, 4}},
		"3g.40gb on the right":             {device: Device{"3g.40gb", 4}, want: []int{1, 0, 1, 1, 2, 3, 3}},
		"no such placement":                {device: Device{"4g.40gb", 4}, want: nil},
		"no such profile":                  {device: Device{"5g.50gb", 0}, want: nil},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			m := mustModel(t, "A100-SXM4-80GB")
			if diff := cmp.Diff(tc.want, m.RoomLost(tc.device)); diff != "" {
				t.Errorf("RoomLost(%s) (-want +got):\n%s", tc.device, diff)
			}
		})
	}
}

// TestWhole: the GPU as one device of its largest profile.
func TestWhole(t *testing.T) {
	for model, want := range map[string]Device{
		"A100-SXM4-80GB": {"7g.80gb", 0},
		"A30-24GB":       {"4g.24gb", 0},
	} {
		m := mustModel(t, model)
		if got, ok := m.Whole(); !ok || got != want {
			t.Errorf("%s: Whole() = %v, %t; want %v", model, got, ok, want)
		}
	}
}
