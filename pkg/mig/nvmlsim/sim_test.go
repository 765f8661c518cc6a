package nvmlsim

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/google/go-cmp/cmp"

	"github.com/miglayout/miglayout/pkg/mig"
)

func TestParseSpec(t *testing.T) {
	c := testCatalog(t)
	tests := []struct {
		spec    string
		want    []string
		wantErr string
		unknown bool
	}{
		{spec: "4xA100-PCIE-80GB", want: []string{"A100-PCIE-80GB", "A100-PCIE-80GB", "A100-PCIE-80GB", "A100-PCIE-80GB"}},
		{spec: "2xH100-SXM5-80GB, 1xA30-24GB", want: []string{"H100-SXM5-80GB", "H100-SXM5-80GB", "A30-24GB"}},
		{spec: "A30", want: []string{"A30-24GB"}},
		{spec: "2 x a30", want: []string{"A30-24GB", "A30-24GB"}},
		{spec: "1xNVIDIA H100 80GB HBM3", want: []string{"H100-SXM5-80GB"}},
		{spec: "", wantErr: `parsing spec "": spec is empty`},
		{spec: "2xA30,", wantErr: `parsing spec "2xA30,": part 2 "": empty part`},
		{spec: "0xA30", wantErr: `part 1 "0xA30": count 0 is not in 1..64`},
		{spec: "65xA30", wantErr: `part 1 "65xA30": count 65 is not in 1..64`},
		{spec: "1xA30,3xT4", wantErr: `part 2 "3xT4": unknown GPU model "T4"`, unknown: true},
		{spec: "40xA30,40xA30", wantErr: `part 2 "40xA30": spec holds more than 64 GPUs`},
	}
	for _, tt := range tests {
		t.Run(tt.spec, func(t *testing.T) {
			models, err := ParseSpec(tt.spec, c)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ParseSpec(%q) error = %v, want one containing %q", tt.spec, err, tt.wantErr)
				}
				if got := errors.Is(err, mig.ErrUnknownModel); got != tt.unknown {
					t.Errorf("errors.Is(err, ErrUnknownModel) = %v, want %v", got, tt.unknown)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseSpec(%q): %v", tt.spec, err)
			}
			var got []string
			for _, m := range models {
				got = append(got, m.Name)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("ParseSpec(%q) models (-want +got):\n%s", tt.spec, diff)
			}
		})
	}
}

func TestCanonicalSpec(t *testing.T) {
	s := newTestSim(t, Config{Spec: "A30, 1xA30-24GB,H100-SXM5,A30"})
	if got, want := s.Snapshot().Spec, "2xA30-24GB,1xH100-SXM5-80GB,1xA30-24GB"; got != want {
		t.Errorf("Spec = %q, want %q", got, want)
	}
}

func TestNewWithDefaultCatalog(t *testing.T) {
	s, err := New(Config{Spec: "1xA30-24GB"})
	if err != nil {
		t.Fatalf("New with the default catalog: %v", err)
	}
	if got := s.Snapshot().GPUs[0].Model; got != "A30-24GB" {
		t.Errorf("model = %q, want A30-24GB", got)
	}
}

func TestInitShutdown(t *testing.T) {
	s, err := New(Config{Spec: "1xA30", Catalog: testCatalog(t)})
	if err != nil {
		t.Fatal(err)
	}
	_, ret := s.DeviceGetCount()
	wantRet(t, "DeviceGetCount before Init", ret, nvml.ERROR_UNINITIALIZED)
	_, ret = s.DeviceGetHandleByIndex(0)
	wantRet(t, "DeviceGetHandleByIndex before Init", ret, nvml.ERROR_UNINITIALIZED)
	_, ret = s.SystemGetDriverVersion()
	wantRet(t, "SystemGetDriverVersion before Init", ret, nvml.ERROR_UNINITIALIZED)
	wantRet(t, "Shutdown before Init", s.Shutdown(), nvml.ERROR_UNINITIALIZED)
	if got := s.ErrorString(nvml.ERROR_IN_USE); got != "ERROR_IN_USE" {
		t.Errorf("ErrorString(IN_USE) = %q", got)
	}

	must(t, "Init", s.Init())
	must(t, "InitWithFlags", s.InitWithFlags(0))
	d := handle(t, s, 0)
	must(t, "Shutdown 1", s.Shutdown())
	if n, ret := s.DeviceGetCount(); ret != nvml.SUCCESS || n != 1 {
		t.Errorf("DeviceGetCount after one of two Shutdowns = %d, %v; want 1, SUCCESS", n, ret)
	}
	must(t, "Shutdown 2", s.Shutdown())
	_, ret = s.DeviceGetCount()
	wantRet(t, "DeviceGetCount after last Shutdown", ret, nvml.ERROR_UNINITIALIZED)
	_, ret = d.GetName()
	wantRet(t, "GetName on a handle after last Shutdown", ret, nvml.ERROR_UNINITIALIZED)
	wantRet(t, "third Shutdown", s.Shutdown(), nvml.ERROR_UNINITIALIZED)
}

type deviceFacts struct {
	Name, UUID, BusIDLegacy, BusID string
	Bus                            uint32
	TotalBytes, FreeBytes, Used    uint64
	Minor, Index, CCMajor, CCMinor int
	Arch                           nvml.DeviceArchitecture
	Brand                          nvml.BrandType
	MIGCurrent, MIGPending         int
	IsMIG                          bool
}

func cString(b []int8) string {
	var sb strings.Builder
	for _, c := range b {
		if c == 0 {
			break
		}
		sb.WriteByte(byte(c))
	}
	return sb.String()
}

func facts(t *testing.T, d nvml.Device) deviceFacts {
	t.Helper()
	var f deviceFacts
	var ret nvml.Return
	f.Name, ret = d.GetName()
	must(t, "GetName", ret)
	f.UUID, ret = d.GetUUID()
	must(t, "GetUUID", ret)
	pci, ret := d.GetPciInfo()
	must(t, "GetPciInfo", ret)
	f.BusIDLegacy, f.BusID, f.Bus = cString(pci.BusIdLegacy[:]), cString(pci.BusId[:]), pci.Bus
	mem, ret := d.GetMemoryInfo()
	must(t, "GetMemoryInfo", ret)
	f.TotalBytes, f.FreeBytes, f.Used = mem.Total, mem.Free, mem.Used
	f.Minor, ret = d.GetMinorNumber()
	must(t, "GetMinorNumber", ret)
	f.Index, ret = d.GetIndex()
	must(t, "GetIndex", ret)
	f.CCMajor, f.CCMinor, ret = d.GetCudaComputeCapability()
	must(t, "GetCudaComputeCapability", ret)
	f.Arch, ret = d.GetArchitecture()
	must(t, "GetArchitecture", ret)
	f.Brand, ret = d.GetBrand()
	must(t, "GetBrand", ret)
	f.MIGCurrent, f.MIGPending, ret = d.GetMigMode()
	must(t, "GetMigMode", ret)
	f.IsMIG, ret = d.IsMigDeviceHandle()
	must(t, "IsMigDeviceHandle", ret)
	return f
}

func TestDeviceQueries(t *testing.T) {
	c := testCatalog(t)
	const spec = "2xA100-PCIE-80GB,1xH100-SXM5-80GB"
	s := newTestSim(t, Config{Spec: spec})
	a100, h100 := model(t, c, "A100-PCIE-80GB"), model(t, c, "H100-SXM5-80GB")

	n, ret := s.DeviceGetCount()
	must(t, "DeviceGetCount", ret)
	if n != 3 {
		t.Fatalf("DeviceGetCount = %d, want 3", n)
	}
	for _, i := range []int{-1, 3} {
		_, ret := s.DeviceGetHandleByIndex(i)
		wantRet(t, "DeviceGetHandleByIndex out of range", ret, nvml.ERROR_INVALID_ARGUMENT)
	}

	var got []deviceFacts
	for i := range n {
		f := facts(t, handle(t, s, i))
		got = append(got, f)
	}
	uuidRE := regexp.MustCompile(`^GPU-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)
	for i, f := range got {
		if !uuidRE.MatchString(f.UUID) {
			t.Errorf("GPU %d UUID %q does not look like GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx", i, f.UUID)
		}
		got[i].UUID = "" // checked apart
	}
	want := []deviceFacts{
		{Name: a100.ProductName, BusIDLegacy: "0000:07:00.0", BusID: "00000000:07:00.0", Bus: 0x07,
			TotalBytes: uint64(a100.MemoryMiB) << 20, FreeBytes: uint64(a100.MemoryMiB) << 20,
			Minor: 0, Index: 0, CCMajor: 8, CCMinor: 0, Arch: nvml.DEVICE_ARCH_AMPERE, Brand: nvml.BRAND_NVIDIA},
		{Name: a100.ProductName, BusIDLegacy: "0000:0F:00.0", BusID: "00000000:0F:00.0", Bus: 0x0F,
			TotalBytes: uint64(a100.MemoryMiB) << 20, FreeBytes: uint64(a100.MemoryMiB) << 20,
			Minor: 1, Index: 1, CCMajor: 8, CCMinor: 0, Arch: nvml.DEVICE_ARCH_AMPERE, Brand: nvml.BRAND_NVIDIA},
		{Name: h100.ProductName, BusIDLegacy: "0000:47:00.0", BusID: "00000000:47:00.0", Bus: 0x47,
			TotalBytes: uint64(h100.MemoryMiB) << 20, FreeBytes: uint64(h100.MemoryMiB) << 20,
			Minor: 2, Index: 2, CCMajor: 9, CCMinor: 0, Arch: nvml.DEVICE_ARCH_HOPPER, Brand: nvml.BRAND_NVIDIA},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("device facts (-want +got):\n%s", diff)
	}
	if want := "NVIDIA A100 80GB PCIe"; a100.ProductName != want {
		t.Errorf("A100-PCIE-80GB product name %q, want %q", a100.ProductName, want)
	}

	// UUIDs: distinct per GPU, deterministic per spec and seed, found by
	// DeviceGetHandleByUUID.
	snap := s.Snapshot()
	uuids := map[string]bool{}
	for i, g := range snap.GPUs {
		uuids[g.UUID] = true
		d, ret := s.DeviceGetHandleByUUID(g.UUID)
		must(t, "DeviceGetHandleByUUID", ret)
		if d != handle(t, s, i) {
			t.Errorf("DeviceGetHandleByUUID(%s) is not the handle of GPU %d", g.UUID, i)
		}
	}
	if len(uuids) != 3 {
		t.Errorf("GPU UUIDs not distinct: %v", uuids)
	}
	again := newTestSim(t, Config{Spec: spec})
	if diff := cmp.Diff(snap.GPUs, again.Snapshot().GPUs); diff != "" {
		t.Errorf("a second simulator of the same spec differs (-first +second):\n%s", diff)
	}
	seeded := newTestSim(t, Config{Spec: spec, Seed: "node-b"})
	if seeded.Snapshot().GPUs[0].UUID == snap.GPUs[0].UUID {
		t.Errorf("a different Seed gave the same GPU UUID %s", snap.GPUs[0].UUID)
	}
	_, ret = s.DeviceGetHandleByUUID("GPU-00000000-0000-0000-0000-000000000000")
	wantRet(t, "DeviceGetHandleByUUID(unknown)", ret, nvml.ERROR_NOT_FOUND)
	_, ret = s.DeviceGetHandleByUUID("")
	wantRet(t, "DeviceGetHandleByUUID(\"\")", ret, nvml.ERROR_INVALID_ARGUMENT)

	// System queries.
	if v, ret := s.SystemGetDriverVersion(); ret != nvml.SUCCESS || v != "580.95.05" {
		t.Errorf("SystemGetDriverVersion = %q, %v", v, ret)
	}
	if v, ret := s.SystemGetCudaDriverVersion(); ret != nvml.SUCCESS || v != 13000 {
		t.Errorf("SystemGetCudaDriverVersion = %d, %v", v, ret)
	}
	if v, ret := s.SystemGetCudaDriverVersion_v2(); ret != nvml.SUCCESS || v != 13000 {
		t.Errorf("SystemGetCudaDriverVersion_v2 = %d, %v", v, ret)
	}

	// Interface forms reach the same answers; nil handles are refused.
	d0 := handle(t, s, 0)
	if name, ret := s.DeviceGetName(d0); ret != nvml.SUCCESS || name != a100.ProductName {
		t.Errorf("DeviceGetName = %q, %v", name, ret)
	}
	_, ret = s.DeviceGetName(nil)
	wantRet(t, "DeviceGetName(nil)", ret, nvml.ERROR_INVALID_ARGUMENT)
	_, _, ret = s.DeviceGetMigMode(d0)
	must(t, "DeviceGetMigMode", ret)
	// GPU-handle-only queries on the whole GPU.
	_, ret = d0.GetGpuInstanceId()
	wantRet(t, "GetGpuInstanceId on a GPU", ret, nvml.ERROR_INVALID_ARGUMENT)
	_, ret = d0.GetComputeInstanceId()
	wantRet(t, "GetComputeInstanceId on a GPU", ret, nvml.ERROR_INVALID_ARGUMENT)
	_, ret = d0.GetDeviceHandleFromMigDeviceHandle()
	wantRet(t, "GetDeviceHandleFromMigDeviceHandle on a GPU", ret, nvml.ERROR_INVALID_ARGUMENT)
}

func TestUnimplementedMethodPanics(t *testing.T) {
	s := newTestSim(t, Config{Spec: "1xA30"})
	d := handle(t, s, 0)
	defer func() {
		r := recover()
		if r == nil || !strings.Contains(fmtATS(r), "GetSerial") {
			t.Errorf("GetSerial: recovered %v, want a panic naming GetSerial", r)
		}
	}()
	d.GetSerial()
}

func fmtATS(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	if e, ok := v.(error); ok {
		return e.Error()
	}
	return ""
}

func TestSharedStateFile(t *testing.T) {
	c := testCatalog(t)
	path := filepath.Join(t.TempDir(), "state.json")
	const spec = "1xA100-PCIE-80GB"
	a := newTestSim(t, Config{Spec: spec, StatePath: path})
	b := newTestSim(t, Config{Spec: spec, StatePath: path}) // loads the file a created
	kubelet, err := OpenState(path)
	if err != nil {
		t.Fatalf("OpenState: %v", err)
	}
	initSim(t, kubelet)

	// a changes the hardware; b sees it.
	da := migOn(t, a, 0)
	_, ciA := mustMIG(t, da, nvml.GPU_INSTANCE_PROFILE_3_SLICE, 4)
	db := handle(t, b, 0)
	if cur, pend, ret := db.GetMigMode(); ret != nvml.SUCCESS || cur != 1 || pend != 1 {
		t.Errorf("b: GetMigMode = %d, %d, %v; want 1, 1, SUCCESS", cur, pend, ret)
	}
	info, ret := db.GetGpuInstanceProfileInfo(nvml.GPU_INSTANCE_PROFILE_3_SLICE)
	must(t, "b: GetGpuInstanceProfileInfo", ret)
	gis, ret := db.GetGpuInstances(&info)
	must(t, "b: GetGpuInstances", ret)
	if len(gis) != 1 {
		t.Fatalf("b sees %d 3g GIs, want 1", len(gis))
	}

	// The stand-in kubelet starts a process on the MIG device; a cannot
	// destroy it.
	uuid := migUUIDOf(t, a, 0, ciA)
	pid, err := kubelet.StartProcess(uuid, 1024)
	if err != nil {
		t.Fatalf("kubelet: StartProcess: %v", err)
	}
	wantRet(t, "a: ComputeInstance.Destroy with the kubelet's process", ciA.Destroy(), nvml.ERROR_IN_USE)
	mdev, ret := db.GetMigDeviceHandleByIndex(0)
	must(t, "b: GetMigDeviceHandleByIndex", ret)
	procs, ret := mdev.GetComputeRunningProcesses()
	must(t, "b: GetComputeRunningProcesses", ret)
	if len(procs) != 1 || procs[0].Pid != pid {
		t.Errorf("b sees processes %+v, want PID %d", procs, pid)
	}

	// The kubelet stops it; b destroys CI and GI; a's handles go stale.
	if err := kubelet.StopProcess(pid); err != nil {
		t.Fatal(err)
	}
	cis, ret := gis[0].GetComputeInstances(ptr(fullCI(t, gis[0])))
	must(t, "b: GetComputeInstances", ret)
	must(t, "b: ComputeInstance.Destroy", cis[0].Destroy())
	must(t, "b: GpuInstance.Destroy", gis[0].Destroy())
	wantRet(t, "a: Destroy of a CI b destroyed", ciA.Destroy(), nvml.ERROR_INVALID_ARGUMENT)
	if l := layout(a, 0); l != "" {
		t.Errorf("a sees layout %q, want empty", l)
	}

	// A spec that does not match the file is refused.
	if _, err := New(Config{Spec: "1xA30", StatePath: path, Catalog: c}); err == nil || !strings.Contains(err.Error(), "holds GPUs [A100-PCIE-80GB]") {
		t.Errorf("New with a mismatched spec: error %v, want one naming the file's GPUs", err)
	}
	if _, err := OpenState(filepath.Join(t.TempDir(), "missing.json")); err == nil {
		t.Errorf("OpenState of a missing file succeeded")
	}
}

func ptr[T any](v T) *T { return &v }

func TestStateSurvivesReopen(t *testing.T) {
	c := testCatalog(t)
	path := filepath.Join(t.TempDir(), "state.json")
	const spec = "1xA100-PCIE-80GB,1xH100-SXM5-80GB"
	a := newTestSim(t, Config{Spec: spec, StatePath: path, Seed: "node-a"})
	d := migOn(t, a, 0)
	_, ci := mustMIG(t, d, nvml.GPU_INSTANCE_PROFILE_2_SLICE, 2)
	mustGI(t, d, nvml.GPU_INSTANCE_PROFILE_1_SLICE, 6)
	if _, err := a.StartProcess(migUUIDOf(t, a, 0, ci), 100); err != nil {
		t.Fatal(err)
	}
	if err := a.InjectFault(Fault{Op: "GpuInstance.Destroy", Nth: 3, Return: nvml.ERROR_UNKNOWN}); err != nil {
		t.Fatal(err)
	}
	want := a.Snapshot()
	if len(want.GPUs[0].GPUInstances) != 2 || len(want.Processes) != 1 || len(want.Faults) != 1 {
		t.Fatalf("unexpected starting state %+v", want)
	}

	reopened, err := OpenState(path)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, reopened.Snapshot()); diff != "" {
		t.Errorf("OpenState snapshot (-before +after):\n%s", diff)
	}
	again, err := New(Config{Spec: spec, StatePath: path, Catalog: c, Seed: "ignored"})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, again.Snapshot()); diff != "" {
		t.Errorf("New on the existing file (-before +after):\n%s", diff)
	}
	// The reopened simulator works on the same hardware with the same IDs.
	initSim(t, again)
	d2 := handle(t, again, 0)
	gi, ret := d2.GetGpuInstanceById(13)
	must(t, "GetGpuInstanceById(13) after reopen", ret)
	gInfo, ret := gi.GetInfo()
	must(t, "GpuInstance.GetInfo after reopen", ret)
	if gInfo.Placement.Start != 6 {
		t.Errorf("GI 13 at %d after reopen, want 6", gInfo.Placement.Start)
	}
	// A snapshot is JSON-serialisable and round-trips.
	data, err := json.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	var back State
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, back); diff != "" {
		t.Errorf("State JSON round trip (-want +got):\n%s", diff)
	}
	// A corrupt file is refused.
	if err := os.WriteFile(path, []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenState(path); err == nil || !strings.Contains(err.Error(), "decoding state") {
		t.Errorf("OpenState of a corrupt file: %v", err)
	}
}

// TestConcurrentCreates runs goroutines in two simulators (standing for two
// processes) that race to fill one GPU with 1g GIs; the flock must let
// exactly seven succeed, on distinct placements and IDs.
func TestConcurrentCreates(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.json")
	const spec = "1xA100-PCIE-80GB"
	sims := []*Sim{newTestSim(t, Config{Spec: spec, StatePath: path}), newTestSim(t, Config{Spec: spec, StatePath: path})}
	migOn(t, sims[0], 0)
	var mu sync.Mutex
	created, other := 0, []nvml.Return{}
	var wg sync.WaitGroup
	for _, s := range sims {
		for range 3 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				d, _ := s.DeviceGetHandleByIndex(0)
				info, _ := d.GetGpuInstanceProfileInfo(nvml.GPU_INSTANCE_PROFILE_1_SLICE)
				for {
					_, ret := d.CreateGpuInstance(&info)
					mu.Lock()
					if ret == nvml.SUCCESS {
						created++
					} else if ret != nvml.ERROR_INSUFFICIENT_RESOURCES {
						other = append(other, ret)
					}
					mu.Unlock()
					if ret != nvml.SUCCESS {
						return
					}
				}
			}()
		}
	}
	wg.Wait()
	if created != 7 || len(other) > 0 {
		t.Errorf("created %d GIs (other returns %v), want 7", created, other)
	}
	name := nvmlProfile(t, model(t, testCatalog(t), "A100-PCIE-80GB"), nvml.GPU_INSTANCE_PROFILE_1_SLICE).Name
	want := mig.Layout{}
	for start := range 7 {
		want = append(want, mig.Device{Profile: name, Start: start})
	}
	if got := layout(sims[1], 0); got != want.String() {
		t.Errorf("layout %q, want %q", got, want)
	}
	ids := map[int]bool{}
	for _, gi := range sims[0].Snapshot().GPUs[0].GPUInstances {
		ids[gi.ID] = true
	}
	if len(ids) != 7 {
		t.Errorf("GI IDs not distinct: %v", ids)
	}
}

// TestLatency: the configured latency is waited for on every mutating
// operation (and a GPU reset), never on a read. The waits are recorded, not
// timed.
func TestLatency(t *testing.T) {
	s := newTestSim(t, Config{Spec: "1xH100-SXM5-80GB", Latency: 40 * time.Millisecond})
	var waits []time.Duration
	s.sleep = func(d time.Duration) { waits = append(waits, d) }
	d := handle(t, s, 0)
	if _, _, ret := d.GetMigMode(); ret != nvml.SUCCESS {
		t.Fatalf("GetMigMode: %v", ret)
	}
	if len(waits) != 0 {
		t.Errorf("a read waited %v", waits)
	}
	_, ret := d.SetMigMode(nvml.DEVICE_MIG_ENABLE)
	must(t, "SetMigMode", ret)
	if err := s.ResetGPU(0); err != nil {
		t.Fatal(err)
	}
	if want := []time.Duration{40 * time.Millisecond, 40 * time.Millisecond}; !slices.Equal(waits, want) {
		t.Errorf("waits %v, want %v (SetMigMode, ResetGPU)", waits, want)
	}
}
