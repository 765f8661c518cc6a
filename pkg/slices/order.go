package slices

import (
	"cmp"
	goslices "slices"

	resourceapi "k8s.io/api/resource/v1"
)

// SortDevices puts devices in publication order, smallest first: by memory
// capacity (bytes), then multiprocessors, then GPU index (a MIG device's
// parent's), then placement start, then name.
//
// kube-scheduler's allocator (k8s.io/dynamic-resource-allocation/structured)
// takes, for each request, the first device of a slice in order that the
// request accepts. Smallest first, a claim that accepts devices of several
// sizes ("memory at least 9000 MiB", or no selector at all) gets the
// smallest that fits rather than the first GPU's largest, which is what the
// Auto planner plans for it (the smallest device that satisfies the claim)
// and leaves large devices to claims only they satisfy.
func SortDevices(devices []resourceapi.Device) {
	goslices.SortStableFunc(devices, compareDevices)
}

func compareDevices(a, b resourceapi.Device) int {
	if c := cmp.Compare(capacity(a, CapMemory), capacity(b, CapMemory)); c != 0 {
		return c
	}
	if c := cmp.Compare(capacity(a, CapMultiprocessors), capacity(b, CapMultiprocessors)); c != 0 {
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
