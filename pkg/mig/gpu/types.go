// Package gpu is the GPU manager the miglayout agent uses: a small interface
// over go-nvml (github.com/NVIDIA/go-nvml/pkg/nvml) for listing GPUs and MIG
// devices and for creating and destroying GPU instances (GI) and compute
// instances (CI) at explicit placements. The same code runs against real NVML
// on a node and against the NVML simulator (package nvmlsim) in tests and the
// demo.
//
// NVML return codes are mapped to the typed errors below and wrapped with the
// operation and device they concern; see errors.go for the mapping.
package gpu

import (
	"context"

	"github.com/miglayout/miglayout/pkg/mig"
)

// MIGMode is a GPU's MIG mode as NVML reports it (nvmlDeviceGetMigMode).
type MIGMode struct {
	// Current is the mode in effect; Pending the mode that takes effect after
	// the next GPU reset (Ampere) or at once (Hopper and newer). They differ
	// only while a change waits for a reset.
	Current bool `json:"current"`
	Pending bool `json:"pending"`
	// RebootRequired is set on the mode SetMIGMode returns where the
	// driver left the change pending because it cannot reset the GPU
	// itself (activation status ERROR_RESET_REQUIRED: a GPU passed through
	// to a virtual machine, nvml.h): only a reboot applies it, whatever
	// runs on the GPU.
	RebootRequired bool `json:"rebootRequired,omitempty"`
}

// GPU is one physical GPU.
type GPU struct {
	// Index is the NVML device index (nvmlDeviceGetHandleByIndex).
	Index int `json:"index"`
	// UUID is "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx".
	UUID string `json:"uuid"`
	// ProductName is what nvmlDeviceGetName returns, e.g. "NVIDIA A100-SXM4-80GB".
	ProductName string `json:"productName"`
	// Model is the catalog entry for ProductName, nil when the catalog lacks it
	// (the agent then reports the GPU as unknown and never repartitions it).
	Model *mig.Model `json:"-"`
	// MemoryMiB is the total memory in MiB (nvmlDeviceGetMemoryInfo, bytes >> 20).
	MemoryMiB int64 `json:"memoryMiB"`
	// MIGCapable is false for GPUs that answer NOT_SUPPORTED to GetMigMode.
	MIGCapable bool    `json:"migCapable"`
	MIGMode    MIGMode `json:"migMode"`
	// PCIBusID is the domain:bus:device.function form, e.g. "0000:07:00.0".
	PCIBusID string `json:"pciBusID"`
	// PCIeRoot is the PCIe root complex the GPU sits under, "pci<domain>:<bus>"
	// (e.g. "pci0000:00"), and NUMANode the NUMA node of its PCI device, as
	// sysfs shows them (not NVML: the agent fills them in, see
	// agent.WithPCITopology); empty and nil where not known, NUMANode nil
	// too where the device has no NUMA affinity.
	PCIeRoot string `json:"pcieRoot,omitempty"`
	NUMANode *int   `json:"numaNode,omitempty"`
	// Brand, Architecture ("Ampere", "Hopper", "Blackwell"), CUDAComputeCapability
	// ("8.0"), DriverVersion ("580.95.05") and CUDADriverVersion ("13.0") are
	// the values NVIDIA's DRA driver publishes as attributes.
	Brand                 string `json:"brand"`
	Architecture          string `json:"architecture"`
	CUDAComputeCapability string `json:"cudaComputeCapability"`
	DriverVersion         string `json:"driverVersion"`
	CUDADriverVersion     string `json:"cudaDriverVersion"`
	// Minor is the device minor number (/dev/nvidia<Minor>).
	Minor int `json:"minor"`
	// ProfileValues are the profiles of Model that NVML describes otherwise
	// than the catalog (nvmlDeviceGetGpuInstanceProfileInfo: memory in
	// MiB, multiprocessors, engines), read once per MIG mode while it is
	// on; with MIG mode off, those of its last MIG mode; nil when they all
	// agree, MIG mode was never seen on, or Model is nil. Devices NVML makes
	// are published with NVML's values anyway; these let devices planned
	// before they exist (the Auto planner's, mig.Model.WithNVMLValues) look
	// the same.
	ProfileValues []mig.NVMLProfileValues `json:"profileValues,omitempty"`
	// CatalogMismatches say, one line each, where NVML's profile table
	// differs from the catalog's beyond those values: a profile NVML offers
	// under another GI profile ID (nvmlDeviceGetGpuInstanceProfileInfo), or
	// at other placements (nvmlDeviceGetGpuInstancePossiblePlacements), or
	// at an NVML profile index the catalog does not use (a profile it lacks:
	// MIGDevices lists its GIs under nvidia-smi's name), or not at all. The
	// catalog's IDs and placements name and validate devices; the agent
	// refuses to create what NVML would refuse (NVMLPlacements,
	// NVMLProfileIDs); read with ProfileValues.
	CatalogMismatches []string `json:"catalogMismatches,omitempty"`
	// NVMLPlacements are the placements NVML offers
	// (nvmlDeviceGetGpuInstancePossiblePlacements) for the profiles of
	// Model where they differ from the catalog's (none, an empty list, for
	// a profile NVML does not offer at all), and NVMLProfileIDs the GI
	// profile IDs NVML gives profiles of Model otherwise than the catalog
	// (nvmlDeviceGetGpuInstanceProfileInfo); read with ProfileValues, nil
	// where all agree. The agent creates no device NVML would refuse
	// (CreateMIGDevice refuses a profile whose ID differs).
	NVMLPlacements map[string][]mig.Placement `json:"nvmlPlacements,omitempty"`
	NVMLProfileIDs map[string]int             `json:"nvmlProfileIDs,omitempty"`
}

// PlanningModel is Model as the Auto planner plans g (the controller builds
// the same from the NodeMigLayout status: v1alpha1.NVMLProfile): with the
// profile values NVML reports (ProfileValues, mig.Model.WithNVMLValues),
// only the placements NVML offers as wide as the catalog's
// (NVMLPlacements), and no profile NVML gives another GI profile ID
// (NVMLProfileIDs; mig.Model.WithNVMLPlacements). Each step NVML's answers
// cannot be applied in is skipped, as the controller skips it; it is Model
// where NVML agrees with the catalog, or Model is nil. The agent's
// publication order (slices.RoomLost) is taken from it, so that
// kube-scheduler gives a claim the device the planner planned it on.
func (g GPU) PlanningModel() *mig.Model {
	m := g.Model
	if m == nil {
		return nil
	}
	if len(g.ProfileValues) > 0 {
		if withValues, err := m.WithNVMLValues(g.ProfileValues); err == nil {
			m = withValues
		}
	}
	if len(g.NVMLPlacements) == 0 && len(g.NVMLProfileIDs) == 0 {
		return m
	}
	placements := make(map[string][]mig.Placement, len(g.NVMLPlacements))
	for name, pls := range g.NVMLPlacements {
		// Devices are made as wide as the catalog says: NVML's
		// placements of another width are of no use.
		p, err := g.Model.Profile(name)
		if err != nil {
			continue
		}
		kept := []mig.Placement{}
		for _, pl := range pls {
			if pl.Size == p.MemorySlices {
				kept = append(kept, pl)
			}
		}
		placements[name] = kept
	}
	refused := make([]string, 0, len(g.NVMLProfileIDs))
	for name := range g.NVMLProfileIDs {
		refused = append(refused, name)
	}
	if withPlacements, err := m.WithNVMLPlacements(placements, refused); err == nil {
		m = withPlacements
	}
	return m
}

// MIGDevice is one GPU instance with its compute instance as the agent
// creates them: one full-size CI per GI. A GI without a CI (left by a crash
// between the two creates) has CIID -1 and an empty UUID.
type MIGDevice struct {
	// GPUIndex is the parent GPU's NVML index; ParentUUID its UUID.
	GPUIndex   int    `json:"gpuIndex"`
	ParentUUID string `json:"parentUUID"`
	// Profile is the catalog profile of the GI (looked up by GI profile ID),
	// or the name nvidia-smi gives it ("1g.10gb-me") where the catalog
	// lacks the GPU or the profile.
	Profile string `json:"profile"`
	// ProfileID is the GI profile ID as NVML reports it (19, 9, 0, ...).
	ProfileID int `json:"profileID"`
	// Placement is the GI's placement on the memory-slice axis.
	Placement mig.Placement `json:"placement"`
	// GIID and CIID are the instance IDs NVML assigned; CIID is -1 when the GI
	// has no compute instance.
	GIID int `json:"giID"`
	CIID int `json:"ciID"`
	// UUID is the MIG device UUID ("MIG-xxxxxxxx-..."), empty without a CI.
	UUID string `json:"uuid"`
	// MemoryMiB, Multiprocessors and the engine counts come from the GI
	// profile info NVML returns.
	MemoryMiB       int64 `json:"memoryMiB"`
	Multiprocessors int   `json:"multiprocessors"`
	CopyEngines     int   `json:"copyEngines"`
	Decoders        int   `json:"decoders"`
	Encoders        int   `json:"encoders"`
	JPEGEngines     int   `json:"jpegEngines"`
	OFAEngines      int   `json:"ofaEngines"`
}

// Device returns the layout element (profile@start) of d.
func (d MIGDevice) Device() mig.Device {
	return mig.Device{Profile: d.Profile, Start: d.Placement.Start}
}

// Process is a process running on a MIG device or GPU.
type Process struct {
	PID uint32 `json:"pid"`
	// UsedMemoryMiB is the GPU memory it uses, in MiB; -1 where NVML
	// cannot tell (NVML_VALUE_NOT_AVAILABLE).
	UsedMemoryMiB int64 `json:"usedMemoryMiB"`
}

// Manager is what the agent needs from NVML. Implementations must be safe for
// concurrent use; operations on one GPU are serialised by the caller.
type Manager interface {
	// GPUs lists every GPU, ordered by index. Where NVML counts GPUs it
	// cannot read (fallen off the bus), it returns the others with an
	// *UnreadableGPUsError naming them (see SplitUnreadable); where it
	// fails to read one for a reason that may pass, the listing fails
	// (*FailedGPUsError), though the GPUs it read are still returned for
	// callers that need only some (see GPUErrors); any other error fails
	// the listing.
	GPUs(ctx context.Context) ([]GPU, error)
	// MIGDevices lists the GPU instances of one GPU (with their CIs), ordered
	// by placement start. A GPU with MIG mode off has none.
	MIGDevices(ctx context.Context, gpuIndex int) ([]MIGDevice, error)
	// CreateMIGDevice creates a GI of the given profile at the placement start
	// and then its full-size CI. If the CI cannot be created, the GI is
	// destroyed again before the error is returned.
	CreateMIGDevice(ctx context.Context, gpuIndex int, d mig.Device) (MIGDevice, error)
	// DestroyMIGDevice destroys the CI (if any) then the GI at the given
	// placement. It fails with ErrInUse while a process runs on it.
	DestroyMIGDevice(ctx context.Context, gpuIndex int, d mig.Device) error
	// SetMIGMode enables or disables MIG mode and returns the mode after the
	// call; Pending differs from Current while a reset is needed.
	SetMIGMode(ctx context.Context, gpuIndex int, enabled bool) (MIGMode, error)
	// MIGProcesses lists the compute processes of each MIG device of the
	// GPU that runs any, by device, in one read of the GPU (Processes for
	// every device at once).
	MIGProcesses(ctx context.Context, gpuIndex int) (map[mig.Device][]Process, error)
	// GPUProcesses lists the compute processes on the whole GPU (with MIG
	// mode on: on all its MIG devices).
	GPUProcesses(ctx context.Context, gpuIndex int) ([]Process, error)
	// Shutdown releases NVML (nvmlShutdown).
	Shutdown() error
}
