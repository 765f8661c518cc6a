package plugin

import (
	"context"
	"fmt"
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
//   - Unhealthy: its GPU cannot be read because it fell off the bus or
//     needs a reset (NVML's ERROR_GPU_IS_LOST or ERROR_RESET_REQUIRED, for
//     the GPU or its MIG devices), NVML lacks it (destroyed:
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
	inv, err := reading.inventory([]int{d.GPUIndex})
	if err != nil {
		// Fallen off the bus, or waiting for a reset, the GPU runs
		// nothing; another error (NVML denying the GPU to the agent, a
		// failed read) says nothing of the device's health.
		if code, _ := gpu.ReturnCode(err); code == nvml.ERROR_GPU_IS_LOST || code == nvml.ERROR_RESET_REQUIRED {
			return kubeletplugin.HealthStatusUnhealthy, fmt.Sprintf("GPU %d cannot be read: %v", d.GPUIndex, err)
		}
		return kubeletplugin.HealthStatusUnknown, fmt.Sprintf("GPU %d could not be read: %v", d.GPUIndex, err)
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
