package mig

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseLayout(t *testing.T) {
	tests := map[string]struct {
		in      string
		want    Layout
		wantErr string
	}{
		"empty":            {in: "", want: Layout{}},
		"canonical":        {in: "3g.40gb@0,2g.20gb@4,1g.10gb@6", want: Layout{{"3g.40gb", 0}, {"2g.20gb", 4}, {"1g.10gb", 6}}},
		"any order, space": {in: " 1g.10gb@6 , 3g.40gb@0", want: Layout{{"3g.40gb", 0}, {"1g.10gb", 6}}},
		"media extension":  {in: "1g.10gb+me@3", want: Layout{{"1g.10gb+me", 3}}},
		"missing at":       {in: "3g.40gb@0,2g.20gb", wantErr: `syntax error: layout "3g.40gb@0,2g.20gb": element 2 "2g.20gb": missing "@<placement start>"`},
		"bad start":        {in: "3g.40gb@x", wantErr: `syntax error: layout "3g.40gb@x": element 1 "3g.40gb@x": placement start "x" is not a number in 0..63`},
		"leading zero":     {in: "3g.40gb@04", wantErr: `syntax error: layout "3g.40gb@04": element 1 "3g.40gb@04": placement start "04" is not a number in 0..63`},
		"negative":         {in: "1g.10gb@-1", wantErr: `syntax error: layout "1g.10gb@-1": element 1 "1g.10gb@-1": placement start "-1" is not a number in 0..63`},
		"bad profile":      {in: "3x.40gb@0", wantErr: `syntax error: layout "3x.40gb@0": element 1 "3x.40gb@0": profile "3x.40gb" is not of the form <N>g.<M>gb[+me]`},
		"empty element":    {in: "3g.40gb@0,,1g.10gb@6", wantErr: `syntax error: layout "3g.40gb@0,,1g.10gb@6": element 2 "": empty element`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := ParseLayout(tc.in)
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr || !errors.Is(err, ErrSyntax) {
					t.Fatalf("ParseLayout(%q) error = %v, want %q wrapping ErrSyntax", tc.in, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want.Canonical(), got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			if back, err := ParseLayout(got.String()); err != nil || !back.Equal(got) {
				t.Errorf("round trip of %q: %v, %v", got.String(), back, err)
			}
		})
	}
}

func TestValidate(t *testing.T) {
	a100 := mustModel(t, "A100-SXM4-80GB")
	tests := map[string]struct {
		layout  string
		wantErr string
		is      error
	}{
		"full 7g":         {layout: "7g.80gb@0"},
		"4g+3g":           {layout: "4g.40gb@0,3g.40gb@4"},
		"seven 1g":        {layout: "1g.10gb@0,1g.10gb@1,1g.10gb@2,1g.10gb@3,1g.10gb@4,1g.10gb@5,1g.10gb@6"},
		"3g+2g+1g+1g":     {layout: "2g.20gb@0,1g.10gb@2,1g.10gb@3,3g.40gb@4"},
		"overlap":         {layout: "3g.40gb@0,4g.40gb@0", is: ErrInvalidLayout, wantErr: `invalid layout: layout "3g.40gb@0,4g.40gb@0" on A100-SXM4-80GB: 4g.40gb@0 overlaps 3g.40gb@0 on memory slices 0-3`},
		"partial overlap": {layout: "2g.20gb@2,1g.20gb@2", is: ErrInvalidLayout, wantErr: `invalid layout: layout "1g.20gb@2,2g.20gb@2" on A100-SXM4-80GB: 2g.20gb@2 overlaps 1g.20gb@2 on memory slices 2-3`},
		"bad placement":   {layout: "1g.10gb@7", is: ErrInvalidLayout, wantErr: `invalid layout: layout "1g.10gb@7" on A100-SXM4-80GB: 1g.10gb@7: start 7 is not a valid placement for 1g.10gb (valid starts: 0,1,2,3,4,5,6)`},
		"3g at 2":         {layout: "3g.40gb@2", is: ErrInvalidLayout, wantErr: `invalid layout: layout "3g.40gb@2" on A100-SXM4-80GB: 3g.40gb@2: start 2 is not a valid placement for 3g.40gb (valid starts: 0,4)`},
		"two +me":         {layout: "1g.10gb+me@0,1g.10gb+me@1", is: ErrInvalidLayout, wantErr: `invalid layout: layout "1g.10gb+me@0,1g.10gb+me@1" on A100-SXM4-80GB: 2 instances of 1g.10gb+me, at most 1 allowed`},
		"compute budget":  {layout: "4g.40gb@0,2g.20gb@4,1g.20gb@6,1g.10gb@6", is: ErrInvalidLayout, wantErr: `invalid layout: layout "4g.40gb@0,2g.20gb@4,1g.10gb@6,1g.20gb@6" on A100-SXM4-80GB: 1g.20gb@6 overlaps 1g.10gb@6 on memory slices 6`},
		"3g+3g":           {layout: "3g.40gb@0,3g.40gb@4"},
		"unknown profile": {layout: "3g.20gb@0", is: ErrUnknownProfile, wantErr: `layout "3g.20gb@0": unknown profile "3g.20gb" on A100-SXM4-80GB (valid: 1g.10gb, 1g.10gb+me, 1g.20gb, 2g.20gb, 3g.40gb, 4g.40gb, 7g.80gb)`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			err := a100.Validate(MustParseLayout(tc.layout))
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("Validate(%q) = %v, want nil", tc.layout, err)
				}
				return
			}
			if err == nil || err.Error() != tc.wantErr || !errors.Is(err, tc.is) {
				t.Fatalf("Validate(%q) =\n  %v\nwant\n  %s", tc.layout, err, tc.wantErr)
			}
		})
	}
	// The compute-slice budget on its own: 4g + 2g + 1g.20gb uses 7 slices and
	// all 8 memory slices; a 7-compute-slice A30-like overflow needs A30.
	a30 := mustModel(t, "A30")
	if err := a30.Validate(MustParseLayout("2g.12gb@0,2g.12gb+me@2")); err != nil {
		t.Errorf("A30 2g+2g+me: %v", err)
	}
	// 4 compute slices on A30 are exhausted by 4g; nothing else may be added.
	if err := a30.Validate(MustParseLayout("4g.24gb@0,1g.6gb@0")); !errors.Is(err, ErrInvalidLayout) {
		t.Errorf("A30 4g+1g: %v, want ErrInvalidLayout", err)
	}
}

func TestValidateComputeBudget(t *testing.T) {
	// A made-up model whose memory slices outnumber its compute budget by more
	// than the real ones, so that the budget check is the only one that fires.
	m := &Model{Name: "test", MemoryMiB: 8, MemorySlices: 8, ComputeSlices: 3, MaxInstances: 7, Profiles: []Profile{
		{Name: "1g.1gb", ID: 1, ComputeSlices: 1, MemorySlices: 1, MaxCount: 7, MemoryMiB: 1, Placements: []Placement{{0, 1}, {1, 1}, {2, 1}, {3, 1}}},
		{Name: "2g.2gb", ID: 2, ComputeSlices: 2, MemorySlices: 2, MaxCount: 3, MemoryMiB: 2, Placements: []Placement{{4, 2}, {6, 2}}},
	}}
	if err := m.init(); err != nil {
		t.Fatal(err)
	}
	err := m.Validate(MustParseLayout("1g.1gb@0,1g.1gb@1,2g.2gb@4"))
	want := `invalid layout: layout "1g.1gb@0,1g.1gb@1,2g.2gb@4" on test: needs 4 compute slices, the GPU has 3`
	if err == nil || err.Error() != want {
		t.Errorf("Validate = %v, want %s", err, want)
	}
}

func FuzzParseLayout(f *testing.F) {
	for _, s := range []string{"", "3g.40gb@0,2g.20gb@4,1g.10gb@6", "1g.10gb+me@3", "7g.80gb@0", "x@", ",,", "1g.5gb@1,1g.5gb@1"} {
		f.Add(s)
	}
	a100 := mustModel(f, "A100-SXM4-80GB")
	f.Fuzz(func(t *testing.T, s string) {
		l, err := ParseLayout(s)
		if err != nil {
			if !errors.Is(err, ErrSyntax) {
				t.Fatalf("ParseLayout(%q) error %v does not wrap ErrSyntax", s, err)
			}
			return
		}
		back, err := ParseLayout(l.String())
		if err != nil || !back.Equal(l) || back.String() != l.String() {
			t.Fatalf("round trip %q -> %q -> %v, %v", s, l.String(), back, err)
		}
		_ = a100.Validate(l) // must not panic
	})
}

// TestValidateKeeping: a GPU instance of a profile the catalog lacks may
// stay where NVML holds it, counted with its memory slices, compute slices
// and instance against the rest; never created.
func TestValidateKeeping(t *testing.T) {
	a100, err := DefaultCatalog().Model("A100-SXM4-80GB")
	if err != nil {
		t.Fatal(err)
	}
	held := map[Device]HeldInstance{{Profile: "1g.10gb-me", Start: 6}: {Placement: Placement{Start: 6, Size: 1}},
		{Profile: "2g.20gb-me", Start: 4}: {Placement: Placement{Start: 4, Size: 2}},
		{Profile: "4g.40gb-me", Start: 4}: {Placement: Placement{Start: 4, Size: 4}},
		// A newer driver's profile with all the media engines (one NVJPG,
		// one OFA on an A100).
		{Profile: "1g.10gb+me.all", Start: 0}: {Placement: Placement{Start: 0, Size: 1}, JPEGEngines: 1, OFAEngines: 1},
		// Profiles with one kind of media engine each.
		{Profile: "1g.10gb+gfx", Start: 1}: {Placement: Placement{Start: 1, Size: 1}, JPEGEngines: 1},
		{Profile: "2g.20gb+gfx", Start: 2}: {Placement: Placement{Start: 2, Size: 2}, OFAEngines: 1}}
	for layout, want := range map[string]error{
		"4g.40gb@0,1g.10gb-me@6":               nil,
		"4g.40gb@0,1g.10gb@5,1g.10gb-me@6":     nil,
		"4g.40gb@0,2g.20gb-me@4,1g.10gb-me@6":  nil,
		"1g.10gb-me@5":                         ErrUnknownProfile, // not held there: never created
		"4g.40gb@0,3g.40gb@4,1g.10gb-me@6":     ErrInvalidLayout,  // over it
		"4g.40gb@4,1g.10gb-me@6":               ErrInvalidLayout,  // catalogued part invalid on its own
		"3g.40gb@0,2g.20gb-me@4,1g.10gb-me@6":  nil,
		"4g.40gb@0,1g.10gb@4,2g.20gb-me@4":     ErrInvalidLayout, // the kept 2g holds slices 4-5
		"4g.40gb@0,4g.40gb-me@4":               ErrInvalidLayout, // 8 compute slices
		"1g.10gb+me.all@0,1g.10gb@1,3g.40gb@4": nil,
		"1g.10gb+me.all@0,1g.10gb+me@1":        ErrInvalidLayout, // the kept one has the OFA and NVJPG
		"1g.10gb+gfx@1,1g.10gb+me@0":           ErrInvalidLayout, // the kept one has the NVJPG
		"2g.20gb+gfx@2,1g.10gb+me@0":           ErrInvalidLayout, // the kept one has the OFA
		"2g.20gb-me@4,4g.40gb-me@4":            ErrInvalidLayout, // two kept ones overlap
		"1g.10gb@0,2g.20gb@0,1g.10gb-me@6":     ErrInvalidLayout, // catalogued devices overlap
	} {
		err := a100.ValidateKeeping(MustParseLayout(layout), held)
		if want == nil && err != nil || want != nil && !errors.Is(err, want) {
			t.Errorf("ValidateKeeping(%s) = %v, want %v", layout, err, want)
		}
	}
}

// TestValidateKeepingCountsInstances: a kept GPU instance counts as one
// against the GPU's instance limit even where its name gives no compute
// slices to count.
func TestValidateKeepingCountsInstances(t *testing.T) {
	a100, err := DefaultCatalog().Model("A100-SXM4-80GB")
	if err != nil {
		t.Fatal(err)
	}
	odd := Device{Profile: "odd", Start: 7}
	held := map[Device]HeldInstance{odd: {Placement: Placement{Start: 7, Size: 1}}}
	l := append(MustParseLayout("1g.10gb@0,1g.10gb@1,1g.10gb@2,1g.10gb@3,1g.10gb@4,1g.10gb@5,1g.10gb@6"), odd)
	if err := a100.ValidateKeeping(l, held); !errors.Is(err, ErrInvalidLayout) || !strings.Contains(err.Error(), "8 GPU instances, at most 7 allowed") {
		t.Errorf("ValidateKeeping(%s) = %v, want ErrInvalidLayout for 8 GPU instances", l, err)
	}
}
