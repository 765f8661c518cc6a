package gpu

import (
	"context"
	"fmt"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"k8s.io/klog/v2"
)

// Xid is one Xid critical error NVML reported on a GPU (an event of type
// nvmlEventTypeXidCriticalError). Code is the driver's error number, as
// NVIDIA's "XID Errors" guide (docs.nvidia.com/deploy/xid-errors) lists
// them: 48 a double-bit ECC error, 79 the GPU fallen off the bus, 94 and 95
// a contained and an uncontained ECC error, 13, 31 and 43 errors of the
// application running, and so on.
type Xid struct {
	// GPUIndex is the GPU's NVML index, GPUUUID its UUID ("" where NVML
	// could not read it any more).
	GPUIndex int
	GPUUUID  string
	Code     uint64
	// GIID and CIID are the GPU instance and compute instance the error is
	// attributable to, -1 where it is not (nvmlEventData_t's
	// NVML_GPU_INSTANCE_ID_ANY / NVML_COMPUTE_INSTANCE_ID_ANY: the whole
	// GPU, or with MIG mode off).
	GIID, CIID int
}

// XidSource delivers the Xid critical errors of a node's GPUs.
type XidSource interface {
	// WatchXids calls fn with each Xid until ctx ends (nil) or the watch
	// fails (an error).
	WatchXids(ctx context.Context, fn func(Xid)) error
}

var _ XidSource = (*NVMLManager)(nil)

// xidWaitStep is how long one nvmlEventSetWait call waits for an event:
// WatchXids holds the manager's read lock that long at most, so Shutdown
// and ctx's end wait for no more.
const xidWaitStep = 500 * time.Millisecond

// WatchXids registers every GPU NVML lists for Xid critical errors
// (nvmlDeviceRegisterEvents on one event set), then calls fn with each Xid
// in the order NVML delivers them (nvmlEventSetWait_v2), until ctx ends,
// when it returns nil. Xids before the registration are not delivered. A
// GPU that cannot be read (a lost GPU: ERROR_GPU_IS_LOST), or whose
// nvmlDeviceGetSupportedEventTypes lacks Xid critical errors, is left out
// and logged; with none left the error wraps ErrNotSupported. An
// nvmlEventSetWait_v2 failure other than ERROR_TIMEOUT (no event) ends the
// watch with an error wrapping an *NVMLError (see the sentinels); the
// caller watches again. fn runs with no lock of the manager held, and may
// call it.
func (m *NVMLManager) WatchXids(ctx context.Context, fn func(Xid)) error {
	logger := klog.FromContext(ctx)
	set, err := m.xidEventSet(ctx)
	if err != nil {
		return err
	}
	defer func() {
		if release, err := m.enter(context.Background()); err == nil {
			_ = set.Free()
			release()
		}
	}()
	for {
		release, err := m.enter(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("watching Xid events: %w", err)
		}
		ev, ret := set.Wait(uint32(xidWaitStep.Milliseconds()))
		var x *Xid
		if ret == nvml.SUCCESS && ev.EventType&nvml.EventTypeXidCriticalError != 0 {
			read := xidOf(ev)
			x = &read
		}
		release()
		switch {
		case x != nil:
			logger.V(2).Info("Xid event", "gpu", x.GPUIndex, "xid", x.Code, "gpuInstance", x.GIID, "computeInstance", x.CIID)
			fn(*x)
		case ret != nvml.SUCCESS && ret != nvml.ERROR_TIMEOUT:
			return fmt.Errorf("waiting for Xid events: %w", nvmlErr("nvmlEventSetWait", ret))
		}
	}
}

// xidEventSet creates an event set with every GPU that supports Xid
// critical errors registered on it.
func (m *NVMLManager) xidEventSet(ctx context.Context) (nvml.EventSet, error) {
	logger := klog.FromContext(ctx)
	release, err := m.enter(ctx)
	if err != nil {
		return nil, fmt.Errorf("registering for Xid events: %w", err)
	}
	defer release()
	n, ret := m.lib.DeviceGetCount()
	if ret != nvml.SUCCESS {
		return nil, fmt.Errorf("registering for Xid events: counting GPUs: %w", nvmlErr("nvmlDeviceGetCount", ret))
	}
	set, ret := m.lib.EventSetCreate()
	if ret != nvml.SUCCESS {
		return nil, fmt.Errorf("registering for Xid events: %w", nvmlErr("nvmlEventSetCreate", ret))
	}
	registered := 0
	for idx := range n {
		if err := registerXids(m, idx, set); err != nil {
			logger.Info("GPU left out of the Xid event watch", "gpu", idx, "err", err)
			continue
		}
		registered++
	}
	if registered == 0 {
		_ = set.Free()
		return nil, fmt.Errorf("registering for Xid events: none of %d GPUs can report them: %w", n, ErrNotSupported)
	}
	return set, nil
}

func registerXids(m *NVMLManager, idx int, set nvml.EventSet) error {
	dev, err := m.device(idx)
	if err != nil {
		return err
	}
	types, ret := dev.GetSupportedEventTypes()
	if ret != nvml.SUCCESS {
		return fmt.Errorf("reading the event types GPU %d supports: %w", idx, nvmlErr("nvmlDeviceGetSupportedEventTypes", ret))
	}
	if types&nvml.EventTypeXidCriticalError == 0 {
		return fmt.Errorf("GPU %d does not report Xid critical errors (supported event types %#x): %w", idx, types, ErrNotSupported)
	}
	if ret := dev.RegisterEvents(nvml.EventTypeXidCriticalError, set); ret != nvml.SUCCESS {
		return fmt.Errorf("registering GPU %d for Xid critical errors: %w", idx, nvmlErr("nvmlDeviceRegisterEvents", ret))
	}
	return nil
}

// xidOf reads the Xid of an nvmlEventTypeXidCriticalError event.
func xidOf(ev nvml.EventData) Xid {
	x := Xid{GPUIndex: -1, Code: ev.EventData, GIID: -1, CIID: -1}
	if ev.Device != nil {
		if idx, ret := ev.Device.GetIndex(); ret == nvml.SUCCESS {
			x.GPUIndex = idx
		}
		if uuid, ret := ev.Device.GetUUID(); ret == nvml.SUCCESS {
			x.GPUUUID = uuid
		}
	}
	if ev.GpuInstanceId != nvml.GPU_INSTANCE_ID_ANY {
		x.GIID = int(ev.GpuInstanceId)
	}
	if ev.ComputeInstanceId != nvml.COMPUTE_INSTANCE_ID_ANY {
		x.CIID = int(ev.ComputeInstanceId)
	}
	return x
}
