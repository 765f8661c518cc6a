package mig

// Media engines: the JPEG decoders (NVJPG) and optical flow accelerators
// (OFA) of a GPU are few (one OFA on A100, A30 and H100; one NVJPG on A100
// and A30) and go whole to the GPU instances whose profiles list them (the
// "+me" media-extension profiles, and on Hopper and newer every profile's
// NVJPG share). GPU instances whose profiles together list more of them than
// the GPU has cannot coexist: on an A30, 1g.6gb+me and 2g.12gb+me each take
// the GPU's only OFA and NVJPG, so NVML refuses the second with
// NVML_ERROR_INSUFFICIENT_RESOURCES though placements, compute slices and
// each profile's instance count allow it. The GPU's totals are the largest
// count any of its profiles lists, which is the full-size profile's for
// every catalogued model (NVIDIA Multi-Instance GPU User Guide, "Supported
// MIG Profiles": the 7g/4g row lists the whole GPU's engines).

// mediaEngines counts the NVJPG and OFA engines of GPU instances.
type mediaEngines struct{ jpeg, ofa int }

func (e mediaEngines) plus(p *Profile) mediaEngines {
	return mediaEngines{jpeg: e.jpeg + p.JPEGEngines, ofa: e.ofa + p.OFAEngines}
}

func (e mediaEngines) minus(p *Profile) mediaEngines {
	return mediaEngines{jpeg: e.jpeg - p.JPEGEngines, ofa: e.ofa - p.OFAEngines}
}

// enginesFit reports whether the GPU has e's engines.
func (m *Model) enginesFit(e mediaEngines) bool {
	t := m.engineTotals()
	return e.jpeg <= t.jpeg && e.ofa <= t.ofa
}

// engineTotals are the GPU's engines: Model.JPEGEngines and OFAEngines,
// or where both are zero (a Model decoded from JSON without them) the most
// any of its profiles lists, worked out each time.
func (m *Model) engineTotals() mediaEngines {
	if t := (mediaEngines{jpeg: m.JPEGEngines, ofa: m.OFAEngines}); t != (mediaEngines{}) {
		return t
	}
	var t mediaEngines
	for i := range m.Profiles {
		t.jpeg = max(t.jpeg, m.Profiles[i].JPEGEngines)
		t.ofa = max(t.ofa, m.Profiles[i].OFAEngines)
	}
	return t
}

// MediaEnginesFit reports whether GPU instances of the given profiles (one
// entry per instance) together take no more NVJPG and OFA engines than the
// GPU has (see the package's media-engine rule above). Placements, compute
// slices and instance counts are checked elsewhere (Validate).
func (m *Model) MediaEnginesFit(profiles ...*Profile) bool {
	var e mediaEngines
	for _, p := range profiles {
		e = e.plus(p)
	}
	return m.enginesFit(e)
}

// MediaEngineTotals returns the GPU's NVJPG and OFA engines (see the
// package's media-engine rule above), which GPU instances' profiles
// (Profile.JPEGEngines, Profile.OFAEngines) may take together.
func (m *Model) MediaEngineTotals() (jpeg, ofa int) {
	t := m.engineTotals()
	return t.jpeg, t.ofa
}
