package mig

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestFit(t *testing.T) {
	tests := map[string]struct {
		model      string
		want       map[string]int
		current    string
		pinned     string
		allowMoves bool
		avoid      []Placement
		forbid     string

		wantLayout  string
		wantMoves   int
		wantDestroy string
		wantErr     string // substring; the error must wrap ErrDoesNotFit unless wantIs says otherwise
		wantIs      error
	}{
		"empty GPU, 3g+2g+1g+1g goes where a 1g has a valid placement": {
			model: "A100-SXM4-80GB", want: map[string]int{"3g.40gb": 1, "2g.20gb": 1, "1g.10gb": 2},
			wantLayout: "2g.20gb@0,1g.10gb@2,1g.10gb@3,3g.40gb@4",
		},
		"single 1g keeps 4g and 3g placements free": {
			model: "A100-SXM4-80GB", want: map[string]int{"1g.10gb": 1},
			wantLayout: "1g.10gb@6",
		},
		"1g at 0,1,5 block a 3g although four slices are free: one move": {
			model: "A100-SXM4-80GB", want: map[string]int{"1g.10gb": 3, "3g.40gb": 1},
			current: "1g.10gb@0,1g.10gb@1,1g.10gb@5", allowMoves: true,
			wantLayout: "1g.10gb@0,1g.10gb@1,1g.10gb@2,3g.40gb@4", wantMoves: 1, wantDestroy: "1g.10gb@5",
		},
		"1g at 0,1,5 block a 3g: no moves allowed": {
			model: "A100-SXM4-80GB", want: map[string]int{"1g.10gb": 3, "3g.40gb": 1},
			current: "1g.10gb@0,1g.10gb@1,1g.10gb@5",
			wantErr: `does not fit on A100-SXM4-80GB: {3g.40gb:1, 1g.10gb:3}: no arrangement holds it around "1g.10gb@0,1g.10gb@1,1g.10gb@5" without moving a device`,
		},
		"1g at 5 pinned: the 3g goes to 0 and the free 1g move": {
			model: "A100-SXM4-80GB", want: map[string]int{"1g.10gb": 3, "3g.40gb": 1},
			current: "1g.10gb@0,1g.10gb@1,1g.10gb@5", pinned: "1g.10gb@5", allowMoves: true,
			wantLayout: "3g.40gb@0,1g.10gb@4,1g.10gb@5,1g.10gb@6", wantMoves: 2, wantDestroy: "1g.10gb@0,1g.10gb@1",
		},
		"unchanged layout: nothing moves": {
			model: "A100-SXM4-80GB", want: map[string]int{"3g.40gb": 2},
			current: "3g.40gb@0,3g.40gb@4", allowMoves: true,
			wantLayout: "3g.40gb@0,3g.40gb@4",
		},
		"profiles no longer wanted are destroyed without counting as moves": {
			model: "A100-SXM4-80GB", want: map[string]int{"3g.40gb": 1},
			current:    "7g.80gb@0",
			wantLayout: "3g.40gb@4", wantDestroy: "7g.80gb@0",
		},
		"pinned device outside the wanted multiset": {
			model: "A100-SXM4-80GB", want: map[string]int{"7g.80gb": 1},
			current: "3g.40gb@0", pinned: "3g.40gb@0", allowMoves: true,
			wantErr: "3g.40gb@0 must stay (in use) but the wanted layout has 0 of 3g.40gb",
		},
		"three 3g on an A100": {
			model: "A100-SXM4-80GB", want: map[string]int{"3g.40gb": 3},
			wantErr: "3 instances of 3g.40gb, at most 2 fit",
		},
		"compute budget": {
			model: "H100-SXM5-80GB", want: map[string]int{"4g.40gb": 1, "3g.40gb": 1, "1g.10gb": 1},
			wantErr: "needs 8 compute slices, the GPU has 7",
		},
		"unknown profile": {
			model: "A100-SXM4-80GB", want: map[string]int{"3g.20gb": 1},
			wantErr: `unknown profile "3g.20gb"`, wantIs: ErrUnknownProfile,
		},
		"nothing wanted: every free device goes": {
			model: "A100-SXM4-80GB", want: map[string]int{}, current: "3g.40gb@0,3g.40gb@4",
			wantLayout: "", wantDestroy: "3g.40gb@0,3g.40gb@4",
		},
		"forbid: a 3g goes to the half where it may be created": {
			model: "A100-SXM4-80GB", want: map[string]int{"3g.40gb": 1}, forbid: "3g.40gb@4",
			wantLayout: "3g.40gb@0",
		},
		"forbid: a current device may stay": {
			model: "A100-SXM4-80GB", want: map[string]int{"3g.40gb": 2}, current: "3g.40gb@4", forbid: "3g.40gb@4",
			wantLayout: "3g.40gb@0,3g.40gb@4",
		},
		"forbid: no arrangement without the forbidden device": {
			model: "A100-SXM4-80GB", want: map[string]int{"7g.80gb": 1}, forbid: "7g.80gb@0",
			wantErr: "no arrangement holds it without creating a device it may not (7g.80gb@0)",
		},
		"avoid: a 1g stays out of the left half kept for a 4g": {
			model: "A100-SXM4-80GB", want: map[string]int{"2g.20gb": 1, "1g.10gb": 1},
			current: "2g.20gb@0", pinned: "2g.20gb@0", avoid: []Placement{{Start: 0, Size: 4}},
			wantLayout: "2g.20gb@0,1g.10gb@6",
		},
		"avoid: a free device kept in place may lie there, new ones may not": {
			model: "A100-SXM4-80GB", want: map[string]int{"1g.10gb": 2},
			current: "1g.10gb@1", avoid: []Placement{{Start: 0, Size: 4}, {Start: 6, Size: 1}},
			wantLayout: "1g.10gb@1,1g.10gb@4",
		},
		"avoid: nothing fits outside the kept placement": {
			model: "A100-SXM4-80GB", want: map[string]int{"4g.40gb": 1},
			avoid:   []Placement{{Start: 0, Size: 4}},
			wantErr: "no arrangement holds it outside the placements kept free (slices 0-3)",
		},
		"A30 two 2g": {
			model: "A30", want: map[string]int{"2g.12gb": 2},
			wantLayout: "2g.12gb@0,2g.12gb@2",
		},
		// A pinned device is not a free one: it is neither moved nor
		// counted as a move, with or without moves allowed.
		"only a pinned device, more of its profile wanted, no moves": {
			model: "A100-SXM4-80GB", want: map[string]int{"1g.10gb": 3},
			current: "1g.10gb@5", pinned: "1g.10gb@5",
			wantLayout: "1g.10gb@4,1g.10gb@5,1g.10gb@6",
		},
		"only a pinned device, more of its profile wanted, moves allowed": {
			model: "A100-SXM4-80GB", want: map[string]int{"1g.10gb": 3},
			current: "1g.10gb@5", pinned: "1g.10gb@5", allowMoves: true,
			wantLayout: "1g.10gb@4,1g.10gb@5,1g.10gb@6",
		},
		// Pinned devices count towards Want, so a free device of their
		// profile beyond what Want leaves goes.
		"a pinned device takes its share of Want: the surplus free one goes": {
			model: "A100-SXM4-80GB", want: map[string]int{"1g.10gb": 2},
			current: "1g.10gb@0,1g.10gb@1,1g.10gb@5", pinned: "1g.10gb@5",
			wantLayout: "1g.10gb@0,1g.10gb@5", wantDestroy: "1g.10gb@1",
		},
		// Keeping both 1g.10gb (one more than wanted) would leave room for
		// the 2g and 3g; Fit keeps one and moves the 2g instead.
		"never more of a profile than wanted, even to keep more devices": {
			model: "A100-SXM4-80GB", want: map[string]int{"1g.10gb": 1, "2g.20gb": 1, "3g.40gb": 1},
			current: "1g.10gb@0,1g.10gb@1,2g.20gb@4", allowMoves: true,
			wantLayout: "1g.10gb@0,2g.20gb@2,3g.40gb@4", wantMoves: 1, wantDestroy: "1g.10gb@1,2g.20gb@4",
		},
		"avoid and one device in use: both named": {
			model: "A100-SXM4-80GB", want: map[string]int{"4g.40gb": 1, "1g.10gb": 1},
			current: "1g.10gb@1", pinned: "1g.10gb@1", avoid: []Placement{{Start: 4, Size: 4}},
			wantErr: `no arrangement holds it outside the placements kept free (slices 4-7) around the devices in use "1g.10gb@1"`,
		},
		"placements alone refuse it, moves allowed: no move is blamed": {
			model: "A100-SXM4-80GB", want: map[string]int{"3g.40gb": 2, "1g.10gb": 1},
			current: "1g.10gb@3", allowMoves: true,
			wantErr: "{3g.40gb:2, 1g.10gb:1}: no arrangement of placements holds it",
		},
		"placements alone refuse it on an empty GPU: no move is blamed": {
			model: "A100-SXM4-80GB", want: map[string]int{"3g.40gb": 2, "1g.10gb": 1},
			wantErr: "{3g.40gb:2, 1g.10gb:1}: no arrangement of placements holds it",
		},
		"placements refuse it around one device in use": {
			model: "A100-SXM4-80GB", want: map[string]int{"3g.40gb": 2, "1g.10gb": 1},
			current: "1g.10gb@3", pinned: "1g.10gb@3", allowMoves: true,
			wantErr: `no arrangement holds it around the devices in use "1g.10gb@3"`,
		},
		"negative count": {
			model: "A100-SXM4-80GB", want: map[string]int{"1g.10gb": -1},
			wantErr: "count -1 for 1g.10gb is negative", wantIs: ErrInvalidLayout,
		},
		"a count of 0 is ignored, even of a profile the model lacks": {
			model: "A100-SXM4-80GB", want: map[string]int{"3g.40gb": 1, "2g.10gb": 0},
			wantLayout: "3g.40gb@4",
		},
		"compute budget counts every instance": {
			model: "A100-SXM4-80GB", want: map[string]int{"3g.40gb": 2, "1g.10gb": 2},
			wantErr: "{3g.40gb:2, 1g.10gb:2} needs 8 compute slices, the GPU has 7",
		},
		"a count of 0 is left out of the message": {
			model: "A100-SXM4-80GB", want: map[string]int{"3g.40gb": 3, "1g.10gb": 0},
			wantErr: "{3g.40gb:3}: 3 instances of 3g.40gb",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			m := mustModel(t, tc.model)
			got, err := m.Fit(FitRequest{Want: tc.want, Current: MustParseLayout(tc.current), Pinned: MustParseLayout(tc.pinned), AllowMoves: tc.allowMoves, Avoid: tc.avoid, Forbid: MustParseLayout(tc.forbid)})
			if tc.wantErr != "" {
				is := tc.wantIs
				if is == nil {
					is = ErrDoesNotFit
				}
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !errors.Is(err, is) {
					t.Fatalf("Fit error = %v, want one containing %q and wrapping %v", err, tc.wantErr, is)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.wantLayout, got.Layout.String()); diff != "" {
				t.Errorf("layout (-want +got):\n%s", diff)
			}
			if got.Moves != tc.wantMoves {
				t.Errorf("moves = %d, want %d", got.Moves, tc.wantMoves)
			}
			if diff := cmp.Diff(tc.wantDestroy, got.Destroyed.String()); diff != "" {
				t.Errorf("destroyed (-want +got):\n%s", diff)
			}
			if err := m.Validate(got.Layout); err != nil {
				t.Errorf("result invalid: %v", err)
			}
			wantCounts := map[string]int{} // counts of 0 are ignored
			for p, n := range tc.want {
				if n != 0 {
					wantCounts[p] = n
				}
			}
			if diff := cmp.Diff(wantCounts, got.Layout.Counts()); diff != "" {
				t.Errorf("result multiset (-want +got):\n%s", diff)
			}
			for _, d := range MustParseLayout(tc.pinned) {
				if !got.Layout.Contains(d) {
					t.Errorf("pinned %s not kept", d)
				}
			}
		})
	}
}

// TestFitIsMinimal cross-checks Fit against brute force: over every maximal
// layout of an A100 as Current, and a sample of wanted multisets, no valid
// layout holding the multiset keeps more current devices than Fit does.
func TestFitIsMinimal(t *testing.T) {
	m := mustModel(t, "A100-SXM4-80GB")
	byCounts := map[string][]Layout{} // formatWant(counts) -> layouts holding exactly that multiset
	for _, l := range allValidLayouts(m) {
		k := formatWant(l.Counts())
		byCounts[k] = append(byCounts[k], l)
	}
	wants := []map[string]int{
		{"3g.40gb": 1, "1g.10gb": 3}, {"4g.40gb": 1, "2g.20gb": 1, "1g.10gb": 1}, {"2g.20gb": 3},
		{"1g.20gb": 2, "3g.40gb": 1}, {"7g.80gb": 1}, {"1g.10gb": 7},
	}
	for _, cur := range m.MaximalLayouts() {
		for _, w := range wants {
			res, err := m.Fit(FitRequest{Want: w, Current: cur, AllowMoves: true})
			bestKept := -1
			for _, l := range byCounts[formatWant(w)] {
				bestKept = max(bestKept, len(m.Diff(cur, l).Keep))
			}
			if bestKept < 0 {
				if err == nil {
					t.Errorf("Fit(%v) around %s = %s, but brute force finds no layout", w, cur, res.Layout)
				}
				continue
			}
			if err != nil {
				t.Errorf("Fit(%v) around %s: %v; brute force keeps %d", w, cur, err, bestKept)
				continue
			}
			if len(res.Kept) != bestKept {
				t.Errorf("Fit(%v) around %s keeps %d devices, brute force keeps %d", w, cur, len(res.Kept), bestKept)
			}
		}
	}
}

// allValidLayouts enumerates every valid layout by brute force over subsets
// of (profile, placement) candidates, independent of MaximalLayouts.
func allValidLayouts(m *Model) []Layout {
	var cands []Device
	for i := range m.Profiles {
		for _, pl := range m.Profiles[i].Placements {
			cands = append(cands, Device{m.Profiles[i].Name, pl.Start})
		}
	}
	var out []Layout
	var rec func(i int, cur Layout)
	rec = func(i int, cur Layout) {
		if m.Validate(cur) != nil {
			return // adding devices never makes an invalid layout valid
		}
		if i == len(cands) {
			out = append(out, cur.Canonical())
			return
		}
		rec(i+1, cur)
		rec(i+1, append(cur[:len(cur):len(cur)], cands[i]))
	}
	rec(0, nil)
	return out
}

func TestDiff(t *testing.T) {
	m := mustModel(t, "A100-SXM4-80GB")
	got := m.Diff(MustParseLayout("3g.40gb@0,1g.10gb@4,1g.10gb@5,1g.10gb@6"), MustParseLayout("3g.40gb@0,1g.10gb@6,3g.40gb@4"[:0]+"1g.10gb@6,3g.40gb@0,2g.20gb@4"))
	want := Plan{Keep: MustParseLayout("3g.40gb@0,1g.10gb@6"), Destroy: MustParseLayout("1g.10gb@4,1g.10gb@5"), Create: MustParseLayout("2g.20gb@4")}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	got = m.Diff(nil, MustParseLayout("1g.10gb@6,4g.40gb@0,2g.20gb@4"))
	if s := got.Create; s[0].Profile != "4g.40gb" || s[1].Profile != "2g.20gb" || s[2].Profile != "1g.10gb" {
		t.Errorf("create order = %v, want largest first", s)
	}
	if !m.Diff(MustParseLayout("7g.80gb@0"), MustParseLayout("7g.80gb@0")).Empty() {
		t.Error("diff of equal layouts is not empty")
	}
}

func TestMaximalLayouts(t *testing.T) {
	for _, m := range DefaultCatalog().Models() {
		t.Run(m.Name, func(t *testing.T) {
			ls := m.MaximalLayouts()
			if len(ls) == 0 {
				t.Fatal("no layouts")
			}
			seen := map[string]bool{}
			for _, l := range ls {
				if err := m.Validate(l); err != nil {
					t.Errorf("invalid: %v", err)
				}
				if seen[l.String()] {
					t.Errorf("duplicate %s", l)
				}
				seen[l.String()] = true
				for _, h := range m.Headroom(l) {
					if h != 0 {
						t.Errorf("%s is not maximal: headroom %v", l, m.Headroom(l))
						break
					}
				}
			}
			full := m.Profiles[len(m.Profiles)-1]
			if !seen[full.Name+"@0"] {
				t.Errorf("the whole-GPU layout %s@0 is missing", full.Name)
			}
		})
	}
	// Brute force on the A100 and A30: the maximal elements of all valid layouts.
	for _, name := range []string{"A30", "A100-SXM4-80GB"} {
		m := mustModel(t, name)
		var want []string
		for _, l := range allValidLayouts(m) {
			maximal := true
			for _, h := range m.Headroom(l) {
				maximal = maximal && h == 0
			}
			if maximal {
				want = append(want, l.String())
			}
		}
		var got []string
		for _, l := range m.MaximalLayouts() {
			got = append(got, l.String())
		}
		sortStrings(want)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s maximal layouts differ from brute force (-want +got):\n%s", name, diff)
		}
	}
}

func sortStrings(s []string) { slices.Sort(s) }

// TestFitAvoidNamedInError: a fit that fails because of the placements kept
// free says so, rather than blaming moves.
func TestFitAvoidNamedInError(t *testing.T) {
	m := mustModel(t, "A100-SXM4-80GB")
	_, err := m.Fit(FitRequest{Want: map[string]int{"1g.10gb": 2}, Current: MustParseLayout("1g.10gb@0"),
		Avoid: []Placement{{Start: 0, Size: 8}}})
	if !errors.Is(err, ErrDoesNotFit) || !strings.Contains(err.Error(), "outside the placements kept free (slices 0-7)") {
		t.Errorf("Fit = %v, want ErrDoesNotFit naming the placements kept free", err)
	}
}
