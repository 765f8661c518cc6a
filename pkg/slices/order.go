package slices

import (
	"cmp"
	goslices "slices"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/miglayout/miglayout/pkg/mig"
)

// SortDevices puts devices in publication order, smallest first: by memory
// capacity (bytes), then multiprocessors, then, among MIG devices of one
// size, the one that takes the least room for large profiles first
// (roomLost, by device name: mig.Model.RoomLost, compared
// lexicographically; a device not in it comes first), then GPU index (a
// MIG device's parent's), then placement start, then name.
//
// kube-scheduler's allocator (k8s.io/dynamic-resource-allocation/structured)
// takes, for each request, the first device of a slice in order that the
// request accepts. Smallest first, a claim that accepts devices of several
// sizes ("memory at least 9000 MiB", or no selector at all) gets the
// smallest that fits rather than the first GPU's largest, which is what the
// Auto planner plans for it (the smallest device that satisfies the claim)
// and leaves large devices to claims only they satisfy. Least room lost
// next, a claim that several free devices of one profile satisfy gets the
// one whose placement spoils the least, as the planner places it (a
// 1g.10gb at memory slice 6 before one at slice 0, which holds the only
// 4g.40gb placement of an A100; a 3g.40gb in the right half before the
// left), rather than the first GPU's first.
func SortDevices(devices []resourceapi.Device, roomLost map[string][]int) {
	goslices.SortStableFunc(devices, func(a, b resourceapi.Device) int {
		return compareDevices(a, b, roomLost)
	})
}

// RoomLost returns mig.Model.RoomLost of each MIG device of sources, by
// device name, for SortDevices: on the model its GPU is planned on
// (gpu.GPU.PlanningModel: NVML's values and placements), as the Auto
// planner orders the devices it plans.
func RoomLost(sources []Source) map[string][]int {
	out := make(map[string][]int, len(sources))
	models := map[int]*mig.Model{} // by GPU index
	for _, s := range sources {
		if s.MIG == nil || s.GPU.Model == nil {
			continue
		}
		m, ok := models[s.GPU.Index]
		if !ok {
			m = s.GPU.PlanningModel()
			models[s.GPU.Index] = m
		}
		if r := m.RoomLost(mig.Device{Profile: s.MIG.Profile, Start: s.MIG.Placement.Start}); r != nil {
			out[s.Name] = r
		}
	}
	return out
}

func compareDevices(a, b resourceapi.Device, roomLost map[string][]int) int {
	if c := cmp.Compare(capacity(a, CapMemory), capacity(b, CapMemory)); c != 0 {
		return c
	}
	if c := cmp.Compare(capacity(a, CapMultiprocessors), capacity(b, CapMultiprocessors)); c != 0 {
		return c
	}
	if c := goslices.Compare(roomLost[a.Name], roomLost[b.Name]); c != 0 {
		return c
	}
	if c := cmp.Compare(gpuIndex(a), gpuIndex(b)); c != 0 {
		return c
	}
	if c := cmp.Compare(intAttr(a, AttrPlacementStart), intAttr(b, AttrPlacementStart)); c != 0 {
		return c
	}
	return cmp.Compare(a.Name, b.Name)
}

// capacity is the device's capacity of that name in its base unit (bytes,
// or a count); zero where it has none.
func capacity(d resourceapi.Device, name resourceapi.QualifiedName) int64 {
	if c, ok := d.Capacity[name]; ok {
		return c.Value.Value()
	}
	return 0
}

// gpuIndex is the GPU a device is of: a MIG device's parent, a whole GPU
// itself.
func gpuIndex(d resourceapi.Device) int64 {
	if _, ok := d.Attributes[AttrParentIndex]; ok {
		return intAttr(d, AttrParentIndex)
	}
	return intAttr(d, AttrIndex)
}

func intAttr(d resourceapi.Device, name resourceapi.QualifiedName) int64 {
	if a, ok := d.Attributes[name]; ok && a.IntValue != nil {
		return *a.IntValue
	}
	return 0
}
