package mig

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// NVMLProfileValues are what NVML reports of one GPU instance profile
// (nvmlDeviceGetGpuInstanceProfileInfo: memorySizeMB, in MiB, and the
// multiprocessor and engine counts) where they differ from the catalog's.
type NVMLProfileValues struct {
	Profile                                                     string
	MemoryMiB                                                   int64
	Multiprocessors, CopyEngines, Decoders, Encoders, JPEG, OFA int
}

// NVMLValues are the catalog's values of p in the form NVML reports them,
// to compare with or to start a WithNVMLValues entry from.
func (p *Profile) NVMLValues() NVMLProfileValues {
	return NVMLProfileValues{Profile: p.Name, MemoryMiB: p.MemoryMiB, Multiprocessors: p.Multiprocessors, CopyEngines: p.CopyEngines,
		Decoders: p.Decoders, Encoders: p.Encoders, JPEG: p.JPEGEngines, OFA: p.OFAEngines}
}

// Key identifies the model's values: its Name, with its Variant for a copy
// made by WithNVMLValues. Code that caches what a model's devices look like
// keys by it, so GPUs of one product whose drivers describe a profile
// differently are not taken for one another.
func (m *Model) Key() string {
	if m.Variant == "" {
		return m.Name
	}
	return m.Name + "#" + m.Variant
}

// WithNVMLValues returns a copy of m whose profiles take the values NVML
// reports where they differ from the catalog's, so that devices planned on
// a GPU look as the devices NVML will make: the catalog's Hopper and
// Blackwell values are partly unverified (Profile.Unverified), and a
// driver may describe a profile otherwise. Values of a profile m lacks (an
// agent's newer catalog may know more), and values equal to the catalog's,
// are skipped; values m cannot hold
// (memory beyond the GPU's) are an error. The copy's Variant is a digest of
// the values applied; with none, m itself is returned.
func (m *Model) WithNVMLValues(values []NVMLProfileValues) (*Model, error) {
	vs := slices.DeleteFunc(slices.Clone(values), func(v NVMLProfileValues) bool {
		p := m.byName[v.Profile]
		return p == nil || v == p.NVMLValues()
	})
	if len(vs) == 0 {
		return m, nil
	}
	slices.SortFunc(vs, func(a, b NVMLProfileValues) int { return strings.Compare(a.Profile, b.Profile) })
	c := *m
	c.Profiles = slices.Clone(m.Profiles)
	for i := range c.Profiles {
		c.Profiles[i].Placements = slices.Clone(m.Profiles[i].Placements)
	}
	h := sha256.New()
	for _, v := range vs {
		p := &c.Profiles[slices.IndexFunc(c.Profiles, func(p Profile) bool { return p.Name == v.Profile })]
		p.MemoryMiB, p.Multiprocessors, p.CopyEngines = v.MemoryMiB, v.Multiprocessors, v.CopyEngines
		p.Decoders, p.Encoders, p.JPEGEngines, p.OFAEngines = v.Decoders, v.Encoders, v.JPEG, v.OFA
		p.Unverified = nil
		fmt.Fprintf(h, "%+v\n", v)
	}
	c.Variant = "nvml-" + hex.EncodeToString(h.Sum(nil))[:12]
	c.JPEGEngines, c.OFAEngines = 0, 0
	if err := c.init(); err != nil {
		return nil, fmt.Errorf("applying NVML's values to %s: %w", m.Name, err)
	}
	return &c, nil
}

// WithNVMLPlacements returns a copy of m that keeps to what NVML offers on
// a GPU where it differs from the catalog: each profile of placements (by
// name; nvmlDeviceGetGpuInstancePossiblePlacements) keeps only the
// placements NVML offers too, and a profile left with none, or one of
// refused (NVML gives it another GI profile ID), is dropped. A placement
// only NVML offers is not added: the agent validates and creates with the
// catalog's, so planning it would plan what the agent refuses. This is
// what the Auto planner and Static rules may plan on such a GPU. Profiles
// m lacks are skipped; placements m cannot hold (outside the GPU, of
// another size) are an error. The copy's Variant extends m's with a digest
// of what was applied; with nothing to apply, m itself is returned.
func (m *Model) WithNVMLPlacements(placements map[string][]Placement, refused []string) (*Model, error) {
	keep := map[string][]Placement{}
	for _, name := range slices.Sorted(maps.Keys(placements)) {
		p := m.byName[name]
		if p == nil {
			continue
		}
		for _, pl := range placements[name] {
			if pl.Size != p.MemorySlices || pl.Start < 0 || pl.End() > m.MemorySlices {
				return nil, fmt.Errorf("applying NVML's placements to %s: %s at %d+%d: not a placement of its size on this GPU", m.Name, name, pl.Start, pl.Size)
			}
		}
		both := slices.DeleteFunc(slices.Clone(p.Placements), func(pl Placement) bool { return !slices.Contains(placements[name], pl) })
		if !slices.Equal(both, p.Placements) {
			keep[name] = both
		}
	}
	refused = slices.DeleteFunc(slices.Clone(refused), func(name string) bool { return m.byName[name] == nil })
	if len(keep) == 0 && len(refused) == 0 {
		return m, nil
	}
	slices.Sort(refused)
	c := *m
	c.Profiles = nil
	h := sha256.New()
	fmt.Fprintf(h, "%s\n", m.Variant)
	for _, p := range m.Profiles {
		pls, narrowed := keep[p.Name]
		if slices.Contains(refused, p.Name) || narrowed && len(pls) == 0 {
			continue
		}
		p.Placements = slices.Clone(p.Placements)
		if narrowed {
			p.Placements = pls
		}
		c.Profiles = append(c.Profiles, p)
	}
	for _, name := range slices.Sorted(maps.Keys(keep)) {
		fmt.Fprintf(h, "%s %v\n", name, keep[name])
	}
	fmt.Fprintf(h, "refused %v\n", refused)
	c.Variant = "nvml-" + hex.EncodeToString(h.Sum(nil))[:12]
	c.JPEGEngines, c.OFAEngines = 0, 0
	if err := c.init(); err != nil {
		return nil, fmt.Errorf("applying NVML's placements to %s: %w", m.Name, err)
	}
	// The GPU has the engines it has whatever profiles NVML offers: not
	// those of the largest profile left.
	t := m.engineTotals()
	c.JPEGEngines, c.OFAEngines = t.jpeg, t.ofa
	return &c, nil
}

// WithProfiles returns a copy of m that also offers the given profiles, a
// profile named as one of m's replacing it, checked as the catalog checks
// its own (name, slices, placements, memory in MiB; a GI profile ID another
// profile has already is an error), except that a maxCount beyond the
// profile's placements, which LoadCatalog refuses in its data files, is
// taken: the model as a driver describes it
// that offers profiles miglayout's catalog lacks (a newer driver's "-me"
// or "+me.all" profiles), or describes one otherwise (other placements),
// for the NVML simulator's hardware catalog. The copy keeps m's Name and
// Variant.
func (m *Model) WithProfiles(extra ...Profile) (*Model, error) {
	c := *m
	c.Profiles = slices.Clone(m.Profiles)
	for i := range c.Profiles {
		c.Profiles[i].Placements = slices.Clone(m.Profiles[i].Placements)
	}
	for _, p := range extra {
		p.Placements = slices.Clone(p.Placements)
		if i := slices.IndexFunc(c.Profiles, func(q Profile) bool { return q.Name == p.Name }); i >= 0 {
			c.Profiles[i] = p
			continue
		}
		c.Profiles = append(c.Profiles, p)
	}
	c.JPEGEngines, c.OFAEngines = 0, 0
	if err := c.init(); err != nil {
		return nil, fmt.Errorf("adding profiles to %s: %w", m.Name, err)
	}
	// A replaced profile does not take engines from the GPU.
	t := m.engineTotals()
	c.JPEGEngines, c.OFAEngines = max(c.JPEGEngines, t.jpeg), max(c.OFAEngines, t.ofa)
	return &c, nil
}

// With returns a copy of c in which each of models replaces the model of
// the same Name (under its names and aliases): the catalog of hardware
// whose NVML describes profiles as WithNVMLValues copies say, for the NVML
// simulator. A model c does not have is an error.
func (c *Catalog) With(models ...*Model) (*Catalog, error) {
	out := &Catalog{models: slices.Clone(c.models), byName: maps.Clone(c.byName)}
	for _, m := range models {
		i := slices.IndexFunc(out.models, func(o *Model) bool { return o.Name == m.Name })
		if i < 0 {
			return nil, fmt.Errorf("replacing model %s: %w %q", m.Name, ErrUnknownModel, m.Name)
		}
		old := out.models[i]
		out.models[i] = m
		for k, v := range out.byName {
			if v == old {
				out.byName[k] = m
			}
		}
	}
	return out, nil
}
