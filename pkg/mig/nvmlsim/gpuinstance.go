package nvmlsim

import (
	"slices"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"

	"github.com/miglayout/miglayout/pkg/mig"
)

// gpuInstance is an nvml.GpuInstance: GI id on GPU index, with the GI's
// serial number uid (0 for the phantom a lying create returns), so a handle
// to a destroyed GI stays stale when its ID is reused.
type gpuInstance struct {
	*mock.GpuInstance
	s     *Sim
	index int
	id    int
	uid   uint64
}

var _ nvml.GpuInstance = gpuInstance{}

func (s *Sim) giHandle(index, id int, uid uint64) gpuInstance {
	return gpuInstance{GpuInstance: s.giMock, s: s, index: index, id: id, uid: uid}
}

// giCtx is what a GI operation works on.
type giCtx struct {
	st      *fileState
	g       *GPU
	m       *mig.Model
	gi      *GPUInstance
	profile *mig.Profile
	lie     bool
}

// with runs fn on the GI; ERROR_INVALID_ARGUMENT for a stale handle.
func (h gpuInstance) with(op string, mutating bool, fn func(c giCtx) (bool, nvml.Return)) nvml.Return {
	if h.s == nil {
		return nvml.ERROR_INVALID_ARGUMENT
	}
	return h.s.do(op, mutating, func(st *fileState, lie bool) (bool, nvml.Return) {
		g, m, ret := st.gpu(h.index)
		if ret != nvml.SUCCESS {
			return false, ret
		}
		gi := g.gi(h.id)
		if gi == nil || gi.UID != h.uid {
			return false, nvml.ERROR_INVALID_ARGUMENT
		}
		return fn(giCtx{st: st, g: g, m: m, gi: gi, profile: profileByID(m, gi.ProfileID), lie: lie})
	})
}

// GetInfo returns the GI's parent GPU handle, GI ID, GI profile ID and
// placement (memory slices). ERROR_INVALID_ARGUMENT for a stale handle.
func (h gpuInstance) GetInfo() (nvml.GpuInstanceInfo, nvml.Return) {
	var info nvml.GpuInstanceInfo
	ret := h.with("GpuInstance.GetInfo", false, func(c giCtx) (bool, nvml.Return) {
		info = nvml.GpuInstanceInfo{
			Device:    h.s.gpuHandle(h.index),
			Id:        uint32(c.gi.ID),
			ProfileId: uint32(c.gi.ProfileID),
			Placement: nvml.GpuInstancePlacement{Start: uint32(c.gi.Placement.Start), Size: uint32(c.gi.Placement.Size)},
		}
		return false, nvml.SUCCESS
	})
	return info, ret
}

// GetComputeInstanceProfileInfo returns the CI profile (see ciShape.info) for
// an NVML_COMPUTE_INSTANCE_PROFILE_* index and engine profile: the full-size
// CI (COMPUTE_INSTANCE_PROFILE_<N>_SLICE for an Ng GI, and 1_SLICE_REV1
// where rev1GI says) and the smaller ones
// the GI offers (ciShapeOf). ERROR_NOT_SUPPORTED for a profile it does not
// offer; ERROR_INVALID_ARGUMENT for an index out of range, an engine profile
// other than COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED, or a stale handle.
func (h gpuInstance) GetComputeInstanceProfileInfo(profile, engProfile int) (nvml.ComputeInstanceProfileInfo, nvml.Return) {
	var info nvml.ComputeInstanceProfileInfo
	ret := h.with("GpuInstance.GetComputeInstanceProfileInfo", false, func(c giCtx) (bool, nvml.Return) {
		if engProfile != nvml.COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED {
			return false, nvml.ERROR_INVALID_ARGUMENT
		}
		shape, r := ciShapeOf(c.m, c.profile, profile)
		if r != nvml.SUCCESS {
			return false, r
		}
		info = shape.info(c.profile)
		return false, nvml.SUCCESS
	})
	return info, ret
}

// CreateComputeInstance creates a CI of profile info.Id at the last free
// placement start of its profile (ciShape.starts; a 1c.3g goes to compute
// slice 2 and leaves slice 0 to a 2c.3g, as `nvidia-smi mig -cci 0,1`
// allows), with CI ID the smallest
// free ID >= 0 and a new MIG device UUID. ERROR_INVALID_ARGUMENT for a nil
// info, an Id out of range or a stale handle; ERROR_NOT_SUPPORTED for a
// profile the GI does not offer; ERROR_INSUFFICIENT_RESOURCES when no
// placement of the profile is free or its InstanceCount is reached. Op
// "CreateComputeInstance" (mutating).
func (h gpuInstance) CreateComputeInstance(info *nvml.ComputeInstanceProfileInfo) (nvml.ComputeInstance, nvml.Return) {
	var out nvml.ComputeInstance
	ret := h.with("CreateComputeInstance", true, func(c giCtx) (bool, nvml.Return) {
		if info == nil {
			return false, nvml.ERROR_INVALID_ARGUMENT
		}
		shape, r := ciShapeOf(c.m, c.profile, int(info.Id))
		if r != nvml.SUCCESS {
			return false, r
		}
		starts := freeStarts(c.m, c.profile, c.gi, shape)
		if len(starts) == 0 {
			return false, nvml.ERROR_INSUFFICIENT_RESOURCES
		}
		id := 0
		for c.gi.ci(id) != nil {
			id++
		}
		if c.lie {
			out = h.s.ciHandle(h, id, 0)
			return false, nvml.SUCCESS
		}
		serial := c.st.nextSerial()
		c.gi.ComputeInstances = append(c.gi.ComputeInstances, ComputeInstance{
			ID:        id,
			ProfileID: int(info.Id),
			Start:     starts[len(starts)-1],
			Size:      shape.slices,
			UUID:      migUUID(c.st.Seed, c.st.Spec, h.index, serial),
			UID:       serial,
		})
		// Ordered by CI ID, as State promises: a CI may take a smaller
		// ID a destroyed one freed.
		slices.SortFunc(c.gi.ComputeInstances, func(a, b ComputeInstance) int { return a.ID - b.ID })
		out = h.s.ciHandle(h, id, serial)
		return true, nvml.SUCCESS
	})
	if ret != nvml.SUCCESS {
		return nil, ret
	}
	return out, ret
}

// GetComputeInstances returns the GI's CIs of the CI profile info.Id, ordered
// by CI ID. ERROR_INVALID_ARGUMENT for a nil info, an info whose
// InstanceCount is 0 (refused by go-nvml before NVML is called, as for
// Device.GetGpuInstances), an Id out of range or a stale handle;
// ERROR_NOT_SUPPORTED for a profile the GI does not offer.
func (h gpuInstance) GetComputeInstances(info *nvml.ComputeInstanceProfileInfo) ([]nvml.ComputeInstance, nvml.Return) {
	if info == nil || info.InstanceCount == 0 {
		return nil, nvml.ERROR_INVALID_ARGUMENT
	}
	var out []nvml.ComputeInstance
	ret := h.with("GpuInstance.GetComputeInstances", false, func(c giCtx) (bool, nvml.Return) {
		if info == nil {
			return false, nvml.ERROR_INVALID_ARGUMENT
		}
		if _, r := ciShapeOf(c.m, c.profile, int(info.Id)); r != nvml.SUCCESS {
			return false, r
		}
		out = []nvml.ComputeInstance{}
		for _, ci := range c.gi.ComputeInstances {
			if ci.ProfileID == int(info.Id) {
				out = append(out, h.s.ciHandle(h, ci.ID, ci.UID))
			}
		}
		return false, nvml.SUCCESS
	})
	return out, ret
}

// GetComputeInstanceById returns the GI's CI with the given CI ID.
// ERROR_NOT_FOUND when there is none; ERROR_INVALID_ARGUMENT for a stale
// handle.
func (h gpuInstance) GetComputeInstanceById(id int) (nvml.ComputeInstance, nvml.Return) {
	var out nvml.ComputeInstance
	ret := h.with("GpuInstance.GetComputeInstanceById", false, func(c giCtx) (bool, nvml.Return) {
		ci := c.gi.ci(id)
		if ci == nil {
			return false, nvml.ERROR_NOT_FOUND
		}
		out = h.s.ciHandle(h, ci.ID, ci.UID)
		return false, nvml.SUCCESS
	})
	return out, ret
}

// GetComputeInstanceRemainingCapacity returns how many more CIs of profile
// info.Id fit next to the GI's CIs (remaining). Codes as
// GetComputeInstances.
func (h gpuInstance) GetComputeInstanceRemainingCapacity(info *nvml.ComputeInstanceProfileInfo) (int, nvml.Return) {
	n := 0
	ret := h.with("GpuInstance.GetComputeInstanceRemainingCapacity", false, func(c giCtx) (bool, nvml.Return) {
		if info == nil {
			return false, nvml.ERROR_INVALID_ARGUMENT
		}
		shape, r := ciShapeOf(c.m, c.profile, int(info.Id))
		if r != nvml.SUCCESS {
			return false, r
		}
		n = remaining(c.m, c.profile, c.gi, shape)
		return false, nvml.SUCCESS
	})
	return n, ret
}

// Destroy destroys the GI. ERROR_IN_USE while a process runs on it, a client
// holds it or one of its MIG devices (OpenClient, OpenGPUInstanceClient), or
// it has a CI; ERROR_INVALID_ARGUMENT for a stale handle (a GI already destroyed).
// Op "GpuInstance.Destroy" (mutating).
func (h gpuInstance) Destroy() nvml.Return {
	return h.with("GpuInstance.Destroy", true, func(c giCtx) (bool, nvml.Return) {
		if c.st.held(h.index, c.gi.ID, -1) || len(c.gi.ComputeInstances) > 0 {
			return false, nvml.ERROR_IN_USE
		}
		if c.lie {
			return false, nvml.SUCCESS
		}
		gis := c.g.GPUInstances
		for i := range gis {
			if gis[i].ID == h.id {
				c.g.GPUInstances = append(gis[:i:i], gis[i+1:]...)
				break
			}
		}
		if len(c.g.GPUInstances) == 0 {
			c.g.GPUInstances = nil
		}
		return true, nvml.SUCCESS
	})
}
