package v1alpha1

// Condition types of MigLayout and NodeMigLayout status.
const (
	// ConditionReady is True when every selected node's GPUs hold their
	// desired layouts and their pools are published.
	ConditionReady = "Ready"
	// ConditionProgressing is True while some node has a change under way
	// (draining, repartitioning, retrying a failed pass, or waiting for its
	// turn under maxNodesChanging: the rollout goes on); Degraded says what
	// holds it where a node is Blocked or Failed.
	ConditionProgressing = "Progressing"
	// ConditionDegraded is True when some GPU is Blocked or Failed, or the
	// agent's passes have kept failing on it for 10 minutes (PassFailed,
	// counted by the controller from the first failure it sees, and kept
	// through the retries until one succeeds), the
	// layout cannot be computed for some node, some node's agent is lost
	// (its heartbeat Lease is not renewed), or part of the spec applies to
	// no GPU of the selected nodes (a dead rule, a profile no GPU offers).
	ConditionDegraded = "Degraded"
	// ConditionConflict is True when another MigLayout selects one of this
	// MigLayout's nodes; such nodes are left as they are.
	ConditionConflict = "Conflict"
	// ConditionPaused is True while spec.paused is set: no change is
	// started on the MigLayout's nodes (changes under way finish).
	ConditionPaused = "Paused"
)

// Condition reasons. Each condition's Reason is one of these.
const (
	// ReasonAllNodesReady (Ready=True): every selected node is Ready.
	ReasonAllNodesReady = "AllNodesReady"
	// ReasonNoNodes (Ready=False, Progressing=False, Degraded=True, and a
	// Warning event): the selector picks no node, most often a typo in a
	// label; the MigLayout applies to nothing.
	ReasonNoNodes = "NoNodes"
	// ReasonNodesNotReady (Ready=False): some node is not Ready yet; the message counts them.
	ReasonNodesNotReady = "NodesNotReady"
	// ReasonRepartitioning (Progressing=True): some node has a change under
	// way (see ConditionProgressing); the message names them. Also a GPU row's reason while the agent changes its
	// MIG devices (phase Repartitioning).
	ReasonRepartitioning = "Repartitioning"
	// ReasonStable (Progressing=False): no node is changing.
	ReasonStable = "Stable"
	// ReasonInvalidLayout (Degraded=True, GPU Failed): a rule asks for a
	// layout that a selected GPU cannot hold (unknown profile, impossible
	// counts or placements); the GPU is not touched.
	ReasonInvalidLayout = "InvalidLayout"
	// ReasonUnknownGPU (Degraded=True, GPU Failed): the GPU model is not in
	// the catalog, so no layout can be validated for it.
	ReasonUnknownGPU = "UnknownGPU"
	// ReasonDeviceInUse (Degraded=True, GPU Blocked): a device that must be
	// destroyed is allocated to a claim, prepared, or runs a process.
	ReasonDeviceInUse = "DeviceInUse"
	// ReasonSpecForAnotherGPU (Degraded=True, GPU Blocked): the spec entry
	// of the GPU's index was written for another GPU (GPUSpec.UUID): NVML
	// numbered the GPUs anew (one left the node, or was not found at boot). The agent
	// changes nothing on the GPU until the controller writes the entry
	// for it, which it does once it reads the new status.
	ReasonSpecForAnotherGPU = "SpecForAnotherGPU"
	// ReasonUnknownAllocation (Degraded=True, GPU Blocked): a ResourceClaim
	// allocation of the node's driver and pool names a device that no GPU of
	// the node has under the agent's device names (another publisher of the
	// same driver name, names of another version, or a device gone from
	// NVML that the agent could not make again: its placement taken, the GPU
	// out of MIG mode or of no known model). The agent cannot tell which device it holds, so it destroys
	// nothing on the GPU the name points to (on every GPU of the node where
	// it names none) and reports all of that GPU's devices in use until the
	// allocation is gone.
	ReasonUnknownAllocation = "UnknownAllocation"
	// ReasonResetRequired (Degraded=True, GPU Blocked): a MIG mode change waits for a GPU reset.
	ReasonResetRequired = "ResetRequired"
	// ReasonNVMLError (Degraded=True, GPU Failed or retrying): NVML refused an operation.
	ReasonNVMLError = "NVMLError"
	// ReasonGPUUnreadable (Degraded=True, GPU Failed): NVML counts the GPU
	// but cannot read it (fallen off the bus, an Xid 79: every call gives
	// ERROR_GPU_IS_LOST until the node reboots; or another code that lasts,
	// such as ERROR_NO_PERMISSION, its device node not given to the agent,
	// or ERROR_INSUFFICIENT_POWER: see gpu.Unreadable). Its devices are not published,
	// nothing is changed on it, the node's other GPUs go on, and the agent
	// reads it again with backoff. (An error that may pass fails the pass
	// instead.)
	ReasonGPUUnreadable = "GPUUnreadable"
	// ReasonGPUMissing (Degraded=True, GPU Failed): the spec names a GPU
	// NVML does not count (taken out, not enumerated since a reboot, or an
	// index written by hand). Its row keeps what identified it when it was
	// last read; nothing is changed on it. Like GPUUnreadable it holds no
	// slot of maxNodesChanging and its spec is kept, until it is back or
	// its NodeMigLayout is deleted (made again with the GPUs NVML shows).
	ReasonGPUMissing = "GPUMissing"
	// ReasonDeviceTaintsUnsupported (Degraded=True, GPU Failed): the API
	// server drops the drain taints of ResourceSlice devices (DRA device
	// taints are off), so the agent cannot keep the scheduler off devices it
	// would destroy and leaves the GPU as it is; it retries with backoff.
	ReasonDeviceTaintsUnsupported = "DeviceTaintsUnsupported"
	// ReasonDevicePluginActive (Degraded=True, GPU Failed): the node's
	// kubelet advertises the extended resources of NVIDIA's device plugin
	// (nvidia.com/gpu, nvidia.com/gpu.shared and the like, nvidia.com/mig-<profile>,
	// allocatable above zero),
	// which hands the node's GPUs and MIG devices to pods outside DRA: the
	// agent publishes no device of the node (the scheduler would give one
	// device to a claim and to a device-plugin pod) and changes no GPU (a
	// device-plugin pod between CUDA processes shows in no check) until the
	// device plugin is off on the node. Like GPUUnreadable it holds no slot
	// of maxNodesChanging, and Auto mode plans nothing on the node.
	ReasonDevicePluginActive = "DevicePluginActive"
	// ReasonAgentNotReporting (Ready=False): no agent has reported the node's GPUs yet.
	ReasonAgentNotReporting = "AgentNotReporting"
	// ReasonAgentLost (Degraded=True; Ready=False where every node not
	// Ready is lost or silent; node row phase Unknown): the node's agent
	// reported its GPUs once but has stopped renewing its heartbeat Lease
	// (AgentLeaseName) for the Lease's duration, or its Lease has been
	// deleted for 40 s: it crashed or stopped, lost its API server
	// connection, or was removed. (The Lease is renewed beside the agent's
	// work: an agent whose work hangs while the process runs is not
	// detected here, but fails its /healthz, and so its liveness probe,
	// once a pass runs too long.) An agent that reported but holds no
	// Lease the controller has seen is lost 40 s after the controller
	// starts, or first finds it so (it died, or was uninstalled, while no
	// controller ran). The node's
	// GPUs are shown as last reported; in Auto mode the planner changes
	// nothing on the node and serves no pod there until the agent is back.
	ReasonAgentLost = "AgentLost"
	// ReasonNodeMigLayoutWriteFailed (Degraded=True, node row phase
	// Failed): the controller could not create or write the node's
	// NodeMigLayout, because the API server refused it (an admission
	// webhook or policy, RBAC, an invalid object); the row's message gives
	// the API server's answer. The node's agent keeps working to the spec it
	// was last given, if any. A write that lost a race (a conflict) is
	// retried at once and not reported.
	ReasonNodeMigLayoutWriteFailed = "NodeMigLayoutWriteFailed"
	// ReasonNoProblems (Degraded=False).
	ReasonNoProblems = "NoProblems"
	// ReasonOverlappingSelectors (Conflict=True): another MigLayout selects
	// some of the same nodes; the message names it and the nodes.
	ReasonOverlappingSelectors = "OverlappingSelectors"
	// ReasonNoConflict (Conflict=False).
	ReasonNoConflict = "NoConflict"
	// ReasonPaused (Paused=True; Progressing=False where no change is
	// under way): spec.paused is set, and the MigLayout starts no change on
	// its nodes (a Static node whose rules ask for another layout is
	// Pending, its row's message saying it is paused).
	ReasonPaused = "Paused"
	// ReasonNotPaused (Paused=False).
	ReasonNotPaused = "NotPaused"
	// ReasonLayoutApplied (NodeMigLayout Ready=True).
	ReasonLayoutApplied = "LayoutApplied"
	// ReasonGPUsNotReady (NodeMigLayout Ready=False): some GPU of the node
	// is not Ready (draining, repartitioning, pending, blocked or failed);
	// the message names them and their phases.
	ReasonGPUsNotReady = "GPUsNotReady"
	// ReasonRuleMatchesNoGPU (Degraded=True): a Static rule is the first
	// match of no GPU of the selected nodes (its productName or gpuIndices
	// match nothing, or earlier rules take every GPU it matches); the
	// message lists the GPUs the agents reported. Checked once every
	// selected node has reported.
	ReasonRuleMatchesNoGPU = "RuleMatchesNoGPU"
	// ReasonProfileNotOffered (Degraded=True): an Auto policy's allowed
	// profile or spare is a profile no GPU model of the selected nodes has.
	ReasonProfileNotOffered = "ProfileNotOffered"
	// ReasonSparesNotHoldable (Degraded=True): an Auto policy asks for more
	// spares of a profile per node than some node's GPUs can hold at all, or
	// for spares that some node's GPUs cannot hold all at once (as far as a
	// bounded search can tell: mig.HoldTogether).
	ReasonSparesNotHoldable = "SparesNotHoldable"
	// ReasonInvalidSelector (Degraded=True, Ready=False): the MigLayout's
	// nodeSelector does not parse (a malformed label key or value, where the
	// chart's migLayoutSelectorPolicy does not refuse it); no node is
	// selected and nothing new is written to the nodes it holds (a change
	// written before goes on there: Progressing names the nodes on their
	// way to it); the NodeMigLayout of a node deleted goes.
	ReasonInvalidSelector = "InvalidSelector"
)

// Reasons of a NodeMigLayout GPU row (status.gpus[].reason) besides the
// condition reasons above that rows carry too (LayoutApplied, DeviceInUse,
// ResetRequired, NVMLError, GPUUnreadable, InvalidLayout, UnknownGPU,
// SpecForAnotherGPU, DevicePluginActive, GPUMissing, UnknownAllocation,
// DeviceTaintsUnsupported, Repartitioning).
const (
	// ReasonDraining (GPU Draining): the devices that must go are published
	// with the drain taint, and the agent waits out the settle period.
	ReasonDraining = "Draining"
	// ReasonPending (GPU Pending): the GPU does not hold its desired layout
	// yet (a change follows, or the pass left it different and retries).
	ReasonPending = "Pending"
	// ReasonPassFailed (GPU Pending; Degraded=True once passes have kept
	// failing on the GPU for 10 minutes, retries included, and until a
	// retry succeeds, also while one drains or repartitions): the pass stopped (its publication or
	// NVML observation failed, or the agent is stopping), or this GPU's
	// change stopped on an error that is not NVML's (the API server could
	// not be read), before the change was done; the agent retries, or takes
	// it up when it starts.
	ReasonPassFailed = "PassFailed"
	// ReasonJournalUnwritable (Degraded=True, GPU Failed): the agent cannot
	// write its journal (state directory full or read-only), so it takes no
	// NVML step on the GPU.
	ReasonJournalUnwritable = "JournalUnwritable"
)
