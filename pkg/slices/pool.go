package slices

import (
	"context"
	"fmt"
	"slices"
	"strconv"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/resourceslice"

	"github.com/miglayout/miglayout/pkg/mig/gpu"
)

// DrainTaintKey is the key of the taint on devices about to be destroyed.
const DrainTaintKey = "miglayout.io/draining"

// DrainTaint returns the NoSchedule taint published on a device about to be
// destroyed: no new claim is allocated to it; claims already allocated keep
// it (the agent aborts the change for those). TimeAdded is left to the
// apiserver, and the resourceslice controller keeps it across updates.
func DrainTaint() resourceapi.DeviceTaint {
	return resourceapi.DeviceTaint{Key: DrainTaintKey, Effect: resourceapi.DeviceTaintEffectNoSchedule}
}

// XidTaintKey is the key of the taint on devices an Xid critical error hit
// (see XidTaint).
const XidTaintKey = "miglayout.io/xid"

// XidTaint returns the NoSchedule taint published on a device an Xid
// critical error hit, its value the Xid (e.g. "48"): no new claim is
// allocated to it; claims already allocated keep it (their pods' containers
// show the device Unhealthy). A claim that tolerates the key may still get
// it.
func XidTaint(code uint64) resourceapi.DeviceTaint {
	return resourceapi.DeviceTaint{Key: XidTaintKey, Value: strconv.FormatUint(code, 10), Effect: resourceapi.DeviceTaintEffectNoSchedule}
}

// TaintsOf reads the taints of note on a published device: whether it
// carries DrainTaint, and the value of its XidTaint ("" without one).
func TaintsOf(d resourceapi.Device) (draining bool, xid string) {
	for _, t := range d.Taints {
		switch t.Key {
		case DrainTaintKey:
			draining = true
		case XidTaintKey:
			xid = t.Value
		}
	}
	return draining, xid
}

// Source is one device of a node's pool with the facts it is built from.
type Source struct {
	// Name is the device name (GPUDeviceName or MIGDeviceName).
	Name string
	// GPU is the whole GPU, or the MIG device's parent.
	GPU gpu.GPU
	// MIG is the MIG device, nil for a whole GPU.
	MIG *gpu.MIGDevice
}

// Device returns the device s is published as.
func (s Source) Device() resourceapi.Device {
	if s.MIG == nil {
		return GPUDevice(s.GPU)
	}
	return MIGDevice(s.GPU, *s.MIG)
}

// Inventory is what NVML reports on a node: its GPUs in index order and, per
// GPU index, the GPU's MIG devices.
type Inventory struct {
	GPUs []gpu.GPU
	MIGs map[int][]gpu.MIGDevice
}

// ReadInventory reads the node's GPUs and, for those with MIG mode on, their
// MIG devices from m: NVML truth, no cache.
func ReadInventory(ctx context.Context, m gpu.Manager) (Inventory, error) {
	gpus, err := m.GPUs(ctx)
	if err != nil {
		// GPUs NVML cannot read fail the inventory too (the agent's
		// repartitioner leaves them out instead; see gpu.SplitUnreadable).
		return Inventory{}, fmt.Errorf("listing GPUs: %w", err)
	}
	inv := Inventory{GPUs: gpus, MIGs: map[int][]gpu.MIGDevice{}}
	for _, g := range gpus {
		if !g.MIGMode.Current {
			continue
		}
		migs, err := m.MIGDevices(ctx, g.Index)
		if err != nil {
			return Inventory{}, fmt.Errorf("listing MIG devices of GPU %d: %w", g.Index, err)
		}
		inv.MIGs[g.Index] = migs
	}
	return inv, nil
}

// Sources returns the devices of the pool the inventory makes, by GPU index,
// then placement start (Devices publishes them in SortDevices order): a GPU whose current
// MIG mode is off is one device; a GPU with MIG mode on contributes its MIG
// devices that have a compute instance and a UUID (a GI left without its CI
// is not usable and not published).
func (inv Inventory) Sources() []Source {
	gpus := slices.Clone(inv.GPUs)
	slices.SortStableFunc(gpus, func(a, b gpu.GPU) int { return a.Index - b.Index })
	var out []Source
	for _, g := range gpus {
		if !g.MIGMode.Current {
			out = append(out, Source{Name: GPUDeviceName(g.Index), GPU: g})
			continue
		}
		migs := slices.Clone(inv.MIGs[g.Index])
		slices.SortStableFunc(migs, func(a, b gpu.MIGDevice) int { return a.Placement.Start - b.Placement.Start })
		for i := range migs {
			d := migs[i]
			if d.CIID < 0 || d.UUID == "" {
				continue
			}
			out = append(out, Source{Name: MIGDeviceName(g.Index, d.Profile, d.ProfileID, d.Placement.Start), GPU: g, MIG: &d})
		}
	}
	return out
}

// Lookup returns the source of the device with the given name, if the
// inventory publishes one.
func (inv Inventory) Lookup(name string) (Source, bool) {
	for _, s := range inv.Sources() {
		if s.Name == name {
			return s, true
		}
	}
	return Source{}, false
}

// Devices returns the devices of the inventory's pool in publication order
// (SortDevices: smallest first, then least room lost); devices whose names are in draining carry
// DrainTaint.
func (inv Inventory) Devices(draining sets.Set[string]) []resourceapi.Device {
	return inv.TaintedDevices(draining, nil)
}

// TaintedDevices is Devices with more taints: those of taints, by device
// name, after the drain taint.
func (inv Inventory) TaintedDevices(draining sets.Set[string], taints map[string][]resourceapi.DeviceTaint) []resourceapi.Device {
	srcs := inv.Sources()
	out := make([]resourceapi.Device, 0, len(srcs))
	for _, s := range srcs {
		d := s.Device()
		if draining.Has(s.Name) {
			d.Taints = []resourceapi.DeviceTaint{DrainTaint()}
		}
		d.Taints = append(d.Taints, taints[s.Name]...)
		out = append(out, d)
	}
	SortDevices(out, RoomLost(srcs))
	return out
}

// BuildPool returns the driver resources of node nodeName: one pool named
// after the node holding the devices of gpus and migs (as Inventory.Sources
// selects them), the devices named in draining tainted with DrainTaint. The
// pool is one slice whenever it fits (see SplitDevices). It fails when a
// device or slice would break an API limit (ValidatePool).
func BuildPool(nodeName string, gpus []gpu.GPU, migs map[int][]gpu.MIGDevice, draining sets.Set[string]) (resourceslice.DriverResources, error) {
	return BuildTaintedPool(nodeName, gpus, migs, draining, nil)
}

// BuildTaintedPool is BuildPool with more taints, by device name
// (Inventory.TaintedDevices): the XidTaint of devices an Xid hit.
func BuildTaintedPool(nodeName string, gpus []gpu.GPU, migs map[int][]gpu.MIGDevice, draining sets.Set[string], taints map[string][]resourceapi.DeviceTaint) (resourceslice.DriverResources, error) {
	inv := Inventory{GPUs: gpus, MIGs: migs}
	return BuildPoolFromDevices(nodeName, inv.TaintedDevices(draining, taints))
}

// BuildPoolFromDevices is BuildPool for devices already built (the planner's
// hypothetical pools, tests).
func BuildPoolFromDevices(nodeName string, devices []resourceapi.Device) (resourceslice.DriverResources, error) {
	pool := resourceslice.Pool{}
	for _, chunk := range SplitDevices(devices) {
		pool.Slices = append(pool.Slices, resourceslice.Slice{Devices: chunk})
	}
	if err := ValidatePool(nodeName, pool); err != nil {
		return resourceslice.DriverResources{}, fmt.Errorf("building pool of node %s: %w", nodeName, err)
	}
	return resourceslice.DriverResources{Pools: map[string]resourceslice.Pool{nodeName: pool}}, nil
}

// SliceCapacity returns how many of the given devices one slice may hold:
// ResourceSliceMaxDevices (128), or ResourceSliceMaxDevicesWithAdvancedFeatures
// (64) when any of them has a taint.
func SliceCapacity(devices []resourceapi.Device) int {
	for _, d := range devices {
		if usesAdvancedFeatures(d) {
			return resourceapi.ResourceSliceMaxDevicesWithAdvancedFeatures
		}
	}
	return resourceapi.ResourceSliceMaxDevices
}

func usesAdvancedFeatures(d resourceapi.Device) bool {
	return len(d.Taints) > 0 || len(d.ConsumesCounters) > 0
}

// SplitDevices cuts devices, in order, into the slices of one pool: a single
// slice (possibly empty: an empty pool still shows the driver is up) whenever
// they fit one, else consecutive chunks of SliceCapacity devices. A pool of
// several slices changes through a generation bump (see the package
// documentation), one of a single slice in one object update.
func SplitDevices(devices []resourceapi.Device) [][]resourceapi.Device {
	n := SliceCapacity(devices)
	if len(devices) <= n {
		return [][]resourceapi.Device{devices}
	}
	var out [][]resourceapi.Device
	for len(devices) > 0 {
		k := min(n, len(devices))
		out = append(out, devices[:k:k])
		devices = devices[k:]
	}
	return out
}

// Publisher publishes a driver's resources; *kubeletplugin.Helper is one
// (the pool is then owned by the Node and written by the helper's
// resourceslice controller).
type Publisher interface {
	PublishResources(ctx context.Context, resources resourceslice.DriverResources) error
}

// Publish builds the pool of node nodeName from inv (BuildPool) and hands it
// to p. It returns once p has the new desired state; the controller writes it
// asynchronously.
func Publish(ctx context.Context, p Publisher, nodeName string, inv Inventory, draining sets.Set[string]) error {
	res, err := BuildPool(nodeName, inv.GPUs, inv.MIGs, draining)
	if err != nil {
		return fmt.Errorf("publishing pool of node %s: %w", nodeName, err)
	}
	if err := p.PublishResources(ctx, res); err != nil {
		return fmt.Errorf("publishing pool of node %s: %w", nodeName, err)
	}
	return nil
}

// ControllerPublisher adapts a running resourceslice.Controller (started with
// resourceslice.StartController) to Publisher, for callers that run the
// controller themselves instead of the kubeletplugin helper.
type ControllerPublisher struct{ Controller *resourceslice.Controller }

// PublishResources implements Publisher.
func (c ControllerPublisher) PublishResources(_ context.Context, resources resourceslice.DriverResources) error {
	c.Controller.Update(&resources)
	return nil
}
