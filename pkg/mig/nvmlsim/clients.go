package nvmlsim

import (
	"fmt"
	"slices"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// Client is a holder of a GPU, a GPU instance or a MIG device that runs no
// compute process: a monitoring agent (DCGM, dcgm-exporter), a kernel
// module such as nvidia_drm, nvidia-persistenced, a device file left open by
// a process that ended. nvmlDeviceGetComputeRunningProcesses does not list
// it, yet NVML answers ERROR_IN_USE ("in use by another client") for what it
// holds: a compute instance or GPU instance destroy, a MIG mode change (on
// Ampere the change stays pending), a GPU reset. Field reports: NVIDIA/DCGM
// issues 95 and 276 (MIG destroys refused with no process listed while DCGM
// held a handle), NVIDIA/mig-parted issue 181 (nvidia_drm holding a reset).
type Client struct {
	// ID is the handle OpenClient and OpenGPUInstanceClient return.
	ID       uint64 `json:"id"`
	GPUIndex int    `json:"gpuIndex"`
	// GIID and CIID locate what the client holds: both -1 for the whole
	// GPU; CIID -1 for a GPU instance alone (its compute instances may
	// go, the GPU instance may not); both set for a MIG device, which
	// holds its compute instance and, through it, its GPU instance.
	GIID int `json:"giID"`
	CIID int `json:"ciID"`
}

// OpenClient makes a client (see Client) hold the GPU ("GPU-...") or MIG
// device ("MIG-...") with the given UUID until CloseClient, and returns its
// ID. It needs no Init. Errors wrap nvml.ERROR_NOT_FOUND for a UUID no GPU
// or compute instance has.
func (s *Sim) OpenClient(uuid string) (uint64, error) {
	var id uint64
	err := s.update(func(st *fileState) (bool, error) {
		for _, g := range st.GPUs {
			if g.UUID == uuid {
				id = st.addClient(Client{GPUIndex: g.Index, GIID: -1, CIID: -1})
				return true, nil
			}
			for _, gi := range g.GPUInstances {
				for _, ci := range gi.ComputeInstances {
					if ci.UUID == uuid {
						id = st.addClient(Client{GPUIndex: g.Index, GIID: gi.ID, CIID: ci.ID})
						return true, nil
					}
				}
			}
		}
		return false, nvml.ERROR_NOT_FOUND
	})
	if err != nil {
		return 0, fmt.Errorf("opening a client of %s: %w", uuid, err)
	}
	return id, nil
}

// OpenGPUInstanceClient makes a client hold GPU instance giID of GPU index
// alone (its compute instances can be destroyed, the GPU instance cannot)
// until CloseClient, and returns its ID. It needs no Init. Errors wrap
// nvml.ERROR_INVALID_ARGUMENT for an index out of range and
// nvml.ERROR_NOT_FOUND for a GPU instance the GPU does not have.
func (s *Sim) OpenGPUInstanceClient(index, giID int) (uint64, error) {
	var id uint64
	err := s.update(func(st *fileState) (bool, error) {
		if index < 0 || index >= len(st.GPUs) {
			return false, nvml.ERROR_INVALID_ARGUMENT
		}
		if !slices.ContainsFunc(st.GPUs[index].GPUInstances, func(gi GPUInstance) bool { return gi.ID == giID }) {
			return false, nvml.ERROR_NOT_FOUND
		}
		id = st.addClient(Client{GPUIndex: index, GIID: giID, CIID: -1})
		return true, nil
	})
	if err != nil {
		return 0, fmt.Errorf("opening a client of GPU %d instance %d: %w", index, giID, err)
	}
	return id, nil
}

// CloseClient ends the client with the given ID. It needs no Init. The error
// wraps nvml.ERROR_NOT_FOUND for an unknown ID.
func (s *Sim) CloseClient(id uint64) error {
	err := s.update(func(st *fileState) (bool, error) {
		i := slices.IndexFunc(st.Clients, func(c Client) bool { return c.ID == id })
		if i < 0 {
			return false, nvml.ERROR_NOT_FOUND
		}
		st.Clients = slices.Delete(st.Clients, i, i+1)
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("closing client %d: %w", id, err)
	}
	return nil
}

func (st *fileState) addClient(c Client) uint64 {
	c.ID = st.nextSerial()
	st.Clients = append(st.Clients, c)
	return c.ID
}

// held reports whether a process or a client holds GPU index (giID and ciID
// -1), its GPU instance giID (ciID -1) or that instance's compute instance
// ciID, so that NVML answers ERROR_IN_USE. A client of a MIG device holds
// its GPU instance too; any client of the GPU holds the GPU.
func (st *fileState) held(index, giID, ciID int) bool {
	if len(st.processesOn(index, giID, ciID)) > 0 {
		return true
	}
	return slices.ContainsFunc(st.Clients, func(c Client) bool {
		return c.GPUIndex == index && (giID < 0 || c.GIID == giID) && (ciID < 0 || c.CIID == ciID)
	})
}
