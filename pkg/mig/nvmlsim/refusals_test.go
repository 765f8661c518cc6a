package nvmlsim

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// TestStaleMIGDeviceHandleAfterCIRecreated: a MIG device handle names the
// compute instance it was last handed out for, not its GI and CI IDs. Once
// that CI is destroyed and a new one takes the same IDs, the old handle is
// stale (ERROR_INVALID_ARGUMENT) and does not reach the new MIG device
// until the process asks for a handle of that index again
// (TestMIGDeviceHandleReused).
func TestStaleMIGDeviceHandleAfterCIRecreated(t *testing.T) {
	s := newTestSim(t, Config{Spec: "1x" + a100})
	d := migOn(t, s, 0)
	gi, ci := mustMIG(t, d, nvml.GPU_INSTANCE_PROFILE_1_SLICE, 0)
	old, ret := d.GetMigDeviceHandleByIndex(0)
	must(t, "GetMigDeviceHandleByIndex(0)", ret)
	oldUUID, ret := old.GetUUID()
	must(t, "GetUUID", ret)
	must(t, "ComputeInstance.Destroy", ci.Destroy())
	info := fullCI(t, gi)
	_, ret = gi.CreateComputeInstance(&info)
	must(t, "CreateComputeInstance again", ret)

	uuid, ret := old.GetUUID()
	wantRet(t, "GetUUID on the destroyed MIG device's handle", ret, nvml.ERROR_INVALID_ARGUMENT)
	if ret == nvml.SUCCESS && uuid != oldUUID {
		t.Errorf("stale MIG device handle reached the new MIG device %s (was %s)", uuid, oldUUID)
	}
	_, ret = old.GetMemoryInfo()
	wantRet(t, "GetMemoryInfo on the destroyed MIG device's handle", ret, nvml.ERROR_INVALID_ARGUMENT)
}

// TestCreateGpuInstanceUnknownProfileID: nvml.h,
// nvmlDeviceCreateGpuInstance[WithPlacement]: ERROR_INVALID_ARGUMENT "If
// device, profile, profileId, placement or gpuInstance are invalid" (not
// NOT_SUPPORTED, which is for MIG mode off).
func TestCreateGpuInstanceUnknownProfileID(t *testing.T) {
	s := newTestSim(t, Config{Spec: "1x" + a100})
	d := migOn(t, s, 0)
	info := nvml.GpuInstanceProfileInfo{Id: 999, InstanceCount: 1}
	pl := nvml.GpuInstancePlacement{Start: 0, Size: 1}
	_, ret := d.CreateGpuInstanceWithPlacement(&info, &pl)
	wantRet(t, "CreateGpuInstanceWithPlacement(profile ID 999)", ret, nvml.ERROR_INVALID_ARGUMENT)
	_, ret = d.CreateGpuInstance(&info)
	wantRet(t, "CreateGpuInstance(profile ID 999)", ret, nvml.ERROR_INVALID_ARGUMENT)
	if got := layout(s, 0); got != "" {
		t.Errorf("layout %q after refused creates, want empty", got)
	}
}

// TestMIGDeviceHandleByIndexWithMIGOff: with MIG mode off no index is out
// of GetMaxMigDeviceCount's range (it is 0); every index >= 0 answers
// ERROR_NOT_FOUND, as driver 580 answers for index 0.
func TestMIGDeviceHandleByIndexWithMIGOff(t *testing.T) {
	s := newTestSim(t, Config{Spec: "1x" + a100})
	d := handle(t, s, 0)
	for _, i := range []int{0, 6, 7, 100} {
		_, ret := d.GetMigDeviceHandleByIndex(i)
		wantRet(t, fmt.Sprintf("GetMigDeviceHandleByIndex(%d) with MIG mode off", i), ret, nvml.ERROR_NOT_FOUND)
	}
	_, ret := d.GetMigDeviceHandleByIndex(-1)
	wantRet(t, "GetMigDeviceHandleByIndex(-1)", ret, nvml.ERROR_INVALID_ARGUMENT)
}

// TestMIGDevicesOfOneGI: two CIs of one GI share its memory, so each MIG
// device's GetMemoryInfo counts the processes of both, while
// GetComputeRunningProcesses lists only the processes on the MIG device
// itself.
func TestMIGDevicesOfOneGI(t *testing.T) {
	s, _, g, info := oneSliceCIsOf(t, nvml.GPU_INSTANCE_PROFILE_3_SLICE)
	var devs []nvml.Device
	var uuids []string
	for range 2 {
		ci, ret := g.CreateComputeInstance(&info)
		must(t, "CreateComputeInstance(1c.3g)", ret)
		uuid := migUUIDOf(t, s, 0, ci)
		md, ret := s.DeviceGetHandleByUUID(uuid)
		must(t, "DeviceGetHandleByUUID", ret)
		devs, uuids = append(devs, md), append(uuids, uuid)
	}
	pid, err := s.StartProcess(uuids[0], 1000)
	if err != nil {
		t.Fatal(err)
	}
	type facts struct {
		UsedMiB uint64
		PIDs    []uint32
	}
	var got []facts
	for _, md := range devs {
		mem, ret := md.GetMemoryInfo()
		must(t, "GetMemoryInfo", ret)
		ps, ret := md.GetComputeRunningProcesses()
		must(t, "GetComputeRunningProcesses", ret)
		f := facts{UsedMiB: mem.Used >> 20}
		for _, p := range ps {
			f.PIDs = append(f.PIDs, p.Pid)
		}
		got = append(got, f)
	}
	want := []facts{{UsedMiB: 1000, PIDs: []uint32{pid}}, {UsedMiB: 1000}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("MIG devices of one GI with a process on the first (-want +got):\n%s", diff)
	}
}

// TestComputeInstanceIDReusesTheSmallestFree: a new CI takes the smallest
// CI ID no CI of its GI has, so after CIs 0 and 1 and the destruction of
// CI 0 it is CI 0 again, and CI 1 stays reachable by its ID.
func TestComputeInstanceIDReusesTheSmallestFree(t *testing.T) {
	s, _, g, info, first, second := twoOneSliceCIs(t)
	secondUUID := migUUIDOf(t, s, 0, second)
	must(t, "ComputeInstance.Destroy(CI 0)", first.Destroy())
	third, ret := g.CreateComputeInstance(&info)
	must(t, "CreateComputeInstance", ret)
	in, ret := third.GetInfo()
	must(t, "ComputeInstance.GetInfo", ret)
	if in.Id != 0 {
		t.Errorf("new CI beside CI 1 got ID %d, want 0", in.Id)
	}
	byID, ret := g.GetComputeInstanceById(1)
	must(t, "GetComputeInstanceById(1)", ret)
	if byID != second || migUUIDOf(t, s, 0, byID) != secondUUID {
		t.Errorf("GetComputeInstanceById(1) is not the CI created second")
	}
	var ids []int
	for _, c := range s.Snapshot().GPUs[0].GPUInstances[0].ComputeInstances {
		ids = append(ids, c.ID)
	}
	slices.Sort(ids)
	if diff := cmp.Diff([]int{0, 1}, ids); diff != "" {
		t.Errorf("CI IDs (-want +got):\n%s", diff)
	}
}

// TestLyingCreateComputeInstance: a lying CreateComputeInstance reports
// SUCCESS, creates nothing, and returns a handle to nothing.
func TestLyingCreateComputeInstance(t *testing.T) {
	s := newTestSim(t, Config{Spec: "1x" + a100})
	d := migOn(t, s, 0)
	g := mustGI(t, d, nvml.GPU_INSTANCE_PROFILE_3_SLICE, 0)
	info := fullCI(t, g)
	if err := s.InjectFault(Fault{Op: "CreateComputeInstance", Nth: 1, Lie: true}); err != nil {
		t.Fatal(err)
	}
	phantom, ret := g.CreateComputeInstance(&info)
	must(t, "lying CreateComputeInstance", ret)
	if cis := s.Snapshot().GPUs[0].GPUInstances[0].ComputeInstances; len(cis) != 0 {
		t.Errorf("lying CreateComputeInstance created %+v", cis)
	}
	_, ret = phantom.GetInfo()
	wantRet(t, "GetInfo of the phantom CI", ret, nvml.ERROR_INVALID_ARGUMENT)
	_, ret = d.GetMigDeviceHandleByIndex(0)
	wantRet(t, "GetMigDeviceHandleByIndex(0) after a lying create", ret, nvml.ERROR_NOT_FOUND)
	must(t, "GpuInstance.Destroy after a lying CI create", g.Destroy())
}

// TestComputeInstanceProfileRefusals: nvml.h answers ERROR_NOT_SUPPORTED
// for a CI profile the GI does not offer ("If profileId isn't supported")
// and ERROR_INVALID_ARGUMENT for an invalid one, on creating, listing and
// counting alike; a 4g GI offers no 3-slice CI.
func TestComputeInstanceProfileRefusals(t *testing.T) {
	s := newTestSim(t, Config{Spec: "1x" + a100})
	d := migOn(t, s, 0)
	g := mustGI(t, d, nvml.GPU_INSTANCE_PROFILE_4_SLICE, 0)
	for _, tc := range []struct {
		id   uint32
		want nvml.Return
	}{
		{nvml.COMPUTE_INSTANCE_PROFILE_3_SLICE, nvml.ERROR_NOT_SUPPORTED},
		{nvml.COMPUTE_INSTANCE_PROFILE_7_SLICE, nvml.ERROR_NOT_SUPPORTED},
		{nvml.COMPUTE_INSTANCE_PROFILE_COUNT, nvml.ERROR_INVALID_ARGUMENT},
	} {
		info := nvml.ComputeInstanceProfileInfo{Id: tc.id, SliceCount: 3, InstanceCount: 1}
		_, ret := g.CreateComputeInstance(&info)
		wantRet(t, fmt.Sprintf("CreateComputeInstance(CI profile %d)", tc.id), ret, tc.want)
		_, ret = g.GetComputeInstances(&info)
		wantRet(t, fmt.Sprintf("GetComputeInstances(CI profile %d)", tc.id), ret, tc.want)
		_, ret = g.GetComputeInstanceRemainingCapacity(&info)
		wantRet(t, fmt.Sprintf("GetComputeInstanceRemainingCapacity(CI profile %d)", tc.id), ret, tc.want)
	}
	if cis := s.Snapshot().GPUs[0].GPUInstances[0].ComputeInstances; len(cis) != 0 {
		t.Errorf("refused creates left CIs %+v", cis)
	}
}

// TestComputeInstanceMayNotCoverASmallerOne: a CI placement that would
// contain a smaller CI's slices is not free. With a 1c.7g at compute slice
// 6, the 3c.7g placement at 4 (slices 4-6) is taken, so a 3c.7g goes to 0
// and a second one does not fit.
func TestComputeInstanceMayNotCoverASmallerOne(t *testing.T) {
	s := newTestSim(t, Config{Spec: "1x" + a100})
	d := migOn(t, s, 0)
	g := mustGI(t, d, nvml.GPU_INSTANCE_PROFILE_7_SLICE, 0)
	p := &ciPlacer{t: t, g: g}
	ci, create := p.profile, p.create
	c1, c3 := ci(nvml.COMPUTE_INSTANCE_PROFILE_1_SLICE), ci(nvml.COMPUTE_INSTANCE_PROFILE_3_SLICE)
	create(c1, nvml.SUCCESS)
	if n, ret := g.GetComputeInstanceRemainingCapacity(&c3); ret != nvml.SUCCESS || n != 1 {
		t.Errorf("remaining 3c.7g beside a 1c.7g at 6 = %d, %v; want 1", n, ret)
	}
	create(c3, nvml.SUCCESS)
	create(c3, nvml.ERROR_INSUFFICIENT_RESOURCES)
	if got, want := fmt.Sprint(p.placed), "[6:1 0:3]"; got != want {
		t.Errorf("CI placements %s, want %s", got, want)
	}
}

// TestStartProcessMemoryBound: a process may use all of a device's free
// memory and not a MiB more (ERROR_MEMORY).
func TestStartProcessMemoryBound(t *testing.T) {
	s := newTestSim(t, Config{Spec: "1x" + a100})
	g := s.Snapshot().GPUs[0]
	if _, err := s.StartProcess(g.UUID, g.MemoryMiB+1); !errors.Is(err, nvml.ERROR_MEMORY) {
		t.Errorf("StartProcess(%d MiB) on a %d MiB GPU: %v, want ERROR_MEMORY", g.MemoryMiB+1, g.MemoryMiB, err)
	}
	if _, err := s.StartProcess(g.UUID, g.MemoryMiB); err != nil {
		t.Errorf("StartProcess(all %d MiB): %v", g.MemoryMiB, err)
	}
	if _, err := s.StartProcess(g.UUID, 1); !errors.Is(err, nvml.ERROR_MEMORY) {
		t.Errorf("StartProcess(1 MiB) on a full GPU: %v, want ERROR_MEMORY", err)
	}
}

// TestLyingResetGPU: a lying ResetGPU reports success and changes nothing:
// the pending mode stays pending, the GPU instances stay.
func TestLyingResetGPU(t *testing.T) {
	s := newTestSim(t, Config{Spec: "1x" + a100, NoGPUReset: true})
	d := handle(t, s, 0)
	if diff := cmp.Diff(modeStep{nvml.ERROR_RESET_REQUIRED, nvml.SUCCESS, 0, 1}, setMode(t, d, nvml.DEVICE_MIG_ENABLE)); diff != "" {
		t.Fatalf("SetMigMode(ENABLE) without GPU reset (-want +got):\n%s", diff)
	}
	if err := s.InjectFault(Fault{Op: "ResetGPU", Nth: 1, Lie: true}); err != nil {
		t.Fatal(err)
	}
	if err := s.ResetGPU(0); err != nil {
		t.Fatalf("lying ResetGPU: %v", err)
	}
	if cur, pend, _ := d.GetMigMode(); cur != 0 || pend != 1 {
		t.Errorf("mode %d/%d after a lying reset, want 0/1", cur, pend)
	}
	if err := s.ResetGPU(0); err != nil {
		t.Fatalf("ResetGPU: %v", err)
	}
	mustGI(t, d, nvml.GPU_INSTANCE_PROFILE_3_SLICE, 0)
	if err := s.InjectFault(Fault{Op: "ResetGPU", Nth: 1, Lie: true}); err != nil {
		t.Fatal(err)
	}
	if err := s.ResetGPU(0); err != nil {
		t.Fatalf("lying ResetGPU: %v", err)
	}
	if got := layout(s, 0); got == "" {
		t.Errorf("a lying ResetGPU destroyed the GPU instances")
	}
}

// TestClientOfAnotherGPUHoldsNothingHere: a client holds only its own GPU:
// with a client on GPU 1, GPU 0's MIG mode changes at once and it resets.
func TestClientOfAnotherGPUHoldsNothingHere(t *testing.T) {
	s := newTestSim(t, Config{Spec: "2x" + a100})
	if _, err := s.OpenClient(s.Snapshot().GPUs[1].UUID); err != nil {
		t.Fatal(err)
	}
	d := handle(t, s, 0)
	if diff := cmp.Diff(modeStep{nvml.SUCCESS, nvml.SUCCESS, 1, 1}, setMode(t, d, nvml.DEVICE_MIG_ENABLE)); diff != "" {
		t.Errorf("GPU 0 SetMigMode(ENABLE) with a client on GPU 1 (-want +got):\n%s", diff)
	}
	if err := s.ResetGPU(0); err != nil {
		t.Errorf("ResetGPU(0) with a client on GPU 1: %v", err)
	}
	if err := s.ResetGPU(1); !errors.Is(err, nvml.ERROR_IN_USE) {
		t.Errorf("ResetGPU(1) with its client: %v, want ERROR_IN_USE", err)
	}
}

// TestFirstInjectedFaultWins: when two faults trigger on the same call,
// the one injected first gives the code; both are used up.
func TestFirstInjectedFaultWins(t *testing.T) {
	s := newTestSim(t, Config{Spec: "1x" + a100})
	d := handle(t, s, 0)
	for _, f := range []Fault{
		{Op: "GetMigMode", Nth: 2, Return: nvml.ERROR_UNKNOWN},
		{Op: "GetMigMode", Nth: 2, Return: nvml.ERROR_GPU_IS_LOST},
	} {
		if err := s.InjectFault(f); err != nil {
			t.Fatal(err)
		}
	}
	var got []nvml.Return
	for range 3 {
		_, _, ret := d.GetMigMode()
		got = append(got, ret)
	}
	if diff := cmp.Diff([]nvml.Return{nvml.SUCCESS, nvml.ERROR_UNKNOWN, nvml.SUCCESS}, got); diff != "" {
		t.Errorf("GetMigMode with two faults on its second call (-want +got):\n%s", diff)
	}
}

// editStateFile decodes the state file at path, lets edit change it and
// writes it back.
func editStateFile(t *testing.T, path string, edit func(map[string]any)) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var st map[string]any
	if err := json.Unmarshal(data, &st); err != nil {
		t.Fatal(err)
	}
	edit(st)
	if data, err = json.Marshal(st); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestCIWithoutRecordedSlicesIsFullSize: a state file written before CIs
// recorded their compute slices holds CIs without start and size; such a
// CI is full-size: GetInfo gives all the GI's slices and no other CI fits
// beside it.
func TestCIWithoutRecordedSlicesIsFullSize(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.json")
	a := newTestSim(t, Config{Spec: "1x" + a100, StatePath: path})
	mustMIG(t, migOn(t, a, 0), nvml.GPU_INSTANCE_PROFILE_7_SLICE, 0)
	editStateFile(t, path, func(st map[string]any) {
		ci := st["gpus"].([]any)[0].(map[string]any)["gpuInstances"].([]any)[0].(map[string]any)["computeInstances"].([]any)[0].(map[string]any)
		delete(ci, "start")
		delete(ci, "size")
	})
	b, err := OpenState(path)
	if err != nil {
		t.Fatal(err)
	}
	initSim(t, b)
	g, ret := handle(t, b, 0).GetGpuInstanceById(0)
	must(t, "GetGpuInstanceById(0)", ret)
	ci, ret := g.GetComputeInstanceById(0)
	must(t, "GetComputeInstanceById(0)", ret)
	in, ret := ci.GetInfo()
	must(t, "ComputeInstance.GetInfo", ret)
	if diff := cmp.Diff(nvml.ComputeInstancePlacement{Start: 0, Size: 7}, in.Placement); diff != "" {
		t.Errorf("placement of a CI without recorded slices (-want +got):\n%s", diff)
	}
	info, ret := g.GetComputeInstanceProfileInfo(nvml.COMPUTE_INSTANCE_PROFILE_1_SLICE, nvml.COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED)
	must(t, "CI profile 1c.7g", ret)
	if n, ret := g.GetComputeInstanceRemainingCapacity(&info); ret != nvml.SUCCESS || n != 0 {
		t.Errorf("remaining 1c.7g beside a full-size CI = %d, %v; want 0", n, ret)
	}
	_, ret = g.CreateComputeInstance(&info)
	wantRet(t, "CreateComputeInstance(1c.7g) beside a full-size CI", ret, nvml.ERROR_INSUFFICIENT_RESOURCES)
}

// TestOpenStateRefusesGPUWithoutModel: a state file whose GPU names a
// model it holds no entry for is refused, not simulated without one.
func TestOpenStateRefusesGPUWithoutModel(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.json")
	newTestSim(t, Config{Spec: "1x" + a100, StatePath: path})
	editStateFile(t, path, func(st map[string]any) { st["models"] = map[string]any{} })
	if _, err := OpenState(path); err == nil || !strings.Contains(err.Error(), "without a models entry") {
		t.Errorf("OpenState of a GPU without its model: %v, want an error", err)
	}
}

// TestComputeInstanceDestroyTakesOnlyItself: destroying CI 1 of a GI
// leaves its CI 0.
func TestComputeInstanceDestroyTakesOnlyItself(t *testing.T) {
	_, _, g, _, first, second := twoOneSliceCIs(t)
	must(t, "ComputeInstance.Destroy(CI 1)", second.Destroy())
	_, ret := first.GetInfo()
	wantRet(t, "GetInfo of CI 0 after CI 1's destroy", ret, nvml.SUCCESS)
	_, ret = g.GetComputeInstanceById(1)
	wantRet(t, "GetComputeInstanceById(1) after its destroy", ret, nvml.ERROR_NOT_FOUND)
}

// TestComputeInstanceHeldOnlyByItsOwnProcesses: nvml.h,
// nvmlComputeInstanceDestroy: ERROR_IN_USE "if processes (e.g. CUDA
// application) are active on the compute instance" — on it, not on a
// sibling CI of its GI, nor on a CI with the same ID in another GI.
func TestComputeInstanceHeldOnlyByItsOwnProcesses(t *testing.T) {
	s, d, g, info := oneSliceCIsOf(t, nvml.GPU_INSTANCE_PROFILE_3_SLICE)
	busy, ret := g.CreateComputeInstance(&info)
	must(t, "CreateComputeInstance", ret)
	sibling, ret := g.CreateComputeInstance(&info)
	must(t, "CreateComputeInstance", ret)
	_, other := mustMIG(t, d, nvml.GPU_INSTANCE_PROFILE_3_SLICE, 4) // CI 0 of another GI
	if _, err := s.StartProcess(migUUIDOf(t, s, 0, busy), 100); err != nil {
		t.Fatal(err)
	}
	wantRet(t, "Destroy of the CI with a process", busy.Destroy(), nvml.ERROR_IN_USE)
	wantRet(t, "Destroy of its sibling CI", sibling.Destroy(), nvml.SUCCESS)
	wantRet(t, "Destroy of CI 0 of another GI", other.Destroy(), nvml.SUCCESS)
}

// TestMIGDeviceOrderAfterCIIDReuse: MIG devices are ordered by GI ID, then
// CI ID, also when a CI that took a freed smaller ID was created last.
func TestMIGDeviceOrderAfterCIIDReuse(t *testing.T) {
	_, d, g, info, first, _ := twoOneSliceCIs(t)
	must(t, "ComputeInstance.Destroy(CI 0)", first.Destroy())
	_, ret := g.CreateComputeInstance(&info)
	must(t, "CreateComputeInstance", ret)
	var got []int
	for _, md := range migDeviceHandles(t, d) {
		id, ret := md.GetComputeInstanceId()
		must(t, "GetComputeInstanceId", ret)
		got = append(got, id)
	}
	if diff := cmp.Diff([]int{0, 1}, got); diff != "" {
		t.Errorf("CI IDs of MIG devices 0, 1 (-want +got):\n%s", diff)
	}
}

// TestOpenStateRefusesOtherVersion: a state file of another format version
// is refused.
func TestOpenStateRefusesOtherVersion(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.json")
	newTestSim(t, Config{Spec: "1x" + a100, StatePath: path})
	editStateFile(t, path, func(st map[string]any) { st["version"] = stateVersion + 1 })
	if _, err := OpenState(path); err == nil || !strings.Contains(err.Error(), "version") {
		t.Errorf("OpenState of a version %d file: %v, want an error", stateVersion+1, err)
	}
}

// TestComputeInstancesOrderedByID: State and
// GpuInstance.GetComputeInstances give compute instances ordered by CI ID,
// a CI that takes a smaller ID a destroyed one freed included.
func TestComputeInstancesOrderedByID(t *testing.T) {
	s, _, g, info, first, _ := twoOneSliceCIs(t)
	must(t, "ComputeInstance.Destroy(CI 0)", first.Destroy())
	_, ret := g.CreateComputeInstance(&info)
	must(t, "CreateComputeInstance", ret)

	cis, ret := g.GetComputeInstances(&info)
	must(t, "GetComputeInstances", ret)
	var listed []uint32
	for _, ci := range cis {
		in, ret := ci.GetInfo()
		must(t, "ComputeInstance.GetInfo", ret)
		listed = append(listed, in.Id)
	}
	if diff := cmp.Diff([]uint32{0, 1}, listed); diff != "" {
		t.Errorf("GetComputeInstances CI IDs (-want +got):\n%s", diff)
	}
	var snap []int
	for _, c := range s.Snapshot().GPUs[0].GPUInstances[0].ComputeInstances {
		snap = append(snap, c.ID)
	}
	if diff := cmp.Diff([]int{0, 1}, snap); diff != "" {
		t.Errorf("Snapshot CI IDs (-want +got):\n%s", diff)
	}
}

// oneSliceCIsOf is a simulated A100 (its device d) with MIG mode on and
// one GPU instance of NVML profile giProfile at 0, and that instance's
// 1-slice compute instance profile (1c.7g for a 7g instance).
func oneSliceCIsOf(t *testing.T, giProfile int) (*Sim, nvml.Device, nvml.GpuInstance, nvml.ComputeInstanceProfileInfo) {
	t.Helper()
	s := newTestSim(t, Config{Spec: "1x" + a100})
	d := migOn(t, s, 0)
	g := mustGI(t, d, giProfile, 0)
	info, ret := g.GetComputeInstanceProfileInfo(nvml.COMPUTE_INSTANCE_PROFILE_1_SLICE, nvml.COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED)
	must(t, fmt.Sprintf("1-slice CI profile of GI profile %d", giProfile), ret)
	return s, d, g, info
}

// twoOneSliceCIs is oneSliceCIsOf a 7g GPU instance with two 1-slice
// compute instances made on it, first (CI 0) and second (CI 1).
func twoOneSliceCIs(t *testing.T) (s *Sim, d nvml.Device, g nvml.GpuInstance, info nvml.ComputeInstanceProfileInfo, first, second nvml.ComputeInstance) {
	t.Helper()
	s, d, g, info = oneSliceCIsOf(t, nvml.GPU_INSTANCE_PROFILE_7_SLICE)
	var ret nvml.Return
	first, ret = g.CreateComputeInstance(&info)
	must(t, "CreateComputeInstance", ret)
	second, ret = g.CreateComputeInstance(&info)
	must(t, "CreateComputeInstance", ret)
	return s, d, g, info, first, second
}

// TestMIGDeviceHandleReused: nvml.h, nvmlDeviceGetMigDeviceHandleByIndex:
// "Handles may be reused and their properties can change in the process".
// Once the process asks for the handle of an index again (or of a MIG
// device's UUID), every handle of that index reaches the MIG device now
// there, another one where MIG devices came and went; a handle is stale
// only until then.
func TestMIGDeviceHandleReused(t *testing.T) {
	for name, again := range map[string]func(d nvml.Device, s *Sim, uuid string) (nvml.Device, nvml.Return){
		"by index": func(d nvml.Device, _ *Sim, _ string) (nvml.Device, nvml.Return) {
			return d.GetMigDeviceHandleByIndex(0)
		},
		"by UUID": func(_ nvml.Device, s *Sim, uuid string) (nvml.Device, nvml.Return) {
			return s.DeviceGetHandleByUUID(uuid)
		},
	} {
		t.Run(name, func(t *testing.T) {
			s := newTestSim(t, Config{Spec: "1x" + a100})
			d := migOn(t, s, 0)
			_, ci := mustMIG(t, d, nvml.GPU_INSTANCE_PROFILE_1_SLICE, 0)
			old, ret := d.GetMigDeviceHandleByIndex(0)
			must(t, "GetMigDeviceHandleByIndex(0)", ret)
			oldUUID, ret := old.GetUUID()
			must(t, "GetUUID", ret)
			must(t, "ComputeInstance.Destroy", ci.Destroy())
			// Another GI takes MIG device index 0 (the first GI, left
			// without a CI, is no MIG device).
			two, _ := mustMIG(t, d, nvml.GPU_INSTANCE_PROFILE_2_SLICE, 2)
			_, ret = old.GetUUID()
			wantRet(t, "GetUUID before the handle of index 0 is asked for again", ret, nvml.ERROR_INVALID_ARGUMENT)

			cur, ret := d.GetMigDeviceHandleByIndex(0)
			must(t, "GetMigDeviceHandleByIndex(0) again", ret)
			newUUID, ret := cur.GetUUID()
			must(t, "GetUUID of the new handle", ret)
			if newUUID == oldUUID {
				t.Fatalf("MIG device 0 kept UUID %s across a destroy and a create", oldUUID)
			}
			h, ret := again(d, s, newUUID)
			must(t, "asking for the handle again", ret)
			if h != old {
				t.Errorf("the handle asked for again is not the slot's handle")
			}
			uuid, ret := old.GetUUID()
			must(t, "GetUUID through the old handle", ret)
			if uuid != newUUID {
				t.Errorf("old handle reaches %s, want the MIG device now at its index, %s", uuid, newUUID)
			}
			gi, ret := old.GetGpuInstanceId()
			must(t, "GetGpuInstanceId through the old handle", ret)
			info, ret := two.GetInfo()
			must(t, "GpuInstance.GetInfo", ret)
			if gi != int(info.Id) {
				t.Errorf("old handle reaches GI %d, want the 2-slice GI %d", gi, info.Id)
			}
		})
	}
}
