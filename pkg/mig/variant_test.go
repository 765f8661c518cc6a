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
