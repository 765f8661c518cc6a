package nvmlsim

import (
	"fmt"
	"sync"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
)

// Xid is one Xid critical error of a simulated GPU (InjectXid), as
// nvmlEventSetWait delivers it to the event sets registered for
// nvmlEventTypeXidCriticalError on that GPU.
type Xid struct {
	// Seq orders the Xids of a state: each is greater than those injected
	// before it.
	Seq uint64 `json:"seq"`
	// GPUIndex is the GPU's NVML index; Code the Xid number (e.g. 48, a
	// double-bit ECC error).
	GPUIndex int    `json:"gpuIndex"`
	Code     uint64 `json:"code"`
	// GIID and CIID are the GPU and compute instance the error is
	// attributable to, -1 where it is not (the whole GPU: NVML reports
	// NVML_GPU_INSTANCE_ID_ANY / NVML_COMPUTE_INSTANCE_ID_ANY).
	GIID int `json:"giID"`
	CIID int `json:"ciID"`
}

// maxXids is how many Xids a state keeps: older ones are dropped, and an
// event set that has not read them by then misses them.
const maxXids = 256

// SupportedEventTypes are the event types nvmlDeviceGetSupportedEventTypes
// reports for every simulated GPU (the ones a data-centre GPU of the
// catalog supports); only Xid critical errors are ever delivered.
const SupportedEventTypes = nvml.EventTypeSingleBitEccError | nvml.EventTypeDoubleBitEccError |
	nvml.EventTypePState | nvml.EventTypeXidCriticalError | nvml.EventTypeClock

// eventPoll is how often Wait reads the state for a new Xid.
const eventPoll = 100 * time.Millisecond

// InjectXid records an Xid critical error on GPU index, as the driver
// reports one: every event set registered for Xid critical errors on that
// GPU (before now) delivers it once. giID and ciID name the GPU and compute
// instance it is attributable to (-1: the whole GPU; ciID needs giID); a
// GPU or compute instance that does not exist is refused, so that a test
// cannot blame a device the GPU never had. It needs no Init and changes
// nothing else: a real Xid 79 also takes the GPU off the bus (LoseGPU). The
// error wraps nvml.ERROR_INVALID_ARGUMENT for an index out of range or an
// instance that does not exist, nvml.ERROR_GPU_IS_LOST for a lost GPU.
func (s *Sim) InjectXid(index int, code uint64, giID, ciID int) error {
	err := s.update(func(st *fileState) (bool, error) {
		g, _, ret := st.gpu(index)
		if ret != nvml.SUCCESS {
			return false, ret
		}
		switch {
		case giID < 0 && ciID >= 0:
			return false, fmt.Errorf("compute instance %d without its GPU instance: %w", ciID, nvml.ERROR_INVALID_ARGUMENT)
		case giID >= 0 && g.gi(giID) == nil:
			return false, fmt.Errorf("no GPU instance %d: %w", giID, nvml.ERROR_INVALID_ARGUMENT)
		case ciID >= 0 && g.gi(giID).ci(ciID) == nil:
			return false, fmt.Errorf("no compute instance %d in GPU instance %d: %w", ciID, giID, nvml.ERROR_INVALID_ARGUMENT)
		}
		st.NextSerial++
		st.Xids = append(st.Xids, Xid{Seq: st.NextSerial, GPUIndex: index, Code: code, GIID: max(giID, -1), CIID: max(ciID, -1)})
		if n := len(st.Xids); n > maxXids {
			st.Xids = st.Xids[n-maxXids:]
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("injecting Xid %d on GPU %d: %w", code, index, err)
	}
	return nil
}

// lastSeq is the Seq of the newest Xid of the state, 0 without one.
func (st *fileState) lastSeq() uint64 {
	if n := len(st.Xids); n > 0 {
		return st.Xids[n-1].Seq
	}
	return 0
}

// eventSet is a simulated nvmlEventSet_t: the GPUs registered on it, each
// with its event types and the last Xid injected before its registration,
// and the last Xid it delivered.
type eventSet struct {
	*mock.EventSet
	s *Sim

	mu        sync.Mutex
	freed     bool
	registers map[int]registration
	delivered uint64
}

// registration is what a GPU is registered for on a set: its event types,
// and the last Xid injected before Xid critical errors were among them.
type registration struct {
	types    uint64
	xidAfter uint64
}

var _ nvml.EventSet = (*eventSet)(nil)

// EventSetCreate returns an empty event set (nvmlEventSetCreate);
// ERROR_UNINITIALIZED before Init.
func (s *Sim) EventSetCreate() (nvml.EventSet, nvml.Return) {
	if !s.initialized() {
		return nil, nvml.ERROR_UNINITIALIZED
	}
	return &eventSet{EventSet: &mock.EventSet{}, s: s, registers: map[int]registration{}}, nvml.SUCCESS
}

// EventSetWait calls set.Wait.
func (s *Sim) EventSetWait(set nvml.EventSet, timeoutms uint32) (nvml.EventData, nvml.Return) {
	if set == nil {
		return nvml.EventData{}, nvml.ERROR_INVALID_ARGUMENT
	}
	return set.Wait(timeoutms)
}

// EventSetFree calls set.Free.
func (s *Sim) EventSetFree(set nvml.EventSet) nvml.Return {
	if set == nil {
		return nvml.ERROR_INVALID_ARGUMENT
	}
	return set.Free()
}

// DeviceRegisterEvents calls h.RegisterEvents.
func (s *Sim) DeviceRegisterEvents(h nvml.Device, types uint64, set nvml.EventSet) nvml.Return {
	if h == nil {
		return nvml.ERROR_INVALID_ARGUMENT
	}
	return h.RegisterEvents(types, set)
}

// DeviceGetSupportedEventTypes calls h.GetSupportedEventTypes.
func (s *Sim) DeviceGetSupportedEventTypes(h nvml.Device) (uint64, nvml.Return) {
	if h == nil {
		return 0, nvml.ERROR_INVALID_ARGUMENT
	}
	return h.GetSupportedEventTypes()
}

// GetSupportedEventTypes returns SupportedEventTypes
// (nvmlDeviceGetSupportedEventTypes), for a MIG device handle too (nvml.h
// lists no refusal of one); ERROR_GPU_IS_LOST for a lost GPU.
func (d device) GetSupportedEventTypes() (uint64, nvml.Return) {
	ret := d.read("GetSupportedEventTypes", true, func(devCtx) nvml.Return { return nvml.SUCCESS })
	if ret != nvml.SUCCESS {
		return 0, ret
	}
	return SupportedEventTypes, nvml.SUCCESS
}

// RegisterEvents registers the GPU on set for the given event types
// (nvmlDeviceRegisterEvents), adding them to any it was registered for
// before: Xids injected from now on are delivered. It refuses what NVML
// refuses: ERROR_INVALID_ARGUMENT for a nil or freed set (or one of
// another library), ERROR_NOT_SUPPORTED for a MIG device handle (nvml.h
// has no per-instance event reporting through MIG device handles) or an
// event type outside SupportedEventTypes, ERROR_GPU_IS_LOST for a lost
// GPU, ERROR_UNINITIALIZED before Init.
func (d device) RegisterEvents(types uint64, set nvml.EventSet) nvml.Return {
	es, ok := set.(*eventSet)
	if !ok || es == nil || es.s != d.s {
		return nvml.ERROR_INVALID_ARGUMENT
	}
	var last uint64
	ret := d.read("RegisterEvents", false, func(c devCtx) nvml.Return {
		if types&^SupportedEventTypes != 0 {
			return nvml.ERROR_NOT_SUPPORTED
		}
		last = c.st.lastSeq()
		return nvml.SUCCESS
	})
	if ret != nvml.SUCCESS {
		return ret
	}
	es.mu.Lock()
	defer es.mu.Unlock()
	if es.freed {
		return nvml.ERROR_INVALID_ARGUMENT
	}
	r := es.registers[d.index]
	if r.types&nvml.EventTypeXidCriticalError == 0 {
		// Xids before this call are not delivered, even where the GPU
		// was registered for other types before.
		r.xidAfter = last
	}
	r.types |= types
	es.registers[d.index] = r
	return nvml.SUCCESS
}

// Wait returns the next Xid critical error of a GPU registered for them on
// set (nvmlEventSetWait_v2): the oldest not yet delivered by set and
// injected after the GPU's registration for them, with the GPU's handle,
// the Xid in EventData and its GPU and compute instance IDs
// (GPU_INSTANCE_ID_ANY / COMPUTE_INSTANCE_ID_ANY for the whole GPU). It
// waits up to timeoutms for one, then returns ERROR_TIMEOUT. With none to
// deliver, it returns ERROR_GPU_IS_LOST while a GPU registered on set is
// lost (the set must be made again without it); ERROR_INVALID_ARGUMENT for
// a freed set, ERROR_UNINITIALIZED before Init.
func (set *eventSet) Wait(timeoutms uint32) (nvml.EventData, nvml.Return) {
	deadline := time.Now().Add(time.Duration(timeoutms) * time.Millisecond)
	for {
		ev, ret := set.next()
		if ret != nvml.ERROR_TIMEOUT {
			return ev, ret
		}
		left := time.Until(deadline)
		if left <= 0 {
			return nvml.EventData{}, nvml.ERROR_TIMEOUT
		}
		time.Sleep(min(left, eventPoll))
	}
}

// next delivers the next Xid that is there (ERROR_TIMEOUT: none).
func (set *eventSet) next() (nvml.EventData, nvml.Return) {
	if !set.s.initialized() {
		return nvml.EventData{}, nvml.ERROR_UNINITIALIZED
	}
	set.mu.Lock()
	defer set.mu.Unlock()
	if set.freed {
		return nvml.EventData{}, nvml.ERROR_INVALID_ARGUMENT
	}
	var found *Xid
	lost := false
	err := set.s.update(func(st *fileState) (bool, error) {
		for i := range st.Xids {
			x := st.Xids[i]
			r, ok := set.registers[x.GPUIndex]
			if x.Seq > set.delivered && ok && x.Seq > r.xidAfter && r.types&nvml.EventTypeXidCriticalError != 0 {
				found = &x
				break
			}
		}
		if found == nil {
			for idx := range set.registers {
				if idx < len(st.GPUs) && st.GPUs[idx].Lost {
					lost = true
				}
			}
		}
		return false, nil
	})
	if err != nil {
		return nvml.EventData{}, nvml.ERROR_UNKNOWN
	}
	if lost {
		return nvml.EventData{}, nvml.ERROR_GPU_IS_LOST
	}
	if found == nil {
		return nvml.EventData{}, nvml.ERROR_TIMEOUT
	}
	set.delivered = found.Seq
	ev := nvml.EventData{
		Device:            set.s.gpuHandle(found.GPUIndex),
		EventType:         nvml.EventTypeXidCriticalError,
		EventData:         found.Code,
		GpuInstanceId:     nvml.GPU_INSTANCE_ID_ANY,
		ComputeInstanceId: nvml.COMPUTE_INSTANCE_ID_ANY,
	}
	if found.GIID >= 0 {
		ev.GpuInstanceId = uint32(found.GIID)
	}
	if found.CIID >= 0 {
		ev.ComputeInstanceId = uint32(found.CIID)
	}
	return ev, nvml.SUCCESS
}

// Free frees the set (nvmlEventSetFree): later calls on it fail with
// ERROR_INVALID_ARGUMENT, as does a second Free.
func (set *eventSet) Free() nvml.Return {
	set.mu.Lock()
	defer set.mu.Unlock()
	if set.freed {
		return nvml.ERROR_INVALID_ARGUMENT
	}
	set.freed = true
	return nvml.SUCCESS
}
