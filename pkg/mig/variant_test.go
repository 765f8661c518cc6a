package mig

import (
	"slices"
	"testing"
)

func TestWithNVMLValues(t *testing.T) {
	h100, err := DefaultCatalog().Model("H100-SXM5-80GB")
	if err != nil {
		t.Fatal(err)
	}
	if same, err := h100.WithNVMLValues(nil); err != nil || same != h100 {
		t.Fatalf("no values: %v, %v; want the model itself", same, err)
	}
	orig, _ := h100.Profile("3g.40gb")
	v := orig.NVMLValues()
	if same, err := h100.WithNVMLValues([]NVMLProfileValues{v}); err != nil || same != h100 {
		t.Errorf("the catalog's own values: %v, %v; want the model itself", same, err)
	}
	v.MemoryMiB = 40200
	c, err := h100.WithNVMLValues([]NVMLProfileValues{v})
	if err != nil {
		t.Fatal(err)
	}
	got, _ := c.Profile("3g.40gb")
	if got.MemoryMiB != 40200 || c.Name != h100.Name || c.Key() == h100.Key() {
		t.Errorf("copy: 3g.40gb memory %d, name %q, key %q (catalog key %q)", got.MemoryMiB, c.Name, c.Key(), h100.Key())
	}
	if p, _ := h100.Profile("3g.40gb"); p.MemoryMiB != orig.MemoryMiB {
		t.Errorf("the catalog model changed: %d", p.MemoryMiB)
	}
	again, _ := h100.WithNVMLValues([]NVMLProfileValues{v})
	if again.Key() != c.Key() {
		t.Errorf("equal values, keys %q and %q", again.Key(), c.Key())
	}
	v.MemoryMiB = 40200 + 1
	other, _ := h100.WithNVMLValues([]NVMLProfileValues{v})
	if other.Key() == c.Key() {
		t.Errorf("other values, same key %q", c.Key())
	}
	// A profile the model lacks (an agent's newer catalog) is skipped.
	if same, err := h100.WithNVMLValues([]NVMLProfileValues{{Profile: "9g.90gb", MemoryMiB: 1}}); err != nil || same != h100 {
		t.Errorf("unknown profile only: %v, %v; want the model itself", same, err)
	}
	if c2, err := h100.WithNVMLValues([]NVMLProfileValues{{Profile: "9g.90gb", MemoryMiB: 1}, v}); err != nil || c2.Key() != other.Key() {
		t.Errorf("unknown profile beside a known one: %v, %v; want the known one applied", c2, err)
	}
	if _, err := h100.WithNVMLValues([]NVMLProfileValues{{Profile: "3g.40gb", MemoryMiB: 1 << 40}}); err == nil {
		t.Error("memory beyond the GPU's: accepted")
	}
}

func TestCatalogWith(t *testing.T) {
	h100, err := DefaultCatalog().Model("H100-SXM5-80GB")
	if err != nil {
		t.Fatal(err)
	}
	v, err := h100.WithNVMLValues([]NVMLProfileValues{{Profile: "7g.80gb", MemoryMiB: 80000, Multiprocessors: 132, CopyEngines: 8, Decoders: 7, JPEG: 7, OFA: 1}})
	if err != nil {
		t.Fatal(err)
	}
	c, err := DefaultCatalog().With(v)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"H100-SXM5-80GB", "NVIDIA H100 80GB HBM3", "h100-sxm5"} {
		if got, err := c.Model(name); err != nil || got != v {
			t.Errorf("Model(%q) = %v, %v; want the replacement", name, got, err)
		}
	}
	if got, _ := DefaultCatalog().Model("H100-SXM5-80GB"); got != h100 {
		t.Error("the default catalog changed")
	}
	if a100, _ := c.Model("A100-SXM4-80GB"); a100 == nil || a100.Variant != "" {
		t.Errorf("other models: %v", a100)
	}
	if _, err := DefaultCatalog().With(&Model{Name: "X1"}); err == nil {
		t.Error("replacing a model the catalog lacks: no error")
	}
}

func TestWithProfiles(t *testing.T) {
	a100, err := DefaultCatalog().Model("A100-SXM4-80GB")
	if err != nil {
		t.Fatal(err)
	}
	noME := Profile{Name: "1g.10gb-me", ID: 21, NVMLProfile: 13, ComputeSlices: 1, MemorySlices: 1, MemoryMiB: 9856, MaxCount: 7,
		Multiprocessors: 14, CopyEngines: 1, Placements: []Placement{{Start: 0, Size: 1}, {Start: 1, Size: 1}}}
	c, err := a100.WithProfiles(noME)
	if err != nil {
		t.Fatal(err)
	}
	if p, err := c.Profile("1g.10gb-me"); err != nil || p.ID != 21 || c.ProfileByID(21) != p {
		t.Errorf("the copy's 1g.10gb-me: %v, %v", p, err)
	}
	if _, err := c.Profile("3g.40gb"); err != nil {
		t.Errorf("the copy lost a catalog profile: %v", err)
	}
	if _, err := a100.Profile("1g.10gb-me"); err == nil {
		t.Error("the catalog model changed")
	}
	// A profile of the model's name replaces it.
	three, _ := a100.Profile("3g.40gb")
	right := *three
	right.Placements = []Placement{{Start: 4, Size: 4}}
	r, err := a100.WithProfiles(right)
	if err != nil {
		t.Fatal(err)
	}
	if p, _ := r.Profile("3g.40gb"); len(r.Profiles) != len(a100.Profiles) || !slices.Equal(p.Placements, right.Placements) {
		t.Errorf("replacing 3g.40gb: %d profiles, placements %v", len(r.Profiles), p.Placements)
	}
	if p, _ := a100.Profile("3g.40gb"); len(p.Placements) != 2 {
		t.Errorf("the catalog model changed: %v", p.Placements)
	}
	for name, bad := range map[string]Profile{
		"ID taken":      func() Profile { p := noME; p.ID = 19; return p }(),
		"no placements": func() Profile { p := noME; p.Placements = nil; return p }(),
		"slices":        func() Profile { p := noME; p.ComputeSlices = 2; return p }(),
	} {
		if _, err := a100.WithProfiles(bad); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestWithNVMLPlacements(t *testing.T) {
	a100, err := DefaultCatalog().Model("A100-SXM4-80GB")
	if err != nil {
		t.Fatal(err)
	}
	if same, err := a100.WithNVMLPlacements(nil, nil); err != nil || same != a100 {
		t.Fatalf("nothing to apply: %v, %v; want the model itself", same, err)
	}
	three, _ := a100.Profile("3g.40gb")
	if same, err := a100.WithNVMLPlacements(map[string][]Placement{"3g.40gb": three.Placements, "9g.90gb": {{Start: 0, Size: 8}}}, []string{"9g.90gb"}); err != nil || same != a100 {
		t.Errorf("the catalog's own placements and unknown profiles: %v, %v; want the model itself", same, err)
	}
	c, err := a100.WithNVMLPlacements(map[string][]Placement{"3g.40gb": {{Start: 4, Size: 4}}}, []string{"2g.20gb"})
	if err != nil {
		t.Fatal(err)
	}
	if p, _ := c.Profile("3g.40gb"); !slices.Equal(p.Placements, []Placement{{Start: 4, Size: 4}}) {
		t.Errorf("3g.40gb placements %v", p.Placements)
	}
	if _, err := c.Profile("2g.20gb"); err == nil {
		t.Error("the refused 2g.20gb is still offered")
	}
	if c.Key() == a100.Key() || c.Name != a100.Name {
		t.Errorf("key %q (catalog %q), name %q", c.Key(), a100.Key(), c.Name)
	}
	if err := c.Validate(MustParseLayout("3g.40gb@0")); err == nil {
		t.Error("3g.40gb@0 valid on the copy")
	}
	if p, _ := a100.Profile("3g.40gb"); len(p.Placements) != 2 {
		t.Errorf("the catalog model changed: %v", p.Placements)
	}
	if _, err := a100.WithNVMLPlacements(map[string][]Placement{"3g.40gb": {{Start: 4, Size: 2}}}, nil); err == nil {
		t.Error("placements of another size: accepted")
	}
	// A placement only NVML offers is not planned (the agent creates at
	// the catalog's only); a profile left with none is dropped.
	two, _ := a100.Profile("2g.20gb")
	more := append(slices.Clone(two.Placements), Placement{Start: 6, Size: 2})
	if same, err := a100.WithNVMLPlacements(map[string][]Placement{"2g.20gb": more}, nil); err != nil || same != a100 {
		t.Errorf("NVML offers more than the catalog: %v, %v; want the model itself", same, err)
	}
	none, err := a100.WithNVMLPlacements(map[string][]Placement{"4g.40gb": {}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := none.Profile("4g.40gb"); err == nil {
		t.Error("a profile NVML offers nowhere is still offered")
	}
}

// TestWithNVMLValuesTakesNVMLsWord: a profile NVML describes has NVML's
// values, so none of them is unverified any more, and the GPU's media
// engines are worked out again from them (an H100 whose 7g.80gb NVML
// reports with 6 NVJPG has 6).
func TestWithNVMLValuesTakesNVMLsWord(t *testing.T) {
	h100 := mustModel(t, "H100-SXM5-80GB")
	full, _ := h100.Profile("7g.80gb")
	if len(full.Unverified) == 0 {
		t.Fatal("the catalog's 7g.80gb has no unverified value to start from")
	}
	v := full.NVMLValues()
	v.JPEG = 6
	c, err := h100.WithNVMLValues([]NVMLProfileValues{v})
	if err != nil {
		t.Fatal(err)
	}
	if p, _ := c.Profile("7g.80gb"); p.Unverified != nil {
		t.Errorf("the copy's 7g.80gb: unverified %v, want none", p.Unverified)
	}
	if c.JPEGEngines != 6 || c.OFAEngines != 1 {
		t.Errorf("the copy's engines: %d NVJPG, %d OFA; want 6 and 1", c.JPEGEngines, c.OFAEngines)
	}
}

// TestWithNVMLPlacementsChecksAndKeys: NVML's placements must lie on the
// GPU; refusing profiles alone makes a copy; and the copy's key tells
// apart what it was made of: the model it was made from (a catalog model
// or a variant) and the profiles refused.
func TestWithNVMLPlacementsChecksAndKeys(t *testing.T) {
	a100 := mustModel(t, "A100-SXM4-80GB")
	for name, pl := range map[string]Placement{
		"before slice 0":         {Start: -1, Size: 4},
		"one slice past the end": {Start: 5, Size: 4},
	} {
		if _, err := a100.WithNVMLPlacements(map[string][]Placement{"3g.40gb": {pl}}, nil); err == nil {
			t.Errorf("a 3g.40gb placement %s: accepted", name)
		}
	}
	refused, err := a100.WithNVMLPlacements(nil, []string{"2g.20gb"})
	if err != nil {
		t.Fatal(err)
	}
	if refused == a100 {
		t.Fatal("refusing 2g.20gb alone: the model itself")
	}
	if _, err := refused.Profile("2g.20gb"); err == nil {
		t.Error("the refused 2g.20gb is still offered")
	}
	right := map[string][]Placement{"3g.40gb": {{Start: 4, Size: 4}}}
	plain, err := a100.WithNVMLPlacements(right, nil)
	if err != nil {
		t.Fatal(err)
	}
	alsoRefused, err := a100.WithNVMLPlacements(right, []string{"2g.20gb"})
	if err != nil {
		t.Fatal(err)
	}
	if plain.Key() == alsoRefused.Key() {
		t.Errorf("with and without 2g.20gb refused: one key %q", plain.Key())
	}
	one, _ := a100.Profile("1g.10gb")
	v := one.NVMLValues()
	v.MemoryMiB++
	variant, err := a100.WithNVMLValues([]NVMLProfileValues{v})
	if err != nil {
		t.Fatal(err)
	}
	fromVariant, err := variant.WithNVMLPlacements(right, nil)
	if err != nil {
		t.Fatal(err)
	}
	if fromVariant.Key() == plain.Key() {
		t.Errorf("the same placements on the catalog model and on a variant: one key %q", plain.Key())
	}
}

// TestVariantsOwnTheirPlacements: changing a copy's placements leaves the
// model it was made from as it was.
func TestVariantsOwnTheirPlacements(t *testing.T) {
	a100 := mustModel(t, "A100-SXM4-80GB")
	one, _ := a100.Profile("1g.10gb")
	v := one.NVMLValues()
	v.MemoryMiB++
	byValues, err := a100.WithNVMLValues([]NVMLProfileValues{v})
	if err != nil {
		t.Fatal(err)
	}
	byProfiles, err := a100.WithProfiles(Profile{Name: "1g.10gb-me", ID: 21, NVMLProfile: 13, ComputeSlices: 1, MemorySlices: 1,
		MemoryMiB: 9856, MaxCount: 7, Placements: []Placement{{Start: 0, Size: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]*Model{"WithNVMLValues": byValues, "WithProfiles": byProfiles} {
		p, _ := c.Profile("3g.40gb")
		p.Placements[0].Start = 5
		if q, _ := a100.Profile("3g.40gb"); q.Placements[0].Start != 0 {
			t.Errorf("%s: changing the copy's 3g.40gb placements changed the catalog model's: %v", name, q.Placements)
			q.Placements[0].Start = 0
		}
	}
}

// TestEngineTotalsWithoutStoredTotals: a model without engine totals (one
// decoded from JSON without them) has the most any of its profiles lists,
// wherever in the list that profile is.
func TestEngineTotalsWithoutStoredTotals(t *testing.T) {
	m := &Model{Name: "X", Profiles: []Profile{
		{Name: "7g.80gb", JPEGEngines: 1, OFAEngines: 1},
		{Name: "1g.10gb"},
	}}
	if !m.MediaEnginesFit(&m.Profiles[0]) {
		t.Error("the GPU's own full-size profile does not fit its engines")
	}
	if m.MediaEnginesFit(&m.Profiles[0], &m.Profiles[0]) {
		t.Error("two full-size profiles fit one GPU's engines")
	}
}

// TestWithProfilesKeepsEngines: replacing a profile with one that lists
// fewer media engines leaves the GPU its engines (an H100's 7g.80gb
// replaced by one listing no NVJPG still leaves seven 1g.10gb, one NVJPG
// each, valid together).
func TestWithProfilesKeepsEngines(t *testing.T) {
	h100 := mustModel(t, "H100-SXM5-80GB")
	full, _ := h100.Profile("7g.80gb")
	noJPEG := *full
	noJPEG.JPEGEngines = 0
	c, err := h100.WithProfiles(noJPEG)
	if err != nil {
		t.Fatal(err)
	}
	if c.JPEGEngines != 7 || c.OFAEngines != 1 {
		t.Errorf("the copy's engines: %d NVJPG, %d OFA; want 7 and 1", c.JPEGEngines, c.OFAEngines)
	}
	if err := c.Validate(MustParseLayout("1g.10gb@0,1g.10gb@1,1g.10gb@2,1g.10gb@3,1g.10gb@4,1g.10gb@5,1g.10gb@6")); err != nil {
		t.Errorf("seven 1g.10gb on the copy: %v", err)
	}
}
