package mig

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

// TestMediaEngines: GPU instances whose profiles together take more NVJPG or
// OFA engines than the GPU has are refused everywhere a layout is built.
func TestMediaEngines(t *testing.T) {
	a30, a100 := mustModel(t, "A30"), mustModel(t, "A100-SXM4-80GB")
	validate := map[string]struct {
		m      *Model
		layout string
		want   error
	}{
		"A30: two media-extension GIs share one OFA": {a30, "1g.6gb+me@0,2g.12gb+me@2", ErrInvalidLayout},
		"A30: one media-extension GI":                {a30, "1g.6gb+me@0,2g.12gb@2", nil},
		"A30: the other one":                         {a30, "1g.6gb@0,1g.6gb@1,2g.12gb+me@2", nil},
		"A100: a media-extension GI beside others":   {a100, "1g.10gb+me@0,2g.20gb@2,3g.40gb@4", nil},
	}
	for name, tc := range validate {
		t.Run(name, func(t *testing.T) {
			err := tc.m.Validate(MustParseLayout(tc.layout))
			if !errors.Is(err, tc.want) || (err == nil) != (tc.want == nil) {
				t.Fatalf("Validate(%s) = %v, want %v", tc.layout, err, tc.want)
			}
			if err != nil && !strings.Contains(err.Error(), "needs 2 optical flow accelerators and 2 JPEG decoders, the GPU has 1 and 1") {
				t.Errorf("Validate(%s) = %v: the message does not say which engines", tc.layout, err)
			}
		})
	}

	if _, err := a30.Fit(FitRequest{Want: map[string]int{"1g.6gb+me": 1, "2g.12gb+me": 1}}); !errors.Is(err, ErrDoesNotFit) {
		t.Errorf("Fit of both media-extension profiles on an A30 = %v, want ErrDoesNotFit", err)
	}
	for _, l := range a30.MaximalLayouts() {
		if n := len(slices.DeleteFunc(slices.Clone(l), func(d Device) bool { return !strings.HasSuffix(d.Profile, "+me") })); n > 1 {
			t.Errorf("MaximalLayouts offers %s, with %d media-extension GIs", l, n)
		}
	}
	// Beside a 1g.6gb+me, no 2g.12gb+me can be added anywhere.
	order := a30.profilesLargestFirst()
	i := slices.IndexFunc(order, func(p *Profile) bool { return p.Name == "2g.12gb+me" })
	if h := a30.Headroom(MustParseLayout("1g.6gb+me@0")); h[i] != 0 {
		t.Errorf("Headroom beside 1g.6gb+me counts %d placements for 2g.12gb+me, want 0", h[i])
	}
	if !a30.MediaEnginesFit(a30.ProfileByID(21)) || a30.MediaEnginesFit(a30.ProfileByID(21), a30.ProfileByID(6)) {
		t.Errorf("MediaEnginesFit: one media-extension profile must fit, two must not")
	}
}
