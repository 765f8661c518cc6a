package nvmlsim

import (
	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
)

// computeInstance is an nvml.ComputeInstance: CI id of the GI gi names, with
// the CI's serial number uid (0 for the phantom a lying create returns).
type computeInstance struct {
	*mock.ComputeInstance
	s   *Sim
	gi  gpuInstance
	id  int
	uid uint64
}

var _ nvml.ComputeInstance = computeInstance{}

func (s *Sim) ciHandle(gi gpuInstance, id int, uid uint64) computeInstance {
	return computeInstance{ComputeInstance: s.ciMock, s: s, gi: gi, id: id, uid: uid}
}

// with runs fn on the CI; ERROR_INVALID_ARGUMENT for a stale handle (its GI
// or itself destroyed).
func (h computeInstance) with(op string, mutating bool, fn func(c giCtx, ci *ComputeInstance) (bool, nvml.Return)) nvml.Return {
	if h.s == nil {
		return nvml.ERROR_INVALID_ARGUMENT
	}
	return h.gi.with(op, mutating, func(c giCtx) (bool, nvml.Return) {
		ci := c.gi.ci(h.id)
		if ci == nil || ci.UID != h.uid {
			return false, nvml.ERROR_INVALID_ARGUMENT
		}
		return fn(c, ci)
	})
}

// GetInfo returns the CI's parent GPU and GI handles, CI ID, CI profile ID
// and placement (compute slices within the GI).
// ERROR_INVALID_ARGUMENT for a stale handle.
func (h computeInstance) GetInfo() (nvml.ComputeInstanceInfo, nvml.Return) {
	var info nvml.ComputeInstanceInfo
	ret := h.with("ComputeInstance.GetInfo", false, func(c giCtx, ci *ComputeInstance) (bool, nvml.Return) {
		start, size := ciSpan(c.profile, ci)
		info = nvml.ComputeInstanceInfo{
			Device:      h.s.gpuHandle(h.gi.index),
			GpuInstance: h.gi,
			Id:          uint32(ci.ID),
			ProfileId:   uint32(ci.ProfileID),
			Placement:   nvml.ComputeInstancePlacement{Start: uint32(start), Size: uint32(size)},
		}
		return false, nvml.SUCCESS
	})
	return info, ret
}

// Destroy destroys the CI, and with it the MIG device and its UUID.
// ERROR_IN_USE while a process runs on it or a client holds it (OpenClient);
// ERROR_INVALID_ARGUMENT for a stale handle. Op "ComputeInstance.Destroy"
// (mutating).
func (h computeInstance) Destroy() nvml.Return {
	return h.with("ComputeInstance.Destroy", true, func(c giCtx, ci *ComputeInstance) (bool, nvml.Return) {
		if c.st.held(h.gi.index, c.gi.ID, ci.ID) {
			return false, nvml.ERROR_IN_USE
		}
		if c.lie {
			return false, nvml.SUCCESS
		}
		cis := c.gi.ComputeInstances
		for i := range cis {
			if cis[i].ID == h.id {
				c.gi.ComputeInstances = append(cis[:i:i], cis[i+1:]...)
				break
			}
		}
		if len(c.gi.ComputeInstances) == 0 {
			c.gi.ComputeInstances = nil
		}
		return true, nvml.SUCCESS
	})
}
