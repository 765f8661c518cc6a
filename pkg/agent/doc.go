// Package agent is the miglayout node agent's repartitioner: it brings each
// GPU of its node to the layout that the node's NodeMigLayout asks for,
// without ever destroying a device that is allocated, prepared or running a
// process, and without letting the scheduler see a stale inventory.
//
// For the GPUs that differ from their desired layout, one reconcile pass:
//
//  1. plans each GPU (mig.Model.Diff of actual → desired) and refuses
//     invalid input before touching hardware (phase Failed, InvalidLayout);
//  2. blocks a GPU whose devices to destroy are in use (phase Blocked,
//     DeviceInUse), or that may hold the device of an allocation of the
//     node's driver and pool naming no device the agent knows (phase
//     Blocked, UnknownAllocation: another publisher of the driver name,
//     another naming, a device gone from NVML; unknownAllocated);
//  3. drains: republishes the pool with the devices to destroy tainted
//     NoSchedule, waits the settle period so that scheduling decisions in
//     flight land, then re-reads ResourceClaim allocations from the API
//     server (not a cache); a device allocated meanwhile blocks its GPU;
//     the drained devices of the GPUs that go on are then withdrawn from
//     the pool (one more publication, waited for), so that no claim,
//     whatever it tolerates, is allocated one once it may be destroyed;
//  4. repartitions through the GPU manager under the per-GPU lock that the
//     kubelet plugin's prepare also takes, after checking once more that
//     no device to destroy has been allocated (the API server, read just
//     before the lock, and the cache under it: a claim that tolerates the
//     drain taint, or a scheduler decision taken before the withdrawal
//     reached it) or prepared (under the lock): destroy (CI then GI), then
//     create (largest first, GI then CI);
//  5. republishes the whole pool from NVML truth in one update.
//
// With binding conditions on (PoolInventory.Binding, agent flag
// --device-binding-conditions), every device is published with
// slices.BindingConditionReady and slices.BindingConditionRemoved, and the
// Binder answers them in the status of each claim allocated one of the
// node's devices: ready while the device is published and not draining,
// removed otherwise. BindingGate serialises those answers with drains, so
// the live re-check of step 3 can leave out an allocation that waits for an
// answer on a draining device: its pod is never bound (the scheduler gets
// DeviceRemoved, deallocates and tries again), however late the scheduler's
// decision landed. Without them, the settle period is the only margin.
//
// Every step is written to an on-disk journal before it starts, so an agent
// killed at any point finds on restart what it was doing; a GPU instance left
// without its compute instance is destroyed (rolled back) and the pass
// converges from NVML truth.
//
// The kubelet deletes the node's ResourceSlices when it starts, and the
// driver's once its plugin was unreachable for 30 s. Where a deletion
// leaves none of the pool's slices (wipedToNode), the last publication is
// published again at once, beside any pass under way (Republisher), and a
// pass follows, instead of waiting for the ResourceSlice controller's 30 s
// sync delay.
//
// A device stays prepared until the kubelet unprepares its claim. Where
// the kubelet never will (its own record of the claim was lost, or the pod
// and claim were force-deleted while the plugin was down), OrphanedClaims
// releases the preparation once the ResourceClaim has been gone for a
// grace period (the cache, then a live read, show it deleted or its name
// taken by another object).
package agent
