package plugin

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"

	"github.com/miglayout/miglayout/pkg/mig/gpu"
)

// DefaultHealthInterval is how often WatchHealthStatus reports by default:
// well within the kubelet's health check timeout (30 s; a device not
// reported again within it shows Unknown).
const DefaultHealthInterval = 10 * time.Second

// healthWakeGap is the least time between two reports that a change of
// health, rather than the interval, sends.
const healthWakeGap = 100 * time.Millisecond

// WatchHealthStatus implements kubeletplugin.DRAPlugin: it reports the
// health of the devices of the prepared claims (healthReport) at once, then
// every Config.HealthInterval and at once after an Xid made devices
// Unhealthy (WatchXids) or a claim was prepared, until ctx ends. The kubelet (feature gate
// ResourceHealthStatus, beta and on by default from Kubernetes 1.36, KEP
// 4680) shows it in the status of the containers that use the devices
// (status.containerStatuses[].allocatedResourcesStatus, resource
// "claim:<name>[/<request>]"), with the message where ResourceHealthStatusMessage
// is on. Each device's health check timeout is three intervals, at least the
// kubelet's 30 s default.
func (p *Plugin) WatchHealthStatus(ctx context.Context, reports chan<- kubeletplugin.DeviceHealthReport) error {
	interval := p.cfg.HealthInterval
	if interval <= 0 {
		interval = DefaultHealthInterval
	}
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		changed := p.healthChanged()
		report := p.healthReport(ctx, max(3*interval, 30*time.Second))
		select {
		case <-ctx.Done():
			return nil
		case reports <- report:
		}
		sent := time.Now()
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		case <-changed:
			// A storm of Xids or prepares is reported at most every
			// healthWakeGap.
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(time.Until(sent.Add(healthWakeGap))):
			}
		}
	}
}

// healthReport reads NVML once (the GPUs, and the MIG devices of those the
// prepared devices lie on) and gives each device of a prepared claim, once
// (by pool and name), its health:
//
//   - Healthy: NVML has it under its name, with the UUID it was prepared
//     with (or that RefreshRecreated last wrote to the claim's CDI spec), on
//     the board it was prepared on;
//   - Unhealthy: its GPU cannot be read because it is unusable until
//     someone acts (fallen off the bus, a reset needed; unreadableHealth),
//     NVML lacks it (destroyed:
//     a GPU reset or reboot, until the agent makes it again), or has it with
//     another UUID or on another board (made again since: the containers
//     started before hold the destroyed device);
//   - Unhealthy too: an Xid critical error hit it (WatchXids);
//   - Unknown: NVML's list of GPUs could not be read at all, or the GPU
//     or its MIG devices could not be read for another reason (NVML denies
//     the GPU to the agent, ERROR_NO_PERMISSION; a failed call): the
//     device may be sound, and its containers may run on.
//
// timeout is each device's health check timeout.
func (p *Plugin) healthReport(ctx context.Context, timeout time.Duration) kubeletplugin.DeviceHealthReport {
	claims := p.PreparedClaims()
	var idxs []int
	for _, pc := range claims {
		idxs = append(idxs, pc.gpuIndexes()...)
	}
	var report kubeletplugin.DeviceHealthReport
	if len(claims) == 0 {
		return report
	}
	reading := p.readGPUs(ctx, idxs)
	// A board NVML numbered anew (a GPU taken off the node without a
	// reboot) is read at its index now: its devices are found by UUID.
	if moved := reading.boardIndexes(claims); len(moved) > 0 {
		reading = p.readGPUs(ctx, append(idxs, moved...))
	}
	now := time.Now()
	seen := map[[2]string]bool{}
	for _, pc := range claims {
		for _, d := range pc.Devices {
			key := [2]string{d.Pool, d.Device}
			if seen[key] {
				continue
			}
			seen[key] = true
			h := kubeletplugin.DeviceHealth{PoolName: d.Pool, DeviceName: d.Device, LastUpdated: now, HealthCheckTimeout: timeout}
			h.Health, h.Message = deviceHealth(reading, d)
			if mark, ok := p.xidHealth(d); ok && h.Health != kubeletplugin.HealthStatusUnhealthy {
				h.Health, h.Message = kubeletplugin.HealthStatusUnhealthy, mark.message()
			}
			report.Devices = append(report.Devices, h)
		}
	}
	return report
}

// deviceHealth is the health of prepared device d in reading, with why
// where it is not Healthy.
func deviceHealth(reading gpuReading, d PreparedDevice) (kubeletplugin.HealthStatus, string) {
	if reading.listErr != nil {
		return kubeletplugin.HealthStatusUnknown, fmt.Sprintf("NVML could not be read: %v", reading.listErr)
	}
	if at, ok := reading.boardIndex(d); ok && at != d.GPUIndex {
		return movedDeviceHealth(reading, d, at)
	}
	inv, err := reading.inventory([]int{d.GPUIndex})
	if err != nil {
		return unreadableHealth(fmt.Sprintf("GPU %d", d.GPUIndex), err)
	}
	s, ok := inv.Lookup(d.Device)
	if !ok {
		return kubeletplugin.HealthStatusUnhealthy, fmt.Sprintf("device %s is not in NVML (destroyed, e.g. by a GPU reset; the agent makes a device a claim holds again)", d.Device)
	}
	uuid, board := s.GPU.UUID, s.GPU.UUID
	if s.MIG != nil {
		uuid = s.MIG.UUID
	}
	if d.GPUUUID != "" && board != d.GPUUUID {
		return kubeletplugin.HealthStatusUnhealthy, fmt.Sprintf("device %s lies on GPU %s, not on %s where it was prepared", d.Device, board, d.GPUUUID)
	}
	if uuid != d.UUID {
		return kubeletplugin.HealthStatusUnhealthy, fmt.Sprintf("device %s was made again as %s; containers started before hold the destroyed %s", d.Device, uuid, d.UUID)
	}
	return kubeletplugin.HealthStatusHealthy, ""
}

// boardIndex is the index NVML gives now to the board prepared device d is
// or lies on, found by its UUID (GPUUUID for a MIG device, UUID for a whole
// GPU); false where the record names no board UUID (a MIG device recorded
// before GPUUUID) or NVML lists no GPU of it.
func (r gpuReading) boardIndex(d PreparedDevice) (int, bool) {
	board := d.GPUUUID
	if board == "" {
		board = d.UUID // a whole GPU's; a MIG device's matches no GPU
	}
	for idx, g := range r.gpus {
		if g.UUID == board {
			return idx, true
		}
	}
	return 0, false
}

// boardIndexes are the indexes, not read for MIG devices yet, of the boards
// of claims' devices that NVML numbered anew.
func (r gpuReading) boardIndexes(claims []PreparedClaim) []int {
	var out []int
	for _, pc := range claims {
		for _, d := range pc.Devices {
			at, ok := r.boardIndex(d)
			if !ok || at == d.GPUIndex || slices.Contains(out, at) {
				continue
			}
			if g := r.gpus[at]; g.MIGMode.Current && r.migs[at] == nil && r.errs[at] == nil {
				out = append(out, at)
			}
		}
	}
	return out
}

// movedDeviceHealth is the health of prepared device d whose board NVML
// numbers at now: Healthy where the board has it still, by UUID (its name,
// which holds the index, is another now).
func movedDeviceHealth(reading gpuReading, d PreparedDevice, at int) (kubeletplugin.HealthStatus, string) {
	inv, err := reading.inventory([]int{at})
	if err != nil {
		return unreadableHealth(fmt.Sprintf("GPU %d (numbered %d when %s was prepared)", at, d.GPUIndex, d.Device), err)
	}
	for _, s := range inv.Sources() {
		uuid := s.GPU.UUID
		if s.MIG != nil {
			uuid = s.MIG.UUID
		}
		if uuid == d.UUID {
			return kubeletplugin.HealthStatusHealthy, ""
		}
	}
	return kubeletplugin.HealthStatusUnhealthy, fmt.Sprintf("device %s is not in NVML on its GPU, numbered %d now (destroyed, e.g. by a GPU reset; the agent makes a device a claim holds again)", d.Device, at)
}

// unreadableHealth is the health of a device whose GPU (named by gpuName)
// NVML could not read, err: Unhealthy where the GPU is unusable until
// someone acts (fallen off the bus, ERROR_GPU_IS_LOST; waiting for a
// reset, ERROR_RESET_REQUIRED; a power cable not attached,
// ERROR_INSUFFICIENT_POWER; an interrupt problem, ERROR_IRQ_ISSUE), and so
// runs nothing; Unknown otherwise (NVML denying the GPU to the agent,
// ERROR_NO_PERMISSION or ERROR_OPERATING_SYSTEM, or a failed call say
// nothing of the device's health).
func unreadableHealth(gpuName string, err error) (kubeletplugin.HealthStatus, string) {
	switch code, _ := gpu.ReturnCode(err); code {
	case nvml.ERROR_GPU_IS_LOST, nvml.ERROR_RESET_REQUIRED, nvml.ERROR_INSUFFICIENT_POWER, nvml.ERROR_IRQ_ISSUE:
		return kubeletplugin.HealthStatusUnhealthy, fmt.Sprintf("%s cannot be read: %v", gpuName, err)
	}
	return kubeletplugin.HealthStatusUnknown, fmt.Sprintf("%s could not be read: %v", gpuName, err)
}
