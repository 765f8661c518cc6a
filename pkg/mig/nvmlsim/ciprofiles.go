package nvmlsim

import (
	"fmt"
	"math/bits"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/miglayout/miglayout/pkg/mig"
)

// ciProfileSlices maps the NVML_COMPUTE_INSTANCE_PROFILE_* indexes the
// simulator models to their compute slices. 1_SLICE_REV1 is offered only
// in a 1g GI with more multiprocessors than a plain 1g (rev1GI) and in a
// 2g GI of Hopper (rev1In2g); 7_SLICE_NVL is not modelled
// (ERROR_NOT_SUPPORTED).
var ciProfileSlices = map[int]int{
	nvml.COMPUTE_INSTANCE_PROFILE_1_SLICE:      1,
	nvml.COMPUTE_INSTANCE_PROFILE_2_SLICE:      2,
	nvml.COMPUTE_INSTANCE_PROFILE_3_SLICE:      3,
	nvml.COMPUTE_INSTANCE_PROFILE_4_SLICE:      4,
	nvml.COMPUTE_INSTANCE_PROFILE_6_SLICE:      6,
	nvml.COMPUTE_INSTANCE_PROFILE_7_SLICE:      7,
	nvml.COMPUTE_INSTANCE_PROFILE_8_SLICE:      8,
	nvml.COMPUTE_INSTANCE_PROFILE_1_SLICE_REV1: 1,
}

// ciShape is one CI profile of a GI: its index, compute slices and the
// compute slices of the GI; multiprocessors where they are not the GI's
// share by compute slices (0: they are).
type ciShape struct {
	profile, slices, giSlices int
	multiprocessors           int
	// count is the CIs of the shape an empty GI holds, where it is not
	// giSlices / slices (0); holdsGI: a CI of the shape leaves no compute
	// slice of its GI to another CI (rev1In2g).
	count   int
	holdsGI bool
}

// rev1GI reports whether GI profile p of model m is a 1g GI with more
// multiprocessors than the model's plain 1g (GPU_INSTANCE_PROFILE_1_SLICE),
// as the 1g.20gb of Hopper (26 against 16) and later, and returns the
// plain 1g's. Such a GI offers two full-width CI profiles: 1_SLICE with
// the plain 1g's multiprocessors (nvidia-smi names its MIG device
// 1c.<GI profile>) and 1_SLICE_REV1 with all the GI's (named as the GI
// profile; what nvidia-smi mig -cgi 15 -C makes on an H100). Where the GI
// has a plain 1g's multiprocessors (A100's 1g.20gb), 1_SLICE is the full
// one and 1_SLICE_REV1 is not offered.
func rev1GI(m *mig.Model, p *mig.Profile) (plain int, ok bool) {
	if m == nil || p == nil || p.ComputeSlices != 1 {
		return 0, false
	}
	for i := range m.Profiles {
		if q := &m.Profiles[i]; q.NVMLProfile == nvml.GPU_INSTANCE_PROFILE_1_SLICE {
			return q.Multiprocessors, p.Multiprocessors > q.Multiprocessors
		}
	}
	return 0, false
}

// rev1In2g reports whether GI profile p of model m is a 2g GI of Hopper,
// which offers 1_SLICE_REV1 beside 1_SLICE, and returns its
// multiprocessors: those of the model's 1g GI with more than a plain 1g
// (rev1GI), one such CI per GI. nvidia-smi mig -lcip on an H100 SXM 2g.20gb
// GI lists "1c.2g.20gb, profile 0, 2/2, 16 SMs" and "1c.2g.20gb, profile 7,
// 1/1, 26 SMs" (NVIDIA/go-nvml issue 146, where such a CI an administrator
// made kept the GI from being destroyed). Its placement is not published:
// the simulator lets it take the whole GI (no CI beside it: 26 of the 2g's
// 32 multiprocessors leave no room for a 16-multiprocessor 1_SLICE one),
// and reports it at compute slice 0, one slice wide.
func rev1In2g(m *mig.Model, p *mig.Profile) (int, bool) {
	if m == nil || p == nil || p.ComputeSlices != 2 || m.Architecture != "Hopper" {
		return 0, false
	}
	for i := range m.Profiles {
		if q := &m.Profiles[i]; q.ComputeSlices == 1 {
			if plain, ok := rev1GI(m, q); ok && q.Multiprocessors > plain {
				return q.Multiprocessors, true
			}
		}
	}
	return 0, false
}

// ciShapeOf checks CI profile index profile against GI profile p of model
// m: ERROR_INVALID_ARGUMENT outside 0..COMPUTE_INSTANCE_PROFILE_COUNT-1;
// ERROR_NOT_SUPPORTED for a profile the GI does not offer. A GI of N compute
// slices offers the full-size CI and the smaller ones of at most half of N,
// rounded up (nvidia-smi mig -lcip: 1c.7g, 2c.7g, 3c.7g, 4c.7g and 7g on a
// 7g GI; 1c.4g, 2c.4g and 4g on a 4g one, no 3c.4g; 1c.3g, 2c.3g and 3g on
// a 3g one; 1c.2g and 2g on a 2g one), and a 1g GI the CI profiles rev1GI
// says.
func ciShapeOf(m *mig.Model, p *mig.Profile, profile int) (ciShape, nvml.Return) {
	if profile < 0 || profile >= nvml.COMPUTE_INSTANCE_PROFILE_COUNT {
		return ciShape{}, nvml.ERROR_INVALID_ARGUMENT
	}
	s, ok := ciProfileSlices[profile]
	if p == nil || !ok || s > p.ComputeSlices || (s != p.ComputeSlices && s > (p.ComputeSlices+1)/2) {
		return ciShape{}, nvml.ERROR_NOT_SUPPORTED
	}
	shape := ciShape{profile: profile, slices: s, giSlices: p.ComputeSlices}
	plain, rev1 := rev1GI(m, p)
	switch {
	case profile == nvml.COMPUTE_INSTANCE_PROFILE_1_SLICE_REV1 && !rev1:
		sms, ok := rev1In2g(m, p)
		if !ok {
			return ciShape{}, nvml.ERROR_NOT_SUPPORTED
		}
		shape.multiprocessors, shape.count, shape.holdsGI = sms, 1, true
	case profile == nvml.COMPUTE_INSTANCE_PROFILE_1_SLICE && rev1:
		shape.multiprocessors = plain
	}
	return shape, nvml.SUCCESS
}

// full reports whether the CI uses every compute slice and multiprocessor
// of its GI (the MIG device nvidia-smi names as the GI profile).
func (c ciShape) full() bool { return c.slices == c.giSlices && c.multiprocessors == 0 }

// instanceCount is how many CIs of the shape fit in an empty GI.
func (c ciShape) instanceCount() int {
	if c.count > 0 {
		return c.count
	}
	return c.giSlices / c.slices
}

// starts are the CI's possible placement starts (compute slices within the
// GI): the full-size CI at 0, a smaller one at multiples of its slice count
// rounded up to a power of two — the pattern of nvidia-smi mig -lcipp on an
// A100 7g GI (1c.7g at 0-6, 2c.7g at 0, 2, 4, 3c.7g at 0 and 4, 4c.7g at 0).
func (c ciShape) starts() []int {
	if c.slices == c.giSlices || c.holdsGI {
		return []int{0}
	}
	align := 1 << bits.Len(uint(c.slices-1))
	var out []int
	for s := 0; s+c.slices <= c.giSlices; s += align {
		out = append(out, s)
	}
	return out
}

// name is the CI's name as nvidia-smi gives it: the GI's profile for the
// full-size CI, "<slices>c.<GI profile>" (e.g. 1c.3g.40gb) otherwise.
func (c ciShape) name(giProfile string) string {
	if c.full() {
		return giProfile
	}
	return fmt.Sprintf("%dc.%s", c.slices, giProfile)
}

// info is the nvmlComputeInstanceProfileInfo_t of the shape on GI profile p:
// multiprocessors in proportion to the compute slices, the GI's engines
// shared.
func (c ciShape) info(p *mig.Profile) nvml.ComputeInstanceProfileInfo {
	return nvml.ComputeInstanceProfileInfo{
		Id:                    uint32(c.profile),
		SliceCount:            uint32(c.slices),
		InstanceCount:         uint32(c.instanceCount()),
		MultiprocessorCount:   uint32(c.multiprocessorsIn(p)),
		SharedCopyEngineCount: uint32(p.CopyEngines),
		SharedDecoderCount:    uint32(p.Decoders),
		SharedEncoderCount:    uint32(p.Encoders),
		SharedJpegCount:       uint32(p.JPEGEngines),
		SharedOfaCount:        uint32(p.OFAEngines),
	}
}

// multiprocessorsIn is the CI's multiprocessors in a GI of profile p.
func (c ciShape) multiprocessorsIn(p *mig.Profile) int {
	if c.multiprocessors > 0 {
		return c.multiprocessors
	}
	return p.Multiprocessors * c.slices / c.giSlices
}

// ciSpan is the compute slices (start, size) CI ci holds in GI gi of profile
// p; a CI recorded without them (state written before they were) is
// full-size.
func ciSpan(p *mig.Profile, ci *ComputeInstance) (start, size int) {
	if ci.Size == 0 && p != nil {
		return 0, p.ComputeSlices
	}
	return ci.Start, ci.Size
}

// ciHeld is the compute slices (start, size) CI ci keeps from other CIs in
// a GI of profile p of model m: its span (ciSpan), or the whole GI for a CI
// of a shape that holds it (ciShape.holdsGI: rev1In2g).
func ciHeld(m *mig.Model, p *mig.Profile, ci *ComputeInstance) (start, size int) {
	if shape, ret := ciShapeOf(m, p, ci.ProfileID); ret == nvml.SUCCESS && shape.holdsGI {
		return 0, shape.giSlices
	}
	return ciSpan(p, ci)
}

// freeStarts are the placement starts of shape c in GI gi (of profile p of
// model m) that overlap none of its CIs and keep the shape's InstanceCount.
func freeStarts(m *mig.Model, p *mig.Profile, gi *GPUInstance, c ciShape) []int {
	same := 0
	for i := range gi.ComputeInstances {
		if gi.ComputeInstances[i].ProfileID == c.profile {
			same++
		}
	}
	if same >= c.instanceCount() {
		return nil
	}
	held := c.slices
	if c.holdsGI {
		held = c.giSlices
	}
	var out []int
	for _, s := range c.starts() {
		free := true
		for i := range gi.ComputeInstances {
			start, size := ciHeld(m, p, &gi.ComputeInstances[i])
			if s < start+size && start < s+held {
				free = false
				break
			}
		}
		if free {
			out = append(out, s)
		}
	}
	return out
}

// remaining is how many more CIs of shape c fit in gi, placed one after the
// other at their last free start (as CreateComputeInstance places them).
func remaining(m *mig.Model, p *mig.Profile, gi *GPUInstance, c ciShape) int {
	probe := *gi
	probe.ComputeInstances = append([]ComputeInstance(nil), gi.ComputeInstances...)
	n := 0
	for {
		starts := freeStarts(m, p, &probe, c)
		if len(starts) == 0 {
			return n
		}
		probe.ComputeInstances = append(probe.ComputeInstances, ComputeInstance{ID: -1, ProfileID: c.profile, Start: starts[len(starts)-1], Size: c.slices})
		n++
	}
}
