// Package slices is miglayout's DRA inventory: it turns the GPUs and MIG
// devices the GPU manager reports (gpu.GPU, gpu.MIGDevice) into
// resource.k8s.io/v1 Devices, groups them into the node's pool, and hands the
// pool to the kubeletplugin helper (Helper.PublishResources), whose
// resourceslice controller writes the ResourceSlice objects, owned by the
// Node.
//
// It is the single place that decides what a device looks like to the
// scheduler: the agent publishes real devices with GPUDevice and MIGDevice,
// and the planner builds the devices a layout would publish, before they
// exist, with PlannedMIGDevice, so that a claim's CEL selectors see the same
// names, attributes and capacities either way.
//
// # Device names
//
// A whole GPU is "gpu-<index>"; a MIG device is
// "gpu-<index>-mig-<profile>-<GI profile ID>-<placement start>" with the
// profile name reduced to lower-case letters and digits ("3g.40gb" ->
// "3g40gb", "1g.10gb+me" -> "1g10gbme"), e.g. "gpu-0-mig-3g40gb-9-4". Names
// are DNS labels, deterministic, and the same for a device destroyed and
// created again at the same placement.
//
// # Attributes and capacities
//
// Attribute names and types are those NVIDIA's DRA driver (gpu.nvidia.com)
// publishes for the same properties, so a claim reading them ports between
// the two drivers by changing only the domain in
// device.attributes['<driver>'] (NVIDIA's driver publishes some that
// miglayout does not, such as addressingMode and memory-slice capacities: a
// selector reading one fails to evaluate here):
//
//	attribute                        type     GPU  MIG  value
//	type                             string   x    x    "gpu" | "mig"
//	uuid                             string   x    x    GPU-... / MIG-...
//	productName                      string   x    x    "NVIDIA A100-SXM4-80GB" (the parent's for MIG)
//	brand                            string   x    x    "Nvidia"
//	architecture                     string   x    x    "Ampere", "Hopper", "Blackwell"
//	cudaComputeCapability            version  x    x    "8.0.0"
//	driverVersion                    version  x    x    "580.95.5" (NVML's "580.95.05", semver-normalised)
//	cudaDriverVersion                version  x    x    "13.0.0"
//	resource.kubernetes.io/pciBusID  string   x    x    "0000:07:00.0" (the parent's for MIG)
//	resource.kubernetes.io/pcieRoot  string   x    x    "pci0000:00", the PCIe root complex (the parent's
//	                                                    for MIG), where sysfs shows it: matchAttribute
//	                                                    on it keeps a GPU and a NIC on one root
//	resource.kubernetes.io/numaNode  int      x    x    NUMA node of the GPU's PCI device, where sysfs
//	                                                    gives one (the parent's for MIG)
//	index                            int      x         NVML index
//	minor                            int      x         /dev/nvidia<minor>
//	parentUUID                       string        x    the GPU's UUID
//	parentIndex                      int           x    the GPU's NVML index
//	parentMinor                      int           x    the GPU's minor
//	profile                          string        x    "3g.40gb"
//	memory                           int      x    x    MiB, for selectors like memory >= 16000
//	placementStart, placementSize    int           x    memory-slice placement of the GPU instance
//
//	capacity         GPU  MIG  value
//	memory           x    x    bytes
//	multiprocessors  x    x    SMs (the model's for a whole GPU; omitted for unknown models)
//	copyEngines      -    x    engine counts of the GI profile; NVML gives
//	decoders         -    x    none for a whole GPU, so they are not
//	encoders         -    x    published there
//	jpegEngines      -    x
//	ofaEngines       -    x
//
// The API limits (at most 32 attributes and capacities per device, string
// and version values of at most 64 characters, 128 devices per slice and 64
// when a device has taints) are checked by ValidateDevice and ValidatePool;
// BuildPool never returns a pool that breaks them.
//
// # Pools and atomicity
//
// The pool is named after the node. A whole GPU is published only while its
// current MIG mode is off; with MIG mode on, its MIG devices are published
// instead (a GPU instance without its compute instance, left by a crash, is
// not a usable device and is not published). BuildPool puts the whole pool
// into one ResourceSlice whenever it fits, so that a layout change is one
// update of one object, which the scheduler sees atomically: the old devices
// and the new ones are never visible together.
//
// Only a pool that does not fit one slice (more than 128 devices, or more
// than 64 while any device carries a taint: the drain taint, or the Xid
// taint until its mark is cleared) is split into several
// slices of the same pool. The resourceslice controller then bumps the pool
// generation whenever a change needs more than one object write (it keeps the
// generation only when at most one existing slice changes and none is
// created): slices of the old generation are ignored as obsolete, and until
// every slice of the new generation is written the scheduler sees fewer
// slices than ResourceSliceCount, treats the pool as incomplete and allocates
// nothing from it. The pool is briefly unavailable, never mixed.
//
// # Draining
//
// Devices about to be destroyed are published with the NoSchedule taint
// DrainTaintKey (DrainTaint), so that no new claim is allocated to them while
// the agent waits for the settle period. Taints need the DRADeviceTaints
// feature (KEP-5055: alpha in Kubernetes 1.33, on by default from 1.36, GA in
// 1.37, where it can still be turned off);
// where the apiserver drops them the
// resourceslice controller reports a DroppedFieldsError to the plugin's
// HandleError. An apiserver with the feature off drops them only from a
// slice whose stored devices carry none: one that keeps a taint (a MIG
// mode change pending for days) has new taints stored, and reported
// nowhere, while a kube-scheduler with the feature off ignores them.
//
// A drain taint keeps off only decisions taken on an inventory that shows
// it; RequireBinding (see its constants) also refuses those taken before.
//
// # Driver name
//
// The driver name (DefaultDriverName, or any valid name such as
// "gpu.nvidia.com" on clusters where miglayout replaces NVIDIA's driver on
// MIG nodes) is not part of a device: attributes are published unqualified,
// in the driver's own domain. It matters to the publisher (the
// kubeletplugin helper's DriverName), to the kubelet plugin and to
// DeviceClass selectors. Device names take the form of NVIDIA's for every
// profile without "+", numbered differently: by NVML index here, by minor
// number (/dev/nvidia<minor>) in NVIDIA's driver, so where the two differ
// a claim that driver allocated names, here, a device of another GPU (the
// one the agent then keeps and the kubelet plugin prepares for it).
// NVIDIA's driver writes "+me" as "-me"
// (gpu-0-mig-1g10gb-me-20-0), MIGDeviceName drops the "+"
// (gpu-0-mig-1g10gbme-20-0), so a claim NVIDIA's driver allocated a "+me"
// device names one miglayout does not publish (the agent treats it as an
// unknown allocation, as any such name).
package slices
