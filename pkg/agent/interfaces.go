package agent

import (
	"context"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/miglayout/miglayout/pkg/mig/gpu"
)

// GPUState is one GPU as NVML reports it now, with its MIG devices (GPU
// instances and their compute instances), ordered by placement start.
type GPUState struct {
	GPU     gpu.GPU
	Devices []gpu.MIGDevice
}

// Inventory publishes the node's DRA pool.
type Inventory interface {
	// Publish replaces the node's pool with the devices of gpus (whole GPUs
	// with MIG off, MIG devices otherwise). Devices whose names are in
	// draining are published with the NoSchedule drain taint.
	Publish(ctx context.Context, gpus []GPUState, draining sets.Set[string]) error
	// DeviceName is the published name of a MIG device, or of the whole GPU
	// when d is nil.
	DeviceName(g gpu.GPU, d *gpu.MIGDevice) string
}

// Republisher is an Inventory that can publish its last publication again
// at once, outside a pass (PoolInventory): the agent does so when the node's
// pool was deleted (wipedToNode), so that the scheduler sees the node's
// devices again without waiting for a pass under way to end.
type Republisher interface {
	// Republish publishes the last publication again and waits until the
	// API server serves the pool; false where there was none yet.
	Republish(ctx context.Context) (bool, error)
}

// Allocations reports which of this node's devices ResourceClaims reference.
type Allocations interface {
	// AllocatedDevices returns the names of the devices of this driver and
	// pool that any ResourceClaim allocation references. With live set it
	// reads from the API server, bypassing caches.
	AllocatedDevices(ctx context.Context, live bool) (sets.Set[string], error)
}

// GuardedAllocations is an Allocations that can also read, from its cache,
// the allocations that may still get a pod bound (ClaimAllocations: less
// those a binding gate will refuse). The repartitioner's check under a
// GPU's lock uses it where the Allocations has it, AllocatedDevices from
// the cache otherwise.
type GuardedAllocations interface {
	GuardedDevices(ctx context.Context) (sets.Set[string], error)
}

// Prepared reports devices prepared for containers by the kubelet plugin.
type Prepared interface {
	// PreparedDevices returns the names of the prepared devices.
	PreparedDevices() sets.Set[string]
}

// PreparedUUIDs is a Prepared that also reports the UUIDs of the devices
// it prepared (MIG device UUIDs, "MIG-...", and GPU UUIDs, "GPU-...", of
// whole GPUs). A device's published name carries its GPU's NVML index,
// which changes where NVML numbers the GPUs anew (a GPU taken off the node
// without a reboot): the repartitioner then also holds, under whatever name
// it has now, every device whose UUID is prepared (preparedNames).
type PreparedUUIDs interface {
	PreparedUUIDs() sets.Set[string]
}

// RecreatedRefresher is a Prepared that can bring preparations up to date
// with devices created again under their names (new UUIDs) while their
// claims stayed prepared: a GPU reset destroyed a running pod's MIG device
// and a pass made it again. The kubelet prepares a claim again only after
// its own restart, so the pod's next container would otherwise get the
// destroyed device. Errors, by claim, are logged; a later pass tries again.
type RecreatedRefresher interface {
	RefreshRecreated(ctx context.Context) map[types.UID]error
}

// GPULocks serialises repartitioning with the kubelet plugin's prepare.
type GPULocks interface {
	// BeginReconfigure marks the GPU as being reconfigured and waits until no
	// prepare holds it; prepare of its devices fails until the returned
	// function is called. It fails only when ctx ends.
	BeginReconfigure(ctx context.Context, gpuIndex int) (end func(), err error)
}

// DeviceFaults reports the devices a hardware error hit.
type DeviceFaults interface {
	// XidOf returns the Xid critical error that hit the device with UUID
	// uuid (a MIG device's; "" for the GPU itself) on GPU gpuIndex, whose
	// UUID is gpuUUID ("" where NVML cannot read it), if one did. A mark
	// of the whole GPU is found by gpuUUID where both know it, as NVML may
	// have numbered the GPUs anew.
	XidOf(gpuIndex int, gpuUUID, uuid string) (uint64, bool)
}
