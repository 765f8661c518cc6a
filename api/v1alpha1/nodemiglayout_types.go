package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// GPUPhase is where one GPU stands on its way to the desired layout.
// +kubebuilder:validation:Enum=Pending;Draining;Repartitioning;Ready;Blocked;Failed;Unknown
type GPUPhase string

const (
	// PhasePending: the GPU differs from the desired layout and waits for its turn.
	PhasePending GPUPhase = "Pending"
	// PhaseDraining: devices to be destroyed are published with the drain
	// taint while the agent waits out the settle period.
	PhaseDraining GPUPhase = "Draining"
	// PhaseRepartitioning: the agent is destroying and creating GPU and
	// compute instances through NVML.
	PhaseRepartitioning GPUPhase = "Repartitioning"
	// PhaseReady: the GPU holds the desired layout and the pool shows it.
	PhaseReady GPUPhase = "Ready"
	// PhaseBlocked: a device that must go is allocated, prepared or runs a
	// process, or MIG mode waits for a GPU reset; the agent retries.
	PhaseBlocked GPUPhase = "Blocked"
	// PhaseFailed: the desired layout is invalid for this GPU or NVML refused
	// it; the hardware is left as it is.
	PhaseFailed GPUPhase = "Failed"
	// PhaseUnknown (MigLayout node rows only; agents never report it): the
	// node's agent stopped renewing its heartbeat Lease, so what its last
	// report says may no longer hold (reason AgentLost).
	PhaseUnknown GPUPhase = "Unknown"
)

// NodeMigLayout is the desired MIG layout of one node's GPUs, written by the
// miglayout controller, and the node agent's report of what the GPUs hold.
// Its name is the node name. Only the agent writes its status: the Ready
// and Reason columns are the agent's last report, which stands while the
// agent is lost (its MigLayout then shows the node Unknown, AgentLost).
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,shortName=nml
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="MigLayout",type=string,JSONPath=`.spec.migLayout`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type NodeMigLayout struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec NodeMigLayoutSpec `json:"spec"`
	// +optional
	Status NodeMigLayoutStatus `json:"status,omitempty"`
}

// MaxNodeGPUs is the most GPU entries a NodeMigLayout's spec, or GPU rows
// its status, may hold (MaxItems), and MaxGPUIndex the highest GPU index
// either may name (Maximum).
const (
	MaxNodeGPUs = 16
	MaxGPUIndex = 63
)

// NodeMigLayoutSpec is the desired layout of each GPU of the node.
type NodeMigLayoutSpec struct {
	// MigLayout names the MigLayout this node's desired state comes from.
	// +kubebuilder:validation:MaxLength=253
	// +optional
	MigLayout string `json:"migLayout,omitempty"`

	// GPUs lists the GPUs to configure; GPUs not listed are left as they are.
	// +kubebuilder:validation:MaxItems=16
	// +listType=map
	// +listMapKey=index
	// +optional
	GPUs []GPUSpec `json:"gpus,omitempty"`
}

// GPUSpec is the desired state of one GPU.
type GPUSpec struct {
	// Index is the NVML GPU index.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=63
	// +required
	Index int32 `json:"index"`
	// UUID is the UUID of the GPU this entry was written for ("GPU-..."),
	// as the status reported it at Index when the controller wrote it.
	// NVML numbers GPUs anew when one leaves the node or is not found at
	// boot, so that Index may name another GPU when the agent reads the
	// entry: the agent then changes nothing on that GPU (it is Blocked
	// with reason SpecForAnotherGPU, its devices published as they are)
	// until the entry is written for it. Empty (entries written by an
	// earlier release): whichever GPU NVML shows at Index.
	// +kubebuilder:validation:MaxLength=64
	// +optional
	UUID string `json:"uuid,omitempty"`
	// MIGEnabled is the wanted MIG mode.
	// +required
	MIGEnabled bool `json:"migEnabled"`
	// Layout is the wanted layout in canonical text form with explicit
	// placements ("" = no device), as MigLayout rules write it. Ignored when
	// MIGEnabled is false.
	// +kubebuilder:validation:MaxLength=256
	// +kubebuilder:validation:XValidation:rule="self == '' || self.matches('^[1-8]g[.][1-9][0-9]{0,3}gb([+]me|-me|[+]me[.]all|[+]gfx)?@([0-9]|[1-5][0-9]|6[0-3])(,[1-8]g[.][1-9][0-9]{0,3}gb([+]me|-me|[+]me[.]all|[+]gfx)?@([0-9]|[1-5][0-9]|6[0-3]))*$')",message="layouts look like 3g.40gb@0,2g.20gb@4,1g.10gb@6 (\"\" for no device): each device's profile and placement start (memory slice), comma-separated, no spaces"
	// +optional
	Layout string `json:"layout,omitempty"`
	// Reason says why this layout was chosen (the rule, or the pending pods
	// the planner serves).
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	Reason string `json:"reason,omitempty"`
	// ServedPods names the pending pods (namespace/name) an Auto plan made
	// this layout for; empty for Static layouts and for spare devices.
	// While the change is in flight the planner gives each of them, still
	// pending, the devices it brings before planning any other pod, so
	// that no second GPU is changed for one pod; and once none of them
	// waits for the new devices (deleted, or scheduled elsewhere; one
	// whose last scheduling try failed on a kube-scheduler error, reason
	// SchedulerError, still waits) before
	// the agent starts the GPU's NVML work, the change is cancelled. A
	// plan serving more pods than MaxItems lists the first ones; a change
	// listing MaxItems pods (all of them, or the first ones) is never
	// cancelled.
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=317
	// +listType=atomic
	// +optional
	ServedPods []string `json:"servedPods,omitempty"`
}

// NodeMigLayoutStatus is what the node agent observed and did.
type NodeMigLayoutStatus struct {
	// Conditions: Ready (every listed GPU holds its desired layout and the
	// pool is published) and Degraded.
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// ObservedGeneration is the spec generation the agent last acted on.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// GPUs has one entry per GPU of the node, whether or not the spec lists it.
	// +kubebuilder:validation:MaxItems=16
	// +listType=map
	// +listMapKey=index
	// +optional
	GPUs []GPUStatus `json:"gpus,omitempty"`
}

// GPUStatus is the observed state of one GPU.
type GPUStatus struct {
	// Index is the NVML GPU index.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=63
	// +required
	Index int32 `json:"index"`
	// UUID of the GPU ("GPU-...").
	// +kubebuilder:validation:MaxLength=64
	// +optional
	UUID string `json:"uuid,omitempty"`
	// Product is the product name NVML reports, e.g. "NVIDIA A100-SXM4-80GB".
	// +kubebuilder:validation:MaxLength=64
	// +optional
	Product string `json:"product,omitempty"`
	// Model is the catalog model name, empty when the catalog lacks the GPU.
	// +kubebuilder:validation:MaxLength=64
	// +optional
	Model string `json:"model,omitempty"`
	// Attributes are the GPU's properties the agent publishes on its devices
	// that the MIG catalog cannot know (driver version, PCI bus ID, minor
	// number...). The Auto planner gives its hypothetical devices these
	// values, so that selectors reading them judge as on the real devices.
	// +optional
	Attributes *GPUAttributes `json:"attributes,omitempty"`
	// NVMLProfiles are the GPU instance profiles that NVML describes on this
	// GPU otherwise than miglayout's catalog (a driver's values, placements
	// or GI profile ID, or catalog values no source confirmed), as NVML
	// does; empty when all agree or no table has been read. Devices are published
	// with NVML's values; the Auto planner gives its hypothetical devices of
	// these profiles the same, plans them only at placements both NVML and
	// the catalog offer, and plans none of a profile NVML gives another GI
	// profile ID (the agent refuses to create one, InvalidLayout). With MIG
	// mode off, the table last read (kept across agent restarts for the
	// loaded driver), else NVML's answer with MIG mode off where the driver
	// gives one.
	// +kubebuilder:validation:MaxItems=32
	// +listType=map
	// +listMapKey=profile
	// +optional
	NVMLProfiles []NVMLProfile `json:"nvmlProfiles,omitempty"`
	// CatalogMismatches say, one line each, where NVML's profile table on
	// this GPU differs from miglayout's catalog in what names and validates
	// devices: a profile NVML offers under another GI profile ID, at other
	// placements (nvmlDeviceGetGpuInstancePossiblePlacements) or not at
	// all, or one the catalog lacks (a newer driver's; its GPU instances,
	// named as nvidia-smi names them, are shown in Layout and destroyed
	// where the desired layout lacks them, never created). Layouts are then
	// planned within what both offer, and the agent refuses to create what
	// NVML would refuse (InvalidLayout, nothing touched); the catalog entry
	// needs correcting (a CatalogDiffers event, Warning, says so too).
	// Empty when all agree or the profile table has not been read (it is
	// read with MIG mode on; with MIG off, the table last read is kept, across
	// agent restarts for the loaded driver, else read with MIG mode off where
	// the driver answers then).
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MaxLength=256
	// +listType=atomic
	// +optional
	CatalogMismatches []string `json:"catalogMismatches,omitempty"`
	// MIGCapable says whether the GPU supports MIG (nvmlDeviceGetMigMode
	// answers other than ERROR_NOT_SUPPORTED); unset where the agent
	// predates the field. A rule that names neither a product nor GPU
	// indices leaves a GPU that does not support MIG alone.
	// +optional
	MIGCapable *bool `json:"migCapable,omitempty"`
	// MIGEnabled is the MIG mode in effect (nvmlDeviceGetMigMode's current
	// mode).
	// +optional
	MIGEnabled bool `json:"migEnabled"`
	// MIGPending is the MIG mode the GPU takes at its next reset
	// (nvmlDeviceGetMigMode's pending mode), not whether a change is
	// pending: it equals migEnabled except while a MIG mode change waits
	// for a GPU reset (an Ampere GPU with a process on it, or one the
	// driver cannot reset, as when passed through to a virtual machine).
	// +optional
	MIGPending bool `json:"migPending"`
	// Layout is the layout NVML reports, canonical text form.
	// +kubebuilder:validation:MaxLength=256
	// +optional
	Layout string `json:"layout,omitempty"`
	// InUse lists devices that must not be destroyed now (allocated,
	// prepared, or running a process), canonical text form.
	// +kubebuilder:validation:MaxLength=256
	// +optional
	InUse string `json:"inUse,omitempty"`
	// Phase of this GPU.
	// +optional
	Phase GPUPhase `json:"phase,omitempty"`
	// Reason is a CamelCase reason for the phase (see the Reason* constants).
	// +kubebuilder:validation:MaxLength=64
	// +optional
	Reason string `json:"reason,omitempty"`
	// Message explains the phase for people.
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	Message string `json:"message,omitempty"`
	// LastTransitionTime is when Phase last changed.
	// +optional
	LastTransitionTime *metav1.Time `json:"lastTransitionTime,omitempty"`
	// Xids are the Xid critical errors the node's agent holds against the
	// GPU (NVML events; kept until the node reboots or kubectl miglayout
	// clear-xids clears them, or, for a MIG device, until it is
	// destroyed). One without a device hit the GPU as a
	// whole: every device on it, made before or after, is reported
	// Unhealthy and published with the NoSchedule taint miglayout.io/xid
	// (it is then the only entry); one with a device hit that MIG device
	// only. The Auto planner makes no new device on a GPU listed here.
	// +kubebuilder:validation:MaxItems=8
	// +listType=atomic
	// +optional
	Xids []GPUXid `json:"xids,omitempty"`
	// IdleSince is when the agent first saw the GPU, in MIG mode, Ready
	// with no device in use, in the run of passes that ends with this one;
	// unset otherwise. Auto mode counts an idle GPU's time before it is
	// given back whole (policy.reclaimIdleGPUsAfterSeconds) from it too, so
	// that a restarted controller does not count afresh.
	// +optional
	IdleSince *metav1.Time `json:"idleSince,omitempty"`
}

// GPUXid is an Xid critical error that hit a GPU or one of its MIG
// devices (GPUStatus.Xids).
type GPUXid struct {
	// Xid is the Xid number, as NVIDIA's "XID Errors" guide
	// (docs.nvidia.com/deploy/xid-errors) lists them.
	// +kubebuilder:validation:Minimum=0
	// +required
	Xid int64 `json:"xid"`
	// Device is the published name of the MIG device the Xid hit; empty
	// for an Xid of the GPU as a whole.
	// +kubebuilder:validation:MaxLength=64
	// +optional
	Device string `json:"device,omitempty"`
}

// NVMLProfile is one GPU instance profile as NVML describes it
// (nvmlDeviceGetGpuInstanceProfileInfo).
type NVMLProfile struct {
	// Profile is the profile name, e.g. "3g.40gb".
	// +kubebuilder:validation:MaxLength=32
	// +required
	Profile string `json:"profile"`
	// MemoryMiB is the memory of one instance in MiB (NVML memorySizeMB).
	// +kubebuilder:validation:Minimum=0
	// +required
	MemoryMiB int64 `json:"memoryMiB"`
	// Multiprocessors, CopyEngines, Decoders, Encoders, JPEGEngines and
	// OFAEngines are the counts of one instance.
	// +kubebuilder:validation:Minimum=0
	// +optional
	Multiprocessors int32 `json:"multiprocessors,omitempty"`
	// CopyEngines is the count of copy engines of one instance.
	// +kubebuilder:validation:Minimum=0
	// +optional
	CopyEngines int32 `json:"copyEngines,omitempty"`
	// Decoders is the count of video decoders (NVDEC) of one instance.
	// +kubebuilder:validation:Minimum=0
	// +optional
	Decoders int32 `json:"decoders,omitempty"`
	// Encoders is the count of video encoders (NVENC) of one instance.
	// +kubebuilder:validation:Minimum=0
	// +optional
	Encoders int32 `json:"encoders,omitempty"`
	// JPEGEngines is the count of JPEG decoders (NVJPG) of one instance.
	// +kubebuilder:validation:Minimum=0
	// +optional
	JPEGEngines int32 `json:"jpegEngines,omitempty"`
	// OFAEngines is the count of optical flow accelerators of one instance.
	// +kubebuilder:validation:Minimum=0
	// +optional
	OFAEngines int32 `json:"ofaEngines,omitempty"`
	// PlacementStarts are the memory slices NVML's placements of the
	// profile start at (nvmlDeviceGetGpuInstancePossiblePlacements), where
	// they differ from the catalog's: those as wide as the catalog's
	// placements only, since devices are created that wide (NVML's others
	// are in catalogMismatches).
	// +kubebuilder:validation:MaxItems=8
	// +kubebuilder:validation:items:Minimum=0
	// +kubebuilder:validation:items:Maximum=7
	// +listType=atomic
	// +optional
	PlacementStarts []int32 `json:"placementStarts,omitempty"`
	// GIProfileID is the GI profile ID NVML gives the profile where it
	// differs from the catalog's: miglayout creates no device of it on this
	// GPU until its catalog agrees.
	// +kubebuilder:validation:Minimum=0
	// +optional
	GIProfileID *int32 `json:"giProfileID,omitempty"`
	// NotOffered: NVML does not offer the profile on this GPU at all
	// (nvmlDeviceGetGpuInstanceProfileInfo answers NOT_SUPPORTED), or only
	// at placements of another width than the catalog's: no device of it
	// is planned or created there.
	// +optional
	NotOffered bool `json:"notOffered,omitempty"`
}

// GPUAttributes are what NVML reports of a GPU beyond its model, as the
// agent publishes them on the GPU's ResourceSlice devices (attributes of the
// same names, those of NVIDIA's DRA driver).
type GPUAttributes struct {
	// PCIBusID is the domain:bus:device.function form, e.g. "0000:07:00.0".
	// +kubebuilder:validation:MaxLength=32
	// +optional
	PCIBusID string `json:"pciBusID,omitempty"`
	// PCIeRoot is the PCIe root complex the GPU sits under, as sysfs shows
	// it (resource.kubernetes.io/pcieRoot), e.g. "pci0000:00"; empty where
	// the agent could not read it.
	// +kubebuilder:validation:MaxLength=64
	// +optional
	PCIeRoot string `json:"pcieRoot,omitempty"`
	// NUMANode is the NUMA node of the GPU's PCI device, as sysfs shows it
	// (resource.kubernetes.io/numaNode); absent where it has no NUMA
	// affinity or the agent could not read it.
	// +kubebuilder:validation:Minimum=0
	// +optional
	NUMANode *int32 `json:"numaNode,omitempty"`
	// Minor is the device minor number (/dev/nvidia<minor>).
	// +kubebuilder:validation:Minimum=0
	// +optional
	Minor *int32 `json:"minor,omitempty"`
	// Brand is NVML's brand name, e.g. "Nvidia".
	// +kubebuilder:validation:MaxLength=64
	// +optional
	Brand string `json:"brand,omitempty"`
	// Architecture is e.g. "Ampere", "Hopper" or "Blackwell".
	// +kubebuilder:validation:MaxLength=64
	// +optional
	Architecture string `json:"architecture,omitempty"`
	// CUDAComputeCapability is e.g. "8.0".
	// +kubebuilder:validation:MaxLength=16
	// +optional
	CUDAComputeCapability string `json:"cudaComputeCapability,omitempty"`
	// DriverVersion is the NVIDIA driver version, e.g. "580.95.05".
	// +kubebuilder:validation:MaxLength=32
	// +optional
	DriverVersion string `json:"driverVersion,omitempty"`
	// CUDADriverVersion is the CUDA version the driver supports, e.g. "13.0".
	// +kubebuilder:validation:MaxLength=16
	// +optional
	CUDADriverVersion string `json:"cudaDriverVersion,omitempty"`
}

// +kubebuilder:object:root=true

// NodeMigLayoutList is a list of NodeMigLayouts.
type NodeMigLayoutList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []NodeMigLayout `json:"items"`
}
