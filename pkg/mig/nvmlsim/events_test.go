package nvmlsim

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// xidEvent is what a test compares of an event: its GPU, Xid and instances.
type xidEvent struct {
	GPU        int
	Type, Code uint64
	GI, CI     uint32
}

func waitXid(t *testing.T, set nvml.EventSet, timeoutms uint32) (xidEvent, nvml.Return) {
	t.Helper()
	ev, ret := set.Wait(timeoutms)
	if ret != nvml.SUCCESS {
		return xidEvent{}, ret
	}
	idx, r := ev.Device.GetIndex()
	must(t, "GetIndex of the event's device", r)
	return xidEvent{GPU: idx, Type: ev.EventType, Code: ev.EventData, GI: ev.GpuInstanceId, CI: ev.ComputeInstanceId}, ret
}

// TestXidDelivery: an event set delivers each Xid injected on a GPU it is
// registered on after its registration, once, oldest first, with the
// instance it is attributable to; and nothing else.
func TestXidDelivery(t *testing.T) {
	s := newTestSim(t, Config{Spec: "2x" + a100})
	d0 := migOn(t, s, 0)
	gi3, _ := mustMIG(t, d0, nvml.GPU_INSTANCE_PROFILE_3_SLICE, 4)
	giInfo, ret := gi3.GetInfo()
	must(t, "GpuInstance.GetInfo", ret)
	gi := int(giInfo.Id)

	if err := s.InjectXid(0, 31, -1, -1); err != nil {
		t.Fatal(err)
	}
	set, ret := s.EventSetCreate()
	must(t, "EventSetCreate", ret)
	d1, ret := s.DeviceGetHandleByIndex(1)
	must(t, "DeviceGetHandleByIndex(1)", ret)
	must(t, "RegisterEvents(GPU 0)", d0.RegisterEvents(nvml.EventTypeXidCriticalError, set))
	must(t, "RegisterEvents(GPU 1, ECC only)", d1.RegisterEvents(nvml.EventTypeDoubleBitEccError, set))

	for _, x := range []struct {
		gpu    int
		code   uint64
		gi, ci int
	}{{0, 48, -1, -1}, {1, 79, -1, -1}, {0, 94, gi, -1}, {0, 95, gi, 0}} {
		if err := s.InjectXid(x.gpu, x.code, x.gi, x.ci); err != nil {
			t.Fatal(err)
		}
	}
	var got []xidEvent
	for {
		ev, ret := waitXid(t, set, 50)
		if ret == nvml.ERROR_TIMEOUT {
			break
		}
		must(t, "Wait", ret)
		got = append(got, ev)
	}
	any := uint32(nvml.GPU_INSTANCE_ID_ANY)
	want := []xidEvent{
		{GPU: 0, Type: nvml.EventTypeXidCriticalError, Code: 48, GI: any, CI: any},
		{GPU: 0, Type: nvml.EventTypeXidCriticalError, Code: 94, GI: uint32(gi), CI: any},
		{GPU: 0, Type: nvml.EventTypeXidCriticalError, Code: 95, GI: uint32(gi), CI: 0},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("events delivered (-want +got):\n%s", diff)
	}

	// A second set registered now sees only what comes after.
	other, ret := s.EventSetCreate()
	must(t, "EventSetCreate", ret)
	must(t, "RegisterEvents(GPU 0) on the second set", d0.RegisterEvents(nvml.EventTypeXidCriticalError, other))
	if _, ret := waitXid(t, other, 20); ret != nvml.ERROR_TIMEOUT {
		t.Errorf("second set's Wait = %v, want ERROR_TIMEOUT (the Xids came before its registration)", ret)
	}
	if err := s.InjectXid(0, 119, -1, -1); err != nil {
		t.Fatal(err)
	}
	for name, es := range map[string]nvml.EventSet{"first": set, "second": other} {
		ev, ret := waitXid(t, es, 1000)
		must(t, name+" set's Wait", ret)
		if ev.Code != 119 {
			t.Errorf("%s set delivered Xid %d, want 119", name, ev.Code)
		}
	}
}

// TestXidAcrossProcesses: an Xid injected through another Sim on the same
// state file (a test beside the agent) reaches an event set waiting.
func TestXidAcrossProcesses(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.json")
	s := newTestSim(t, Config{Spec: "1x" + a100, StatePath: path})
	injector, err := OpenState(path)
	if err != nil {
		t.Fatal(err)
	}
	set, ret := s.EventSetCreate()
	must(t, "EventSetCreate", ret)
	d, ret := s.DeviceGetHandleByIndex(0)
	must(t, "DeviceGetHandleByIndex", ret)
	must(t, "RegisterEvents", s.DeviceRegisterEvents(d, nvml.EventTypeXidCriticalError, set))
	if err := injector.InjectXid(0, 48, -1, -1); err != nil {
		t.Fatal(err)
	}
	ev, ret := waitXid(t, set, 2000)
	must(t, "Wait", ret)
	if ev.Code != 48 || ev.GPU != 0 {
		t.Errorf("delivered %+v, want Xid 48 on GPU 0", ev)
	}
}

// TestEventRefusals: what nvml.h refuses, the simulator refuses.
func TestEventRefusals(t *testing.T) {
	s := newTestSim(t, Config{Spec: "2x" + a100})
	d0 := migOn(t, s, 0)
	gi1, _ := mustMIG(t, d0, nvml.GPU_INSTANCE_PROFILE_1_SLICE, 0)
	giInfo, ret := gi1.GetInfo()
	must(t, "GpuInstance.GetInfo", ret)
	gi := int(giInfo.Id)
	mig0, ret := d0.GetMigDeviceHandleByIndex(0)
	must(t, "GetMigDeviceHandleByIndex", ret)
	set, ret := s.EventSetCreate()
	must(t, "EventSetCreate", ret)

	types, ret := s.DeviceGetSupportedEventTypes(d0)
	must(t, "GetSupportedEventTypes", ret)
	if types&nvml.EventTypeXidCriticalError == 0 {
		t.Errorf("supported event types %#x lack Xid critical errors", types)
	}
	if types, ret := mig0.GetSupportedEventTypes(); ret != nvml.SUCCESS || types != SupportedEventTypes {
		t.Errorf("GetSupportedEventTypes on a MIG device handle = %#x, %v; want the GPU's, SUCCESS", types, ret)
	}
	wantRet(t, "RegisterEvents on a MIG device handle", mig0.RegisterEvents(nvml.EventTypeXidCriticalError, set), nvml.ERROR_NOT_SUPPORTED)
	wantRet(t, "RegisterEvents of an unsupported type", d0.RegisterEvents(nvml.EventMigConfigChange, set), nvml.ERROR_NOT_SUPPORTED)
	wantRet(t, "RegisterEvents on a nil set", d0.RegisterEvents(nvml.EventTypeXidCriticalError, nil), nvml.ERROR_INVALID_ARGUMENT)

	if err := s.LoseGPU(1); err != nil {
		t.Fatal(err)
	}
	d1 := s.gpuHandle(1)
	wantRet(t, "RegisterEvents on a lost GPU", d1.RegisterEvents(nvml.EventTypeXidCriticalError, set), nvml.ERROR_GPU_IS_LOST)
	if err := s.InjectXid(1, 79, -1, -1); !errors.Is(err, nvml.ERROR_GPU_IS_LOST) {
		t.Errorf("InjectXid on a lost GPU: %v, want ERROR_GPU_IS_LOST", err)
	}
	for name, x := range map[string][3]int{
		"GPU out of range":         {2, -1, -1},
		"GPU instance missing":     {0, gi + 1, -1},
		"compute instance missing": {0, gi, 5},
		"compute instance alone":   {0, -1, 0},
	} {
		if err := s.InjectXid(x[0], 48, x[1], x[2]); !errors.Is(err, nvml.ERROR_INVALID_ARGUMENT) {
			t.Errorf("InjectXid, %s: %v, want ERROR_INVALID_ARGUMENT", name, err)
		}
	}
	if got := s.Snapshot().Xids; len(got) != 0 {
		t.Errorf("refused injections recorded %v", got)
	}

	must(t, "Free", set.Free())
	wantRet(t, "second Free", set.Free(), nvml.ERROR_INVALID_ARGUMENT)
	_, ret = set.Wait(10)
	wantRet(t, "Wait on a freed set", ret, nvml.ERROR_INVALID_ARGUMENT)
	wantRet(t, "RegisterEvents on a freed set", d0.RegisterEvents(nvml.EventTypeXidCriticalError, set), nvml.ERROR_INVALID_ARGUMENT)

	must(t, "Shutdown", s.Shutdown())
	_, ret = s.EventSetCreate()
	wantRet(t, "EventSetCreate before Init", ret, nvml.ERROR_UNINITIALIZED)
	initSim(t, s)
}

// TestXidRegistrationLater: a GPU registered for another event type first
// gets no Xid from before its registration for Xids; a lost GPU on the set
// makes Wait fail with ERROR_GPU_IS_LOST once the Xids before are read.
func TestXidRegistrationLater(t *testing.T) {
	s := newTestSim(t, Config{Spec: "2x" + a100})
	set, ret := s.EventSetCreate()
	must(t, "EventSetCreate", ret)
	d0, d1 := s.gpuHandle(0), s.gpuHandle(1)
	must(t, "RegisterEvents(GPU 0, ECC)", d0.RegisterEvents(nvml.EventTypeDoubleBitEccError, set))
	if err := s.InjectXid(0, 48, -1, -1); err != nil {
		t.Fatal(err)
	}
	must(t, "RegisterEvents(GPU 0, Xids)", d0.RegisterEvents(nvml.EventTypeXidCriticalError, set))
	must(t, "RegisterEvents(GPU 1, Xids)", d1.RegisterEvents(nvml.EventTypeXidCriticalError, set))
	if ev, ret := waitXid(t, set, 20); ret != nvml.ERROR_TIMEOUT {
		t.Errorf("Wait = %+v, %v; want ERROR_TIMEOUT: the Xid came before GPU 0's registration for Xids", ev, ret)
	}
	if err := s.InjectXid(0, 79, -1, -1); err != nil {
		t.Fatal(err)
	}
	if err := s.LoseGPU(1); err != nil {
		t.Fatal(err)
	}
	if ev, ret := waitXid(t, set, 1000); ret != nvml.SUCCESS || ev.Code != 79 {
		t.Errorf("Wait = %+v, %v; want Xid 79 delivered first", ev, ret)
	}
	_, ret = set.Wait(20)
	wantRet(t, "Wait with GPU 1 lost", ret, nvml.ERROR_GPU_IS_LOST)
}
