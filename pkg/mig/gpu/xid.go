package gpu

import (
	"context"
	"fmt"
	"reflect"
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
	// GPUIndex is the GPU's NVML index, GPUUUID its UUID: where NVML
	// cannot read it any more (Xid 79, the GPU off the bus), the one read
	// when the GPU was registered for the events; "" where neither read.
	GPUIndex int
	GPUUUID  string
	Code     uint64
	// GIID and CIID are the GPU instance and compute instance the error is
	// attributable to, -1 where it is not (nvmlEventData_t's
	// NVML_GPU_INSTANCE_ID_ANY / NVML_COMPUTE_INSTANCE_ID_ANY: the whole
	// GPU, or with MIG mode off).
	GIID, CIID int
	// Devices are, for an Xid of a GPU instance (GIID >= 0), the MIG
	// devices it hits: the GPU instance's compute instances (CIID's alone
	// where CIID >= 0) that have a MIG device UUID, as NVML listed them
	// when the event was read, or, for an event posted during a destroy
	// through the manager, just before that destroy (see WatchXids). Empty
	// where the GPU instance has none (no compute instance, or destroyed,
	// by someone else, before the event was read).
	// DevicesErr is why they could not be listed (an NVML error reading
	// the GPU); Devices is then empty and the Xid is the whole GPU's for
	// all anyone can tell.
	Devices    []MIGDevice
	DevicesErr error
}

// XidSource delivers the Xid critical errors of a node's GPUs.
type XidSource interface {
	// WatchXids calls fn with each Xid until ctx ends (nil) or the watch
	// fails (an error). Where skip is not nil and true for an Xid's code,
	// its devices are not read (Devices empty): the caller ignores it.
	WatchXids(ctx context.Context, skip func(code uint64) bool, fn func(Xid)) error
}

var _ XidSource = (*NVMLManager)(nil)

// xidWaitStep is how long one nvmlEventSetWait call waits for an event:
// WatchXids holds the manager's read lock that long at most, so Shutdown
// and ctx's end wait for no more, and a change of a GPU's instances waits
// that long at most (Go's mutex hands it over to a waiter that waited
// over a millisecond) for the watch to let it read the pending events
// (holdXids, readXids).
const xidWaitStep = 100 * time.Millisecond

// xidRescan is how often WatchXids tries again to register the GPUs it
// left out (a variable for tests).
var xidRescan = 10 * time.Second

// WatchXids registers every GPU NVML lists for Xid critical errors
// (nvmlDeviceRegisterEvents on one event set), then calls fn with each Xid
// in the order NVML delivers them (nvmlEventSetWait_v2), until ctx ends,
// when it returns nil. Xids before a GPU's registration are not delivered.
// A GPU that cannot be read (a lost GPU: ERROR_GPU_IS_LOST), or whose
// nvmlDeviceGetSupportedEventTypes lacks Xid critical errors, is left out
// and logged, and tried again every xidRescan; with none registered at
// first the error wraps ErrNotSupported. An nvmlEventSetWait_v2 failure
// other than ERROR_TIMEOUT (no event), such as ERROR_GPU_IS_LOST for a GPU
// of the set fallen off the bus, ends the watch with an error wrapping an
// *NVMLError (see the sentinels); the caller watches again. An Xid's
// GPUIndex is the index its GPU was registered with where NVML cannot read
// it any more. An Xid of a GPU instance carries its MIG devices (Devices),
// read with the event. DestroyMIGDevice reads the events pending on every
// watch's set before and after its destroy, resolving those of the GPU
// against its devices before the destroy (holdXids), and CreateMIGDevice
// reads them before its create (readXids): an Xid of a GPU instance is
// never resolved against a GPU instance NVML made since with the same ID
// (it follows from the placement), whose device would be blamed. fn runs
// with no lock of the manager held, and may call it. An Xid whose code skip
// (when not nil) is true for comes without its devices: reading them costs
// a listing of the GPU under the lock destroys wait on, which an Xid storm
// of the application's own errors would pay once per Xid.
func (m *NVMLManager) WatchXids(ctx context.Context, skip func(code uint64) bool, fn func(Xid)) error {
	logger := klog.FromContext(ctx)
	w, err := m.newXidWatch(ctx, skip)
	if err != nil {
		return err
	}
	defer func() {
		m.xidMu.Lock()
		delete(m.xidWatches, w)
		read := w.read
		m.xidMu.Unlock()
		if release, err := m.enter(context.Background()); err == nil {
			_ = w.set.Free()
			release()
		}
		// The Xids read before a destroy and not delivered yet (the
		// agent stopping) are delivered all the same.
		for _, x := range read {
			fn(x)
		}
	}()
	rescan := time.Now().Add(xidRescan)
	for {
		release, err := m.enter(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("watching Xid events: %w", err)
		}
		if time.Now().After(rescan) {
			// Under xidMu: a change's readXids reads the maps register
			// writes (xidOf).
			m.xidMu.Lock()
			w.register(ctx)
			m.xidMu.Unlock()
			rescan = time.Now().Add(xidRescan)
		}
		x, ret := w.next(ctx)
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

// next is the watch's next Xid: the oldest one read before a destroy
// (holdXids), else one the event set delivers within xidWaitStep (nil
// with the return code of nvmlEventSetWait: ERROR_TIMEOUT for none). The
// caller holds the manager's read lock.
func (w *xidWatch) next(ctx context.Context) (*Xid, nvml.Return) {
	w.m.xidMu.Lock()
	defer w.m.xidMu.Unlock()
	if len(w.read) > 0 {
		x := w.read[0]
		w.read = w.read[1:]
		return &x, nvml.SUCCESS
	}
	ev, ret := w.set.Wait(uint32(xidWaitStep.Milliseconds()))
	if ret != nvml.SUCCESS || ev.EventType&nvml.EventTypeXidCriticalError == 0 {
		return nil, ret
	}
	x := w.xidOf(ev)
	if w.resolves(x) {
		x.resolve(w.m.listMIGDevices(ctx, x.GPUIndex))
	}
	return &x, ret
}

// xidWatch is an event set and the GPUs registered on it.
type xidWatch struct {
	m     *NVMLManager
	set   nvml.EventSet
	count int
	// registered are the GPUs on the set by index; indexOf their indexes
	// by handle, where handles compare; uuidOf their UUIDs by index, read
	// at registration, for an event whose GPU is off the bus by the time
	// it is read (its mark, restored after a restart, must not land on
	// the GPU NVML then numbers at its index).
	registered map[int]bool
	indexOf    map[any]int
	uuidOf     map[int]string
	// toldLeftOut are the GPUs whose registration failure was logged.
	toldLeftOut map[int]bool
	// skip names the Xid codes whose devices are not read (WatchXids).
	skip func(code uint64) bool
	// read are the Xids holdXids read off the set, oldest first, to
	// deliver before the set's next events (under the manager's xidMu).
	read []Xid
}

// newXidWatch creates an event set with every GPU that supports Xid
// critical errors registered on it.
func (m *NVMLManager) newXidWatch(ctx context.Context, skip func(code uint64) bool) (*xidWatch, error) {
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
	w := &xidWatch{m: m, set: set, count: n, skip: skip, registered: map[int]bool{}, indexOf: map[any]int{}, uuidOf: map[int]string{}, toldLeftOut: map[int]bool{}}
	w.register(ctx)
	if len(w.registered) == 0 {
		_ = set.Free()
		return nil, fmt.Errorf("registering for Xid events: none of %d GPUs can report them: %w", n, ErrNotSupported)
	}
	m.xidMu.Lock()
	m.xidWatches[w] = true
	m.xidMu.Unlock()
	return w, nil
}

// register registers the GPUs not on the set yet; the caller holds the
// manager's read lock.
func (w *xidWatch) register(ctx context.Context) {
	logger := klog.FromContext(ctx)
	for idx := range w.count {
		if w.registered[idx] {
			continue
		}
		dev, err := w.m.device(idx)
		if err == nil {
			err = registerXids(dev, idx, w.set)
		}
		if err != nil {
			if !w.toldLeftOut[idx] {
				logger.Info("GPU left out of the Xid event watch; tried again every 10s", "gpu", idx, "err", err)
				w.toldLeftOut[idx] = true
			}
			continue
		}
		w.registered[idx] = true
		if uuid, ret := dev.GetUUID(); ret == nvml.SUCCESS {
			w.uuidOf[idx] = uuid
		}
		if reflect.TypeOf(dev).Comparable() {
			w.indexOf[dev] = idx
		}
		logger.V(1).Info("Watching the GPU's Xid events", "gpu", idx)
	}
}

func registerXids(dev nvml.Device, idx int, set nvml.EventSet) error {
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

// xidOf reads the Xid of an nvmlEventTypeXidCriticalError event, without
// its devices (resolve).
func (w *xidWatch) xidOf(ev nvml.EventData) Xid {
	x := Xid{GPUIndex: -1, Code: ev.EventData, GIID: -1, CIID: -1}
	if ev.Device != nil {
		if idx, ret := ev.Device.GetIndex(); ret == nvml.SUCCESS {
			x.GPUIndex = idx
		} else if reflect.TypeOf(ev.Device).Comparable() {
			if idx, ok := w.indexOf[ev.Device]; ok {
				x.GPUIndex = idx
			}
		}
		if uuid, ret := ev.Device.GetUUID(); ret == nvml.SUCCESS {
			x.GPUUUID = uuid
		} else if x.GPUIndex >= 0 {
			x.GPUUUID = w.uuidOf[x.GPUIndex]
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

// resolves reports whether x's devices are to be read: an Xid of a GPU
// instance of a GPU NVML names, whose code w does not skip.
func (w *xidWatch) resolves(x Xid) bool {
	return x.GIID >= 0 && x.GPUIndex >= 0 && (w.skip == nil || !w.skip(x.Code))
}

// migListing is one listing of a GPU's MIG devices (migDevices), or why
// it failed.
type migListing struct {
	devices []MIGDevice
	err     error
}

// listMIGDevices lists GPU idx's MIG devices; the caller holds the
// manager's read lock.
func (m *NVMLManager) listMIGDevices(ctx context.Context, idx int) migListing {
	devs, err := settled(func() ([]MIGDevice, error) { return m.migDevices(ctx, idx) })
	if err != nil {
		return migListing{err: fmt.Errorf("listing MIG devices of GPU %d: %w", idx, err)}
	}
	return migListing{devices: devs}
}

// resolve sets x's Devices (or DevicesErr) from l, a listing of its GPU.
func (x *Xid) resolve(l migListing) {
	if l.err != nil {
		x.DevicesErr = l.err
		return
	}
	for _, d := range l.devices {
		if d.UUID != "" && d.GIID == x.GIID && (x.CIID < 0 || d.CIID == x.CIID) {
			x.Devices = append(x.Devices, d)
		}
	}
}
