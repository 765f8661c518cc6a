package mig

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
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
// reports where they differ from the catalog's (values names profiles of
// m; others are an error), so that devices planned on a GPU look as the
// devices NVML will make: the catalog's Hopper and Blackwell values are
// partly unverified (Profile.Unverified), and a driver may describe a
// profile otherwise. The copy's Variant is a digest of the values; with no
// values m itself is returned.
func (m *Model) WithNVMLValues(values []NVMLProfileValues) (*Model, error) {
	if len(values) == 0 {
		return m, nil
	}
	vs := slices.Clone(values)
	slices.SortFunc(vs, func(a, b NVMLProfileValues) int { return strings.Compare(a.Profile, b.Profile) })
	c := *m
	c.Profiles = slices.Clone(m.Profiles)
	for i := range c.Profiles {
		c.Profiles[i].Placements = slices.Clone(m.Profiles[i].Placements)
	}
	h := sha256.New()
	for _, v := range vs {
		i := slices.IndexFunc(c.Profiles, func(p Profile) bool { return p.Name == v.Profile })
		if i < 0 {
			return nil, fmt.Errorf("applying NVML's values to %s: %w %q", m.Name, ErrUnknownProfile, v.Profile)
		}
		p := &c.Profiles[i]
		p.MemoryMiB, p.Multiprocessors, p.CopyEngines = v.MemoryMiB, v.Multiprocessors, v.CopyEngines
		p.Decoders, p.Encoders, p.JPEGEngines, p.OFAEngines = v.Decoders, v.Encoders, v.JPEG, v.OFA
		p.Unverified = nil
		fmt.Fprintf(h, "%+v\n", v)
	}
	c.Variant = "nvml-" + hex.EncodeToString(h.Sum(nil))[:12]
	c.engines = mediaEngines{}
	if err := c.init(); err != nil {
		return nil, fmt.Errorf("applying NVML's values to %s: %w", m.Name, err)
	}
	return &c, nil
}
