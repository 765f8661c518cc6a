package agent

import "github.com/miglayout/miglayout/api/v1alpha1"

// maxEventNote is the longest note an events.k8s.io Event may carry (1 kB,
// the API server's validation); longer notes are cut.
const maxEventNote = 1024

// Event reasons the agent records on its NodeMigLayout.
const (
	// EventRepartitioned (Normal): a GPU now holds its desired layout.
	EventRepartitioned = "Repartitioned"
	// EventBlocked (Warning): a GPU cannot change because a device is in use
	// or a reset is needed.
	EventBlocked = "Blocked"
	// EventInvalidLayout (Warning): the desired layout is invalid for the GPU
	// (its row's reason InvalidLayout), or the GPU's model is not one the
	// catalog can check a layout for (UnknownGPU: no MIG, or a product the
	// catalog lacks).
	EventInvalidLayout = "InvalidLayout"
	// EventNVMLError (Warning): a GPU's change failed: NVML refused it.
	EventNVMLError = "NVMLError"
	// EventDeviceTaintsUnsupported (Warning): a GPU's change cannot start:
	// the API server drops the drain taints (DRA device taints are off),
	// so its devices cannot be drained first.
	EventDeviceTaintsUnsupported = "DeviceTaintsUnsupported"
	// EventGPUUnreadable (Warning): NVML cannot read a GPU (fallen off the
	// bus); its devices are no longer published.
	EventGPUUnreadable = "GPUUnreadable"
	// EventGPUMissing (Warning): the spec names a GPU NVML does not count
	// (taken out, or not enumerated since a reboot).
	EventGPUMissing = "GPUMissing"
	// EventDevicePluginActive (Warning): the node's kubelet advertises
	// NVIDIA's device plugin resources, so the agent publishes no device
	// and changes no GPU of the node (v1alpha1.ReasonDevicePluginActive).
	EventDevicePluginActive = "DevicePluginActive"
	// EventPassFailed (Warning): a pass that had shown a GPU Draining or
	// Repartitioning failed as a whole (e.g. the API server refused the
	// drain publication); the GPU is shown Pending, reason PassFailed, and
	// the pass is retried with backoff.
	EventPassFailed = "PassFailed"
	// EventDraining (Normal): devices are published with the drain taint.
	EventDraining = "Draining"
	// EventCatalogDiffers: NVML describes a GPU instance profile of a GPU
	// otherwise than miglayout's catalog: Normal for its values
	// (status.gpus[].nvmlProfiles, used in planning), Warning for its GI
	// profile ID or placements (status.gpus[].catalogMismatches: a layout
	// the catalog allows may be refused); recorded when what differs
	// changes.
	EventCatalogDiffers = "CatalogDiffers"
	// EventJournalUnwritable (Warning): the agent could not write its
	// journal (state directory full or read-only), so it took no NVML step
	// on the GPU.
	EventJournalUnwritable = ReasonJournalUnwritable
	// EventOrphanedClaimReleased (Warning): the kubelet plugin released the
	// preparation of a ResourceClaim that no longer exists or holds no
	// device of the node, which the kubelet never unprepared
	// (OrphanedClaims); its devices may be
	// destroyed or prepared again.
	EventOrphanedClaimReleased = "OrphanedClaimReleased"
	// EventPoolDeleted: the node's ResourceSlices were all deleted (by the
	// kubelet at its start, or after its DRA plugin was unreachable for
	// 30 s, or by hand), so the scheduler saw none of the node's devices:
	// Normal once the agent published the pool again (Republisher), with
	// how soon the API server served it; Warning where it could not (the
	// next pass publishes it).
	EventPoolDeleted = "PoolDeleted"
	// EventXidError (Warning): NVML reported an Xid critical error on one
	// of the node's GPUs; the devices it hit are reported Unhealthy to the
	// kubelet and published with the NoSchedule taint miglayout.io/xid
	// until the node reboots or a request clears them (XidError).
	EventXidError = "XidError"
	// EventXidsCleared (Normal, on the Node): the agent applied a request
	// of the Node's annotation miglayout.io/clear-xids, naming the marks it
	// cleared (applyClearXids).
	EventXidsCleared = "XidsCleared"
	// EventClearXidsRefused (Warning, on the Node): the Node's annotation
	// miglayout.io/clear-xids does not parse; nothing was cleared.
	EventClearXidsRefused = "ClearXidsRefused"
	// EventMIGModeTurnedOff (Normal, on the Node): a GPU no spec asks for,
	// which the agent's own interrupted work (stopped between its steps)
	// had left in MIG mode without GPU instances, had MIG mode turned off,
	// so it is published whole again (turnOffEmptied).
	EventMIGModeTurnedOff = "MIGModeTurnedOff"
	// EventEmptiedGPUInMIGMode (Warning, on the Node): likewise, but
	// turning MIG mode off waits for a GPU reset, so the change was
	// cancelled and the GPU stays in MIG mode without devices, published
	// as nothing, until a spec asks for it.
	EventEmptiedGPUInMIGMode = "EmptiedGPUInMIGMode"
	// EventJournalSetAside (Warning, on the Node): at its start the agent
	// found a journal it cannot read (another version's format, or
	// corrupt), set it aside and started with an empty one: the work it
	// recorded is not resumed (tellJournalSetAside).
	EventJournalSetAside = "JournalSetAside"
)

// ReasonJournalUnwritable is the reason of a GPU status row (phase Failed)
// whose change stopped because the journal could not be written.
const ReasonJournalUnwritable = v1alpha1.ReasonJournalUnwritable

// ReasonPassFailed is the reason of a GPU status row (phase Pending) whose
// change a failed pass left undone (EventPassFailed).
const ReasonPassFailed = v1alpha1.ReasonPassFailed
