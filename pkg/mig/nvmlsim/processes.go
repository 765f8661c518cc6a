package nvmlsim

import (
	"fmt"
	"slices"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// StartProcess starts a simulated compute process using usedMemoryMiB MiB on
// the GPU ("GPU-...") or MIG device ("MIG-...") with the given UUID and
// returns its PID (1000, 1001, ... per state). A process on a GPU holds it:
// MIG mode changes and ResetGPU see it. It needs no Init. Errors wrap
// nvml.ERROR_NOT_FOUND for an unknown UUID or a GPU whose current MIG mode
// is on (CUDA then runs only in MIG devices), nvml.ERROR_INVALID_ARGUMENT for a
// negative memory size and nvml.ERROR_MEMORY when the device's free memory
// is short.
func (s *Sim) StartProcess(uuid string, usedMemoryMiB int64) (uint32, error) {
	var pid uint32
	err := s.update(func(st *fileState) (bool, error) {
		if usedMemoryMiB < 0 {
			return false, fmt.Errorf("memory %d MiB is negative: %w", usedMemoryMiB, nvml.ERROR_INVALID_ARGUMENT)
		}
		p, free, ok := st.findDevice(uuid)
		if !ok {
			return false, nvml.ERROR_NOT_FOUND
		}
		if usedMemoryMiB > free {
			return false, fmt.Errorf("needs %d MiB, %d MiB free: %w", usedMemoryMiB, free, nvml.ERROR_MEMORY)
		}
		p.PID = st.NextPID
		p.UsedMemoryMiB = usedMemoryMiB
		st.NextPID++
		st.Processes = append(st.Processes, p)
		slices.SortFunc(st.Processes, func(a, b Process) int { return int(a.PID) - int(b.PID) })
		pid = p.PID
		return true, nil
	})
	if err != nil {
		return 0, fmt.Errorf("starting process on %s: %w", uuid, err)
	}
	return pid, nil
}

// findDevice returns a Process placed on the device with the given UUID and
// the device's free memory in MiB.
func (st *fileState) findDevice(uuid string) (Process, int64, bool) {
	for _, g := range st.GPUs {
		if g.Lost {
			continue // no CUDA process starts on a lost GPU
		}
		if g.UUID == uuid {
			if g.MIGCurrent {
				// With MIG mode on, CUDA runs only in compute
				// instances (MIG User Guide, "Getting Started").
				return Process{}, 0, false
			}
			return Process{GPUIndex: g.Index, GIID: -1, CIID: -1, DeviceUUID: uuid},
				g.MemoryMiB - usedMiB(st.processesOn(g.Index, -1, -1)), true
		}
		for _, gi := range g.GPUInstances {
			for _, ci := range gi.ComputeInstances {
				if ci.UUID != uuid {
					continue
				}
				var total int64
				if p := profileByID(st.Models[g.Model], gi.ProfileID); p != nil {
					total = p.MemoryMiB
				}
				// The CIs of a GI share its memory (they split its SMs).
				return Process{GPUIndex: g.Index, GIID: gi.ID, CIID: ci.ID, DeviceUUID: uuid},
					total - usedMiB(st.processesOn(g.Index, gi.ID, -1)), true
			}
		}
	}
	return Process{}, 0, false
}

// StopProcess ends the process with the given PID. It needs no Init. The
// error wraps nvml.ERROR_NOT_FOUND for an unknown PID.
func (s *Sim) StopProcess(pid uint32) error {
	err := s.update(func(st *fileState) (bool, error) {
		i := slices.IndexFunc(st.Processes, func(p Process) bool { return p.PID == pid })
		if i < 0 {
			return false, nvml.ERROR_NOT_FOUND
		}
		st.Processes = slices.Delete(st.Processes, i, i+1)
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("stopping process %d: %w", pid, err)
	}
	return nil
}

// LoseGPU makes GPU index fall off the bus, as an Xid 79 does: NVML still
// counts it, but its handle and every call on it or its instances give
// ERROR_GPU_IS_LOST, until RecoverGPU. Its instances and processes are
// kept, as a reboot would find them gone; ResetGPU fails. It needs no Init.
// The error wraps nvml.ERROR_INVALID_ARGUMENT for an index out of range.
func (s *Sim) LoseGPU(index int) error {
	return s.setLost(index, true)
}

// RecoverGPU brings a lost GPU back (a reboot or a PCI rescan; on real
// hardware the reboot also destroys its instances and ends its processes,
// which tests do with ResetGPU and StopProcess). It needs no Init.
func (s *Sim) RecoverGPU(index int) error {
	return s.setLost(index, false)
}

func (s *Sim) setLost(index int, lost bool) error {
	err := s.update(func(st *fileState) (bool, error) {
		if index < 0 || index >= len(st.GPUs) {
			return false, nvml.ERROR_INVALID_ARGUMENT
		}
		changed := st.GPUs[index].Lost != lost
		st.GPUs[index].Lost = lost
		return changed, nil
	})
	if err != nil {
		return fmt.Errorf("marking GPU %d lost=%t: %w", index, lost, err)
	}
	return nil
}

// ResetGPU resets GPU index like `nvidia-smi -r`, a driver reload or a
// reboot: every GPU and compute instance is destroyed, and the MIG mode is
// what the model keeps across one. On models with MIGModeNeedsReset
// (Ampere) the pending mode becomes current: the setting is persistent
// across reboots until toggled (NVIDIA Multi-Instance GPU User Guide,
// "Deployment Considerations", stated for Ampere only). On Hopper and
// newer MIG mode is the driver's state and comes back off, pending
// included, so that an agent must turn it on again (an NVIDIA engineer on
// H100: "it's all gone by the time the VM is gone and GPU resets",
// NVIDIA/gpu-admin-tools issue 2; whether a reset with the driver loaded
// keeps it is not documented: the simulator takes the case an agent must
// handle). It needs no Init; Latency applies and faults on op "ResetGPU"
// trigger. Errors wrap nvml.ERROR_INVALID_ARGUMENT for an index out of
// range, nvml.ERROR_IN_USE while a process runs on the GPU or its MIG
// devices or a client holds any of them (nothing changes), or an injected
// fault's code.
func (s *Sim) ResetGPU(index int) error {
	if s.latency > 0 {
		s.sleep(s.latency)
	}
	var opErr error
	err := s.update(func(st *fileState) (bool, error) {
		// Errors go to opErr so that a counted fault is stored regardless.
		f, counted := st.takeFault("ResetGPU")
		if f != nil && !f.Lie {
			opErr = f.Return
			return true, nil
		}
		g, m, ret := st.gpu(index)
		if ret != nvml.SUCCESS {
			opErr = ret
			return counted, nil
		}
		if ps := st.processesOn(index, -1, -1); len(ps) > 0 {
			opErr = fmt.Errorf("%d process(es) running, first PID %d: %w", len(ps), ps[0].PID, nvml.ERROR_IN_USE)
			return counted, nil
		}
		if st.held(index, -1, -1) {
			opErr = fmt.Errorf("in use by another client: %w", nvml.ERROR_IN_USE)
			return counted, nil
		}
		if f != nil { // Lie
			return true, nil
		}
		if !m.MIGModeNeedsReset {
			g.MIGPending = false
		}
		g.MIGCurrent = g.MIGPending
		g.GPUInstances = nil
		return true, nil
	})
	if err == nil {
		err = opErr
	}
	if err != nil {
		return fmt.Errorf("resetting GPU %d: %w", index, err)
	}
	return nil
}
