package plugin

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/cenkalti/backoff/v4"
	"k8s.io/klog/v2"

	"github.com/miglayout/miglayout/pkg/mig/gpu"
	migslices "github.com/miglayout/miglayout/pkg/slices"
)

// DefaultIgnoredXids are the Xids that leave a device Healthy by default:
// those NVIDIA's "XID Errors" guide (docs.nvidia.com/deploy/xid-errors)
// puts down to the application running, not to the GPU (13 graphics
// engine exception, 31 GPU memory page fault, 43 GPU stopped processing,
// 45 preemptive cleanup, 68 video processor exception, 109 context switch
// timeout). NVIDIA's device plugin leaves out the same ones by default.
var DefaultIgnoredXids = []uint64{13, 31, 43, 45, 68, 109}

// xidRetryMax is the longest WatchXids waits before watching again after
// the watch failed.
const xidRetryMax = time.Minute

// xidMark is an Xid that made a device Unhealthy.
type xidMark struct {
	code     uint64
	gpuIndex int
	gpuUUID  string
	// at is when the Xid came last; saved, the at XidMarksFile holds.
	at, saved time.Time
}

// xidResaveAfter is how much later than the time XidMarksFile holds a
// repeated Xid must come for the file to be written again: an Xid storm
// writes it at most this often per mark, and a restart loses at most this
// much of a mark's last time (which a clear request compares).
const xidResaveAfter = 30 * time.Second

// repeat returns the mark of an Xid again at mark.at where old was held,
// and whether XidMarksFile must be written again.
func repeat(old xidMark, held bool, mark xidMark) (xidMark, bool) {
	if held && mark.gpuUUID == "" {
		mark.gpuUUID = old.gpuUUID // NVML could not read it this time
	}
	if !held || old.code != mark.code {
		return mark, true
	}
	mark.saved = old.saved
	return mark, mark.at.Sub(old.saved) > xidResaveAfter
}

func (m xidMark) message() string {
	return fmt.Sprintf("Xid %d on GPU %s at %s (NVIDIA's XID Errors guide says what it means); the device stays Unhealthy until the node reboots or kubectl miglayout clear-xids clears the mark", m.code, m.gpuUUID, m.at.UTC().Format(time.RFC3339))
}

// WatchXids watches the GPUs' Xid critical errors (Config.Xids) until ctx
// ends, and returns nil then. An Xid not in Config.IgnoredXids makes the
// devices it hits Unhealthy in the reports of WatchHealthStatus, sent at
// once:
//
//   - one attributable to a GPU instance (nvmlEventData_t.gpuInstanceId):
//     the MIG devices of that instance (of that compute instance, where
//     it names one) that Config.Xids read with the event (gpu.Xid.Devices),
//     by UUID, so that a device made again there (a new UUID) is Healthy;
//   - one that is not (a double-bit ECC error, the GPU off the bus): the
//     GPU, and every device on it, made before or after the Xid; likewise
//     where the GPU's MIG devices cannot be read to tell which the Xid
//     hits.
//
// An Xid of a GPU instance without a MIG device, or of a GPU NVML cannot
// name any more, marks nothing (counted unattributed).
//
// The marks last until the node reboots or ClearXids clears them: with
// Config.BootID, they are kept in XidMarksFile, which RestoreXids reads
// after a restart of the agent (without, they last until it restarts).
// XidOf reports them, which the
// agent publishes as device taints (Config.OnXid wakes it; the same Xid
// again on devices marked for it is only counted, unless xidResaveAfter
// passed since the marks file took its time). A failed watch
// is logged and started again after an exponential backoff of at most a
// minute. Without Config.Xids it returns at once.
func (p *Plugin) WatchXids(ctx context.Context) error {
	if p.cfg.Xids == nil {
		return nil
	}
	logger := klog.FromContext(ctx)
	b := backoff.NewExponentialBackOff(backoff.WithMaxInterval(xidRetryMax), backoff.WithMaxElapsedTime(0))
	toldNone := false
	for {
		started := time.Now()
		ignored := func(code uint64) bool { return slices.Contains(p.ignoredXids, code) }
		err := p.cfg.Xids.WatchXids(ctx, ignored, func(x gpu.Xid) { p.recordXid(ctx, x) })
		if ctx.Err() != nil {
			return nil
		}
		if time.Since(started) > xidRetryMax {
			b.Reset()
		}
		wait := b.NextBackOff()
		switch {
		case errors.Is(err, gpu.ErrNotSupported):
			// No GPU to watch (none, or every one lost): said once.
			wait = xidRetryMax
			if !toldNone {
				logger.Info("No GPU can report Xid events; devices' health is read from NVML alone, and the watch is tried again every minute", "err", err)
				toldNone = true
			} else {
				logger.V(1).Info("Still no GPU can report Xid events", "err", err)
			}
		case err == nil:
			logger.Error(errors.New("the watch ended"), "Watching Xid events stopped; devices' health is read from NVML alone until the watch is back", "retryIn", wait)
		default:
			toldNone = false
			logger.Error(err, "Watching Xid events failed; devices' health is read from NVML alone until the watch is back", "retryIn", wait)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
	}
}

// recordXid marks the devices x hits (WatchXids) and wakes the health
// reports.
func (p *Plugin) recordXid(ctx context.Context, x gpu.Xid) {
	logger := klog.FromContext(ctx).WithValues("gpu", x.GPUIndex, "gpuUUID", x.GPUUUID, "xid", x.Code, "gpuInstance", x.GIID, "computeInstance", x.CIID)
	if slices.Contains(p.ignoredXids, x.Code) {
		p.metrics.xid(x.Code, "ignored")
		logger.V(1).Info("Xid ignored (an error of the application, by the ignored list)")
		return
	}
	if x.GPUIndex < 0 {
		p.metrics.xid(x.Code, "unattributed")
		logger.Error(nil, "Xid critical error on a GPU NVML cannot name any more: no device marked")
		return
	}
	mark := xidMark{code: x.Code, gpuIndex: x.GPUIndex, gpuUUID: x.GPUUUID, at: time.Now()}
	var hit []string
	// The devices were read with the event (gpu.Xid.Devices), before any
	// destroy of the GPU instance: a read made now could blame a device
	// made since at its place, which NVML gives the same GPU instance ID.
	err := x.DevicesErr
	// A mark of the same Xid again takes the new time, written to the
	// marks file only where it is xidResaveAfter past the time there, so
	// that an Xid storm does not write the file once per Xid (the time
	// matters to a clear request made meanwhile, ClearXids).
	changed := false
	p.xidMu.Lock()
	if x.GIID < 0 || err != nil {
		old, held := p.xidGPUs[x.GPUIndex]
		m, write := repeat(old, held, mark)
		p.xidGPUs[x.GPUIndex], changed = m, changed || write
		hit = append(hit, fmt.Sprintf("GPU %d and every device on it", x.GPUIndex))
	}
	// The source gives the devices x hits, each with its UUID (gpu.Xid).
	for _, d := range x.Devices {
		old, held := p.xidDevices[d.UUID]
		m, write := repeat(old, held, mark)
		p.xidDevices[d.UUID], changed = m, changed || write
		hit = append(hit, fmt.Sprintf("%s (%s)", migslices.MIGDeviceName(x.GPUIndex, d.Profile, d.ProfileID, d.Placement.Start), d.UUID))
	}
	var saveErr error
	if changed {
		saveErr = p.saveXidMarksLocked()
	}
	p.xidMu.Unlock()
	if saveErr != nil {
		logger.Error(saveErr, "Keeping the Xid mark for the agent's next run failed: a restart of the agent forgets it")
	}
	if len(hit) == 0 {
		// The GPU instance has no MIG device (no compute instance, or
		// destroyed since): nothing to mark.
		p.metrics.xid(x.Code, "unattributed")
		logger.Error(nil, "Xid critical error on a GPU instance without a MIG device: no device marked")
		return
	}
	p.metrics.xid(x.Code, "unhealthy")
	if !changed {
		// The same Xid again on devices marked for it, within
		// xidResaveAfter: counted, and nothing else to tell (an Xid
		// storm makes no health report, pass or event per Xid).
		logger.V(2).Info("Xid critical error again: devices marked already", "devices", hit)
		return
	}
	logger.Error(err, "Xid critical error: devices marked Unhealthy", "devices", hit)
	p.notifyHealth()
	if p.cfg.OnXid != nil {
		p.cfg.OnXid(ctx, x, hit)
	}
}

// xidHealth is the Xid mark of prepared device d, if any (xidMark; NVML
// may have numbered the GPUs anew since d was prepared).
func (p *Plugin) xidHealth(d PreparedDevice) (xidMark, bool) {
	board := d.GPUUUID
	if board == "" && strings.HasPrefix(d.UUID, "GPU-") {
		board = d.UUID // a whole GPU's; a MIG device recorded without its board's has none
	}
	return p.xidMark(d.GPUIndex, board, d.UUID)
}

// xidMark is the Xid mark of the device with UUID uuid ("" for none) on
// GPU gpuIndex, whose UUID is board ("" where not known), if any: the
// device's own, or its board's, found by the board's UUID where both know
// it, else by gpuIndex unless the mark there names another board.
func (p *Plugin) xidMark(gpuIndex int, board, uuid string) (xidMark, bool) {
	p.xidMu.Lock()
	defer p.xidMu.Unlock()
	if m, ok := p.xidDevices[uuid]; ok && uuid != "" {
		return m, true
	}
	if board != "" {
		for _, idx := range slices.Sorted(maps.Keys(p.xidGPUs)) {
			if m := p.xidGPUs[idx]; m.gpuUUID == board {
				return m, true
			}
		}
	}
	m, ok := p.xidGPUs[gpuIndex]
	if ok && board != "" && m.gpuUUID != "" && m.gpuUUID != board {
		return xidMark{}, false // another board's, at this index
	}
	return m, ok
}

// XidOf returns the Xid that hit the device with UUID uuid ("" for the
// GPU itself) on GPU gpuIndex, whose UUID is gpuUUID ("" where not known),
// if one did (WatchXids; a mark of the whole GPU found as xidMark says):
// the agent publishes such a device with slices.XidTaint, as the kubelet
// is told it is unhealthy (xidHealth), on the same board.
func (p *Plugin) XidOf(gpuIndex int, gpuUUID, uuid string) (uint64, bool) {
	m, ok := p.xidMark(gpuIndex, gpuUUID, uuid)
	return m.code, ok
}

// healthChanged is closed at the next change of the devices' health that
// WatchHealthStatus should report at once.
func (p *Plugin) healthChanged() <-chan struct{} {
	p.xidMu.Lock()
	defer p.xidMu.Unlock()
	return p.healthWake
}

// notifyHealth closes the channel healthChanged returned.
func (p *Plugin) notifyHealth() {
	p.xidMu.Lock()
	defer p.xidMu.Unlock()
	close(p.healthWake)
	p.healthWake = make(chan struct{})
}
