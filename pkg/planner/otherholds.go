package planner

import (
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/structured"
)

// OtherHolds is what claims hold, or what a plan gives one pod, of other
// drivers' devices, as kube-scheduler's claim tracker counts it
// (structured.AllocatedState): whole devices, and shares of devices that
// allow multiple allocations (consumable capacity, on by default from
// Kubernetes 1.36: an allocation result with a ShareID) with the capacity
// each consumes. A shared device stays open to other claims while its
// capacity lasts.
type OtherHolds struct {
	// Devices are the devices held whole.
	Devices []structured.DeviceID
	// Shares are the shares held.
	Shares []structured.SharedDeviceID
	// Consumed is the capacity the shares consume
	// (DeviceRequestAllocationResult.ConsumedCapacity), one entry per
	// share that consumes any.
	Consumed []structured.DeviceConsumedCapacity
}

func (u OtherHolds) empty() bool {
	return len(u.Devices) == 0 && len(u.Shares) == 0 && len(u.Consumed) == 0
}

// Add counts an allocation result of another driver that was not given
// with admin access (which uses nothing up).
func (u *OtherHolds) Add(r resourceapi.DeviceRequestAllocationResult) {
	id := structured.MakeDeviceID(r.Driver, r.Pool, r.Device)
	if r.ShareID == nil {
		u.Devices = append(u.Devices, id)
		return
	}
	u.Shares = append(u.Shares, structured.MakeSharedDeviceID(id, r.ShareID))
	if r.ConsumedCapacity != nil {
		u.Consumed = append(u.Consumed, structured.NewDeviceConsumedCapacity(id, r.ConsumedCapacity))
	}
}

// otherTotal is a sum of OtherHolds.
type otherTotal struct {
	devices  sets.Set[structured.DeviceID]
	shares   sets.Set[structured.SharedDeviceID]
	capacity structured.ConsumedCapacityCollection
}

func newOtherTotal() otherTotal {
	return otherTotal{devices: sets.New[structured.DeviceID](), shares: sets.New[structured.SharedDeviceID](),
		capacity: structured.NewConsumedCapacityCollection()}
}

func (t otherTotal) add(u OtherHolds) {
	t.devices.Insert(u.Devices...)
	t.shares.Insert(u.Shares...)
	for _, c := range u.Consumed {
		t.capacity.Insert(c)
	}
}

func (t otherTotal) remove(u OtherHolds) {
	t.devices.Delete(u.Devices...)
	t.shares.Delete(u.Shares...)
	for _, c := range u.Consumed {
		t.capacity.Remove(c)
	}
}

// hasShareOf reports whether t holds a share of device id, or capacity
// of it.
func (t otherTotal) hasShareOf(id structured.DeviceID) bool {
	if _, ok := t.capacity[id]; ok {
		return true
	}
	for s := range t.shares {
		if s.Driver == id.Driver && s.Pool == id.Pool && s.Device == id.Device {
			return true
		}
	}
	return false
}

func (t otherTotal) clone() otherTotal {
	return otherTotal{devices: t.devices.Clone(), shares: t.shares.Clone(), capacity: t.capacity.Clone()}
}

// addTo adds t's devices, shares and capacity to state, but those of
// driver's pool pool (the planned one, whose use the caller counts).
func (t otherTotal) addTo(state *structured.AllocatedState, driver, pool string) {
	planned := func(d, p string) bool { return d == driver && p == pool }
	for id := range t.devices {
		if !planned(id.Driver.String(), id.Pool.String()) {
			state.AllocatedDevices.Insert(id)
		}
	}
	for id := range t.shares {
		if !planned(id.Driver.String(), id.Pool.String()) {
			state.AllocatedSharedDeviceIDs.Insert(id)
		}
	}
	for id, c := range t.capacity {
		if !planned(id.Driver.String(), id.Pool.String()) {
			state.AggregatedCapacity.Insert(structured.DeviceConsumedCapacity{DeviceID: id, ConsumedCapacity: c})
		}
	}
}
