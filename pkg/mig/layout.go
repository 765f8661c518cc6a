package mig

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Device is one GPU instance in a layout: a profile at a placement start. The
// placement size is the profile's MemorySlices and so is not repeated here.
// Its text form is "<profile>@<start>", e.g. "3g.40gb@4".
type Device struct {
	Profile string `json:"profile"`
	Start   int    `json:"start"`
}

func (d Device) String() string { return d.Profile + "@" + strconv.Itoa(d.Start) }

// Layout is the set of GPU instances on one GPU. The canonical order is by
// placement start, then profile name; String and ParseLayout round-trip it.
// A nil or empty Layout is a GPU in MIG mode with no GPU instance.
type Layout []Device

// String returns the canonical text form, e.g. "3g.40gb@0,2g.20gb@4,1g.10gb@6".
func (l Layout) String() string {
	c := l
	if !slices.IsSortedFunc(c, compareDevices) {
		c = l.Canonical()
	}
	n := 0
	for _, d := range c {
		n += len(d.Profile) + len(",@00")
	}
	var b strings.Builder
	b.Grow(n)
	for i, d := range c {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(d.Profile)
		b.WriteByte('@')
		b.WriteString(strconv.Itoa(d.Start))
	}
	return b.String()
}

// Canonical returns a sorted copy of l.
func (l Layout) Canonical() Layout {
	c := slices.Clone(l)
	slices.SortFunc(c, compareDevices)
	return c
}

func compareDevices(a, b Device) int {
	if a.Start != b.Start {
		return a.Start - b.Start
	}
	return strings.Compare(a.Profile, b.Profile)
}

// Equal reports whether l and o hold the same devices, in any order.
func (l Layout) Equal(o Layout) bool {
	return slices.Equal(l.Canonical(), o.Canonical())
}

// Contains reports whether d is in l.
func (l Layout) Contains(d Device) bool { return slices.Contains(l, d) }

// Counts returns the number of devices per profile.
func (l Layout) Counts() map[string]int {
	out := map[string]int{}
	for _, d := range l {
		out[d.Profile]++
	}
	return out
}

// ParseLayout parses the canonical text form: devices "<profile>@<start>"
// separated by commas, in any order, spaces around elements ignored. The empty
// string is the empty layout. Errors wrap ErrSyntax and name the element and
// its 1-based position, e.g.
// `layout "3g.40gb@x": element 1 "3g.40gb@x": placement start "x" is not a number in 0..63`.
// ParseLayout checks syntax only; Validate checks the layout against a model.
func ParseLayout(s string) (Layout, error) {
	if strings.TrimSpace(s) == "" {
		return Layout{}, nil
	}
	parts := strings.Split(s, ",")
	out := make(Layout, 0, len(parts))
	for i, raw := range parts {
		e := strings.TrimSpace(raw)
		fail := func(format string, args ...any) (Layout, error) {
			return nil, fmt.Errorf("%w: layout %q: element %d %q: %s", ErrSyntax, s, i+1, e, fmt.Sprintf(format, args...))
		}
		if e == "" {
			return fail("empty element")
		}
		name, start, ok := strings.Cut(e, "@")
		if !ok {
			return fail("missing \"@<placement start>\"")
		}
		if _, err := ParseProfileName(name); err != nil {
			return fail("profile %q is not of the form <N>g.<M>gb[+me]", name)
		}
		n, err := strconv.Atoi(start)
		if err != nil || n < 0 || n > 63 || start != strconv.Itoa(n) {
			return fail("placement start %q is not a number in 0..63", start)
		}
		out = append(out, Device{Profile: name, Start: n})
	}
	return out.Canonical(), nil
}

// MustParseLayout is ParseLayout for tests and constants; it panics on error.
func MustParseLayout(s string) Layout {
	l, err := ParseLayout(s)
	if err != nil {
		panic(err)
	}
	return l
}

// Placement returns the device's placement on model m.
func (m *Model) Placement(d Device) (Placement, error) {
	p, err := m.Profile(d.Profile)
	if err != nil {
		return Placement{}, err
	}
	return Placement{Start: d.Start, Size: p.MemorySlices}, nil
}

// SplitCatalogued splits l into the devices of profiles m offers and those
// of profiles it lacks (GPU instances made out of band, which the agent
// lists under nvidia-smi's name).
func (m *Model) SplitCatalogued(l Layout) (catalogued, other Layout) {
	for _, d := range l {
		if _, err := m.Profile(d.Profile); err == nil {
			catalogued = append(catalogued, d)
		} else {
			other = append(other, d)
		}
	}
	return catalogued, other
}

// HeldInstance is a GPU instance of a profile the catalog lacks, as NVML
// reports it (nvmlGpuInstanceInfo_t's placement, the profile's jpegCount
// and ofaCount).
type HeldInstance struct {
	Placement               Placement
	JPEGEngines, OFAEngines int
}

// ValidateKeeping is Validate for a layout to apply to a GPU whose GPU
// instances of profiles m lacks are as held gives (NVML's: the catalog
// cannot size them): such a device is allowed in l where held has it (kept
// as it stands, never created), and counts against the rest with its
// memory slices, its compute slices (from its name), one instance and its
// media engines; Validate judges the rest. The error wraps
// ErrUnknownProfile for such a device held lacks, and ErrInvalidLayout for
// one the rest does not fit beside.
func (m *Model) ValidateKeeping(l Layout, held map[Device]HeldInstance) error {
	known, kept := m.SplitCatalogued(l)
	for _, d := range kept {
		if _, ok := held[d]; !ok {
			_, err := m.Profile(d.Profile)
			return fmt.Errorf("layout %q: %s is not there to keep, and miglayout never creates a profile its catalog lacks: %w", l.Canonical().String(), d, err)
		}
	}
	if err := m.Validate(known); err != nil {
		return err
	}
	fail := func(format string, args ...any) error {
		return fmt.Errorf("%w: layout %q on %s: %s", ErrInvalidLayout, l.Canonical().String(), m.Name, fmt.Sprintf(format, args...))
	}
	compute := 0
	var engines mediaEngines
	for _, d := range known {
		p, _ := m.Profile(d.Profile)
		compute += p.ComputeSlices
		engines = engines.plus(p)
	}
	for i, d := range kept {
		h := held[d]
		pl := h.Placement
		engines.jpeg += h.JPEGEngines
		engines.ofa += h.OFAEngines
		for _, e := range known {
			q, _ := m.Placement(e)
			if pl.Overlaps(q) {
				lo, hi := max(pl.Start, q.Start), min(pl.End(), q.End())-1
				return fail("%s overlaps the kept %s on memory slices %s", e, d, sliceRange(lo, hi))
			}
		}
		for _, e := range kept[:i] {
			if pl.Overlaps(held[e].Placement) {
				return fail("the kept %s and %s overlap", e, d)
			}
		}
		if n, err := ParseProfileName(d.Profile); err == nil {
			compute += n.ComputeSlices
		}
	}
	if len(l) > m.MaxInstances {
		return fail("%d GPU instances, at most %d allowed", len(l), m.MaxInstances)
	}
	if compute > m.ComputeSlices {
		return fail("needs %d compute slices, the GPU has %d", compute, m.ComputeSlices)
	}
	if !m.enginesFit(engines) {
		t := m.engineTotals()
		return fail("needs %d optical flow accelerators and %d JPEG decoders with the kept GPU instances, the GPU has %d and %d (media-extension profiles share them)",
			engines.ofa, engines.jpeg, t.ofa, t.jpeg)
	}
	return nil
}

// Validate checks that the GPU model can hold layout l: every profile exists
// on the model, every placement is one the profile allows, no two devices
// share a memory slice, no profile exceeds its instance count, the instance
// count and compute slices fit the GPU. The error wraps ErrUnknownProfile or
// ErrInvalidLayout and names the offending devices, e.g.
// `layout "3g.40gb@0,4g.40gb@0": 4g.40gb@0 overlaps 3g.40gb@0 on memory slices 0-3`.
func (m *Model) Validate(l Layout) error {
	c := l.Canonical()
	fail := func(err error, format string, args ...any) error {
		return fmt.Errorf("%w: layout %q on %s: %s", err, c.String(), m.Name, fmt.Sprintf(format, args...))
	}
	counts := map[string]int{}
	compute := 0
	var engines mediaEngines
	places := make([]Placement, len(c))
	for i, d := range c {
		p, err := m.Profile(d.Profile)
		if err != nil {
			return fmt.Errorf("layout %q: %w", c.String(), err)
		}
		pl := Placement{Start: d.Start, Size: p.MemorySlices}
		if !p.HasPlacement(pl) {
			return fail(ErrInvalidLayout, "%s: start %d is not a valid placement for %s (valid starts: %s)", d, d.Start, p.Name, placementStarts(p))
		}
		for j := 0; j < i; j++ {
			if pl.Overlaps(places[j]) {
				lo, hi := max(pl.Start, places[j].Start), min(pl.End(), places[j].End())-1
				return fail(ErrInvalidLayout, "%s overlaps %s on memory slices %s", d, c[j], sliceRange(lo, hi))
			}
		}
		places[i] = pl
		counts[p.Name]++
		if counts[p.Name] > p.MaxCount {
			return fail(ErrInvalidLayout, "%d instances of %s, at most %d allowed", counts[p.Name], p.Name, p.MaxCount)
		}
		compute += p.ComputeSlices
		engines = engines.plus(p)
	}
	if len(c) > m.MaxInstances {
		return fail(ErrInvalidLayout, "%d GPU instances, at most %d allowed", len(c), m.MaxInstances)
	}
	if compute > m.ComputeSlices {
		return fail(ErrInvalidLayout, "needs %d compute slices, the GPU has %d", compute, m.ComputeSlices)
	}
	if !m.enginesFit(engines) {
		return fail(ErrInvalidLayout, "needs %d optical flow accelerators and %d JPEG decoders, the GPU has %d and %d (media-extension profiles share them)",
			engines.ofa, engines.jpeg, m.engineTotals().ofa, m.engineTotals().jpeg)
	}
	return nil
}

func sliceRange(lo, hi int) string {
	if lo == hi {
		return strconv.Itoa(lo)
	}
	return fmt.Sprintf("%d-%d", lo, hi)
}

func placementStarts(p *Profile) string {
	s := make([]string, len(p.Placements))
	for i, pl := range p.Placements {
		s[i] = strconv.Itoa(pl.Start)
	}
	return strings.Join(s, ",")
}
