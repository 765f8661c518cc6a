package plugin

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/miglayout/miglayout/pkg/mig"
	"github.com/miglayout/miglayout/pkg/mig/gpu"
	migslices "github.com/miglayout/miglayout/pkg/slices"
)

// running returns the devices of pc a compute process runs on now, with
// the processes' IDs ("gpu-0-mig-3g40gb-9-4 (pid 4242)").
//
// Each device is found by the UUIDs it was prepared with, not by its name:
// a whole GPU by its UUID, a MIG device by its board's (GPUUUID) and then
// its own, on whatever index NVML gives the board now. NVML numbers GPUs
// anew when one leaves the node (a restarted agent reads the new indexes),
// and the recorded name would then name another board's device, or none.
// A MIG device recorded without GPUUUID (a checkpoint of an older version)
// is looked for on the GPU of its recorded index.
//
// A device no longer found (its board gone, the MIG device destroyed) runs
// nothing, nor does one whose board may only be a GPU fallen off the bus or
// needing a reset (NVML's ERROR_GPU_IS_LOST, ERROR_RESET_REQUIRED): such a
// GPU has no device published, and it comes back only through a reset or a
// reboot, which ends its processes. A device whose board may be a GPU NVML
// could not read otherwise (it denied the GPU: processes may run on) fails
// the listing with that GPU's error, as does an error listing the GPUs or
// a board's MIG devices or processes.
func (p *Plugin) running(ctx context.Context, pc PreparedClaim) ([]string, error) {
	if len(pc.Devices) == 0 {
		return nil, nil
	}
	all, err := p.cfg.GPUs.GPUs(ctx)
	perGPU, ok := gpu.GPUErrors(err)
	if !ok {
		return nil, fmt.Errorf("listing GPUs: %w", err)
	}
	byUUID := map[string]gpu.GPU{}
	byIndex := map[int]gpu.GPU{}
	for _, g := range all {
		byUUID[g.UUID], byIndex[g.Index] = g, g
	}
	migs := map[int][]gpu.MIGDevice{}                  // by GPU index: one NVML read each
	migProcs := map[int]map[mig.Device][]gpu.Process{} // likewise
	var busy []string
	for _, d := range pc.Devices {
		_, isMIG, _ := migslices.DeviceGPUIndex(d.Device)
		var board gpu.GPU
		var found bool
		switch {
		case !isMIG:
			board, found = byUUID[d.UUID]
		case d.GPUUUID != "":
			board, found = byUUID[d.GPUUUID]
		default:
			board, found = byIndex[d.GPUIndex]
			if !found && perGPU[d.GPUIndex] != nil {
				if err := unreadableBoard(map[int]error{d.GPUIndex: perGPU[d.GPUIndex]}); err != nil {
					return nil, fmt.Errorf("finding device %s: %w", d.Device, err)
				}
			}
		}
		if !found {
			if err := unreadableBoard(perGPU); err != nil {
				return nil, fmt.Errorf("finding device %s: %w", d.Device, err)
			}
			continue // gone from the node, or fallen off the bus
		}
		var procs []gpu.Process
		if !isMIG {
			if procs, err = p.cfg.GPUs.GPUProcesses(ctx, board.Index); err != nil {
				return nil, err
			}
		} else {
			if !board.MIGMode.Current {
				continue // MIG mode off: no MIG device is left
			}
			devs, read := migs[board.Index]
			if !read {
				if devs, err = p.cfg.GPUs.MIGDevices(ctx, board.Index); err != nil {
					return nil, fmt.Errorf("listing MIG devices of GPU %d: %w", board.Index, err)
				}
				migs[board.Index] = devs
			}
			at := slices.IndexFunc(devs, func(m gpu.MIGDevice) bool { return m.UUID == d.UUID })
			if at < 0 {
				continue // destroyed
			}
			byDevice, read := migProcs[board.Index]
			if !read {
				if byDevice, err = p.cfg.GPUs.MIGProcesses(ctx, board.Index); err != nil {
					return nil, err
				}
				migProcs[board.Index] = byDevice
			}
			procs = byDevice[devs[at].Device()]
		}
		if len(procs) > 0 {
			pids := make([]string, len(procs))
			for i, pr := range procs {
				pids[i] = fmt.Sprint(pr.PID)
			}
			busy = append(busy, fmt.Sprintf("%s (pid %s)", d.Device, strings.Join(pids, ", ")))
		}
	}
	return busy, nil
}

// unreadableBoard returns the error of the first GPU (by index) of perGPU,
// the GPUs NVML could not read, that may still run processes: one that
// neither fell off the bus nor needs a reset. nil where there is none.
func unreadableBoard(perGPU map[int]error) error {
	idxs := make([]int, 0, len(perGPU))
	for idx := range perGPU {
		idxs = append(idxs, idx)
	}
	slices.Sort(idxs)
	for _, idx := range idxs {
		code, _ := gpu.ReturnCode(perGPU[idx])
		if code != nvml.ERROR_GPU_IS_LOST && code != nvml.ERROR_RESET_REQUIRED {
			return fmt.Errorf("reading GPU %d: %w", idx, perGPU[idx])
		}
	}
	return nil
}
