package slices

import (
	"slices"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/dynamic-resource-allocation/resourceslice"
)

// Binding conditions (KEP-5007, DRA device binding conditions: beta and on by
// default from Kubernetes 1.36, feature gates DRADeviceBindingConditions and
// DRAResourceClaimDeviceStatus). A device published with them is allocated by
// the scheduler as usual, but the pod is bound to the node only once the
// claim's status.devices entry for the device has BindingConditionReady set
// True; BindingConditionRemoved set True fails the binding instead, and the
// scheduler deallocates the claim and schedules the pod again. The agent
// confirms a device only while it is published and not being drained, so an
// allocation the scheduler made from an inventory older than the drain taint
// can never reach a container: the window the settle period only narrows is
// closed. kube-scheduler (1.37) looks at the conditions right after the
// allocation, before the agent can have answered, then every 5 seconds, so
// every pod using such a device waits about 5 seconds longer to be bound.
const (
	// BindingConditionReady is set True by the agent on a device it keeps.
	BindingConditionReady = "miglayout.io/DeviceReady"
	// BindingConditionRemoved is set True by the agent on a device it is
	// draining or has destroyed.
	BindingConditionRemoved = "miglayout.io/DeviceRemoved"
)

// RequireBinding sets BindingConditionReady and BindingConditionRemoved on
// every device of res, in place. Binding conditions are not an advanced
// feature for the per-slice device limit, so the split of the pool does not
// change.
func RequireBinding(res *resourceslice.DriverResources) {
	for name, pool := range res.Pools {
		for i := range pool.Slices {
			for j := range pool.Slices[i].Devices {
				setBinding(&pool.Slices[i].Devices[j])
			}
		}
		res.Pools[name] = pool
	}
}

func setBinding(d *resourceapi.Device) {
	d.BindingConditions = []string{BindingConditionReady}
	d.BindingFailureConditions = []string{BindingConditionRemoved}
}

// RequiresBinding reports whether an allocation result carries
// BindingConditionReady: its pod is not bound until the agent confirms it.
func RequiresBinding(r resourceapi.DeviceRequestAllocationResult) bool {
	return slices.Contains(r.BindingConditions, BindingConditionReady)
}
