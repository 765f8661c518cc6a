package mig

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestFitFewerThanCurrent: asking for fewer devices of a profile than the
// GPU holds destroys only the ones the count forces out. That needs no
// move, so it succeeds without moves too, and counts no move; the devices
// that go are those whose going leaves the most room for large profiles.
func TestFitFewerThanCurrent(t *testing.T) {
	type result struct {
		Layout, Destroyed string
		Moves             int
	}
	tests := map[string]struct {
		want       map[string]int
		current    string
		allowMoves bool
		wantResult result
	}{
		"without moves": {
			want: map[string]int{"1g.10gb": 1}, current: "1g.10gb@0,1g.10gb@6",
			wantResult: result{Layout: "1g.10gb@6", Destroyed: "1g.10gb@0"},
		},
		"with moves": {
			want: map[string]int{"1g.10gb": 1}, current: "1g.10gb@0,1g.10gb@6", allowMoves: true,
			wantResult: result{Layout: "1g.10gb@6", Destroyed: "1g.10gb@0"},
		},
		// Keeping 1g.10gb@2 and @3 leaves 0-1 and 4-7 free (a 3g.40gb
		// and a 2g.20gb still fit); keeping @0 and @2 would not leave a
		// 2g.20gb at 0.
		"the device whose going leaves most room goes": {
			want: map[string]int{"1g.10gb": 2}, current: "1g.10gb@0,1g.10gb@2,1g.10gb@3", allowMoves: true,
			wantResult: result{Layout: "1g.10gb@2,1g.10gb@3", Destroyed: "1g.10gb@0"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			m := mustModel(t, "A100-SXM4-80GB")
			got, err := m.Fit(FitRequest{Want: tc.want, Current: MustParseLayout(tc.current), AllowMoves: tc.allowMoves})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.wantResult, result{got.Layout.String(), got.Destroyed.String(), got.Moves}); diff != "" {
				t.Errorf("fit (-want +got):\n%s", diff)
			}
		})
	}
}

// TestFitPinnedOutsideCurrent: a device to keep that the GPU does not hold
// is an invalid request, not something Fit creates.
func TestFitPinnedOutsideCurrent(t *testing.T) {
	m := mustModel(t, "A100-SXM4-80GB")
	_, err := m.Fit(FitRequest{Want: map[string]int{"3g.40gb": 2}, Current: MustParseLayout("3g.40gb@0"), Pinned: MustParseLayout("3g.40gb@4"), AllowMoves: true})
	if !errors.Is(err, ErrInvalidLayout) {
		t.Errorf("Fit error = %v, want one wrapping %v", err, ErrInvalidLayout)
	}
}
