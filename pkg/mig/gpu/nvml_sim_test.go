package gpu_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/miglayout/miglayout/pkg/mig"
	"github.com/miglayout/miglayout/pkg/mig/gpu"
	"github.com/miglayout/miglayout/pkg/mig/gpu/gputest"
	"github.com/miglayout/miglayout/pkg/mig/nvmlsim"
)

const spec = "2xA100-SXM4-80GB,1xH100-SXM5-80GB"

func newSim(t *testing.T) (*nvmlsim.Sim, *gpu.NVMLManager) {
	t.Helper()
	return gputest.Simulated(t, nvmlsim.Config{Spec: spec})
}

func model(t *testing.T, name string) *mig.Model {
	t.Helper()
	md, err := mig.DefaultCatalog().Model(name)
	if err != nil {
		t.Fatal(err)
	}
	return md
}

// enableMIG turns MIG mode on for GPU idx, resetting it where the mode stays
// pending (Ampere).
func enableMIG(t *testing.T, ctx context.Context, sim *nvmlsim.Sim, m *gpu.NVMLManager, idx int) {
	t.Helper()
	mode, err := m.SetMIGMode(ctx, idx, true)
	if err != nil {
		t.Fatal(err)
	}
	if !mode.Current {
		if err := sim.ResetGPU(idx); err != nil {
			t.Fatal(err)
		}
	}
}

// modelComparer compares catalog models by identity (they carry unexported
// lookup maps).
var modelComparer = cmp.Comparer(func(a, b *mig.Model) bool { return a == b })

func TestGPUs(t *testing.T) {
	_, m := newSim(t)
	gpus, err := m.GPUs(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	a100, h100 := model(t, "A100-SXM4-80GB"), model(t, "H100-SXM5-80GB")
	want := []gpu.GPU{
		{Index: 0, ProductName: "NVIDIA A100-SXM4-80GB", Model: a100, MemoryMiB: a100.MemoryMiB, MIGCapable: true,
			Brand: "Nvidia", Architecture: "Ampere", CUDAComputeCapability: "8.0", DriverVersion: nvmlsim.DriverVersion, CUDADriverVersion: "13.0", Minor: 0},
		{Index: 1, ProductName: "NVIDIA A100-SXM4-80GB", Model: a100, MemoryMiB: a100.MemoryMiB, MIGCapable: true,
			Brand: "Nvidia", Architecture: "Ampere", CUDAComputeCapability: "8.0", DriverVersion: nvmlsim.DriverVersion, CUDADriverVersion: "13.0", Minor: 1},
		{Index: 2, ProductName: "NVIDIA H100 80GB HBM3", Model: h100, MemoryMiB: h100.MemoryMiB, MIGCapable: true,
			Brand: "Nvidia", Architecture: "Hopper", CUDAComputeCapability: "9.0", DriverVersion: nvmlsim.DriverVersion, CUDADriverVersion: "13.0", Minor: 2},
	}
	if diff := cmp.Diff(want, gpus, modelComparer, cmpopts.IgnoreFields(gpu.GPU{}, "UUID", "PCIBusID")); diff != "" {
		t.Errorf("GPUs() mismatch (-want +got):\n%s", diff)
	}
	uuidRE := regexp.MustCompile(`^GPU-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)
	busRE := regexp.MustCompile(`^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$`)
	uuids, buses := map[string]bool{}, map[string]bool{}
	for _, g := range gpus {
		if !uuidRE.MatchString(g.UUID) {
			t.Errorf("GPU %d UUID %q is not GPU-<uuid>", g.Index, g.UUID)
		}
		if !busRE.MatchString(g.PCIBusID) {
			t.Errorf("GPU %d PCI bus ID %q is not dddd:bb:dd.f in lower case", g.Index, g.PCIBusID)
		}
		uuids[g.UUID], buses[g.PCIBusID] = true, true
	}
	if len(uuids) != 3 || len(buses) != 3 {
		t.Errorf("UUIDs %v or bus IDs %v not distinct", uuids, buses)
	}
}

func TestSetMIGMode(t *testing.T) {
	ctx := t.Context()
	sim, m := newSim(t)
	gpus, err := m.GPUs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// A process holding GPU 0 (A100) keeps its mode change pending until a
	// reset; one holding GPU 2 (H100) makes the change fail.
	pid0, err := sim.StartProcess(gpus[0].UUID, 100)
	if err != nil {
		t.Fatal(err)
	}
	pid2, err := sim.StartProcess(gpus[2].UUID, 100)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		before  func()
		idx     int
		enabled bool
		want    gpu.MIGMode
		wantErr error
	}{
		{name: "A100 held by a process: enable stays pending", idx: 0, enabled: true, want: gpu.MIGMode{Current: false, Pending: true}},
		{name: "A100 idle: enable applies at once", idx: 1, enabled: true, want: gpu.MIGMode{Current: true, Pending: true}},
		{name: "H100 held by a process: enable fails", idx: 2, enabled: true, wantErr: gpu.ErrInUse},
		{name: "H100 idle: enable applies at once", before: func() { stop(t, sim, pid2) }, idx: 2, enabled: true, want: gpu.MIGMode{Current: true, Pending: true}},
		{name: "H100 disable applies at once", idx: 2, enabled: false, want: gpu.MIGMode{}},
		{name: "no such GPU", idx: 7, enabled: true, wantErr: gpu.ErrNotFound},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.before != nil {
				tc.before()
			}
			got, err := m.SetMIGMode(ctx, tc.idx, tc.enabled)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Errorf("SetMIGMode(%d, %v) = %+v, %v; want error wrapping %v", tc.idx, tc.enabled, got, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("SetMIGMode(%d, %v) = %+v, want %+v", tc.idx, tc.enabled, got, tc.want)
			}
		})
	}
	stop(t, sim, pid0)
	if err := sim.ResetGPU(0); err != nil {
		t.Fatal(err)
	}
	gpus, err = m.GPUs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := []gpu.MIGMode{gpus[0].MIGMode, gpus[1].MIGMode, gpus[2].MIGMode}
	want := []gpu.MIGMode{{Current: true, Pending: true}, {Current: true, Pending: true}, {}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("MIG modes after reset (-want +got):\n%s", diff)
	}
	// A GPU with MIG mode off has no MIG devices; one with MIG on and no GI
	// neither.
	for _, idx := range []int{1, 2} {
		if devs, err := m.MIGDevices(ctx, idx); err != nil || len(devs) != 0 {
			t.Errorf("MIGDevices(%d) = %v, %v; want none", idx, devs, err)
		}
	}
}

func stop(t *testing.T, sim *nvmlsim.Sim, pid uint32) {
	t.Helper()
	if err := sim.StopProcess(pid); err != nil {
		t.Fatal(err)
	}
}

// wantDevice builds the MIGDevice the catalog says profile@start is, with the
// NVML-assigned IDs and UUID taken from got.
func wantDevice(t *testing.T, md *mig.Model, idx int, parent string, d mig.Device, got gpu.MIGDevice) gpu.MIGDevice {
	t.Helper()
	p, err := md.Profile(d.Profile)
	if err != nil {
		t.Fatal(err)
	}
	return gpu.MIGDevice{
		GPUIndex: idx, ParentUUID: parent, Profile: p.Name, ProfileID: p.ID,
		Placement: mig.Placement{Start: d.Start, Size: p.MemorySlices},
		GIID:      got.GIID, CIID: got.CIID, UUID: got.UUID,
		MemoryMiB: p.MemoryMiB, Multiprocessors: p.Multiprocessors, CopyEngines: p.CopyEngines,
		Decoders: p.Decoders, Encoders: p.Encoders, JPEGEngines: p.JPEGEngines, OFAEngines: p.OFAEngines,
	}
}

var migUUIDRE = regexp.MustCompile(`^MIG-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)

// simLayout is the simulator's own record of GPU idx's devices.
func simLayout(sim *nvmlsim.Sim, idx int) mig.Layout { return sim.Snapshot().GPUs[idx].Layout() }

func TestCreateListDestroy(t *testing.T) {
	ctx := t.Context()
	sim, m := newSim(t)
	gpus, err := m.GPUs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	type step struct {
		dev     string
		wantErr []error // nil: must succeed
	}
	tests := []struct {
		idx    int
		steps  []step
		layout string // the layout listed afterwards
		ids    []int  // GI profile IDs, in placement order
	}{
		{
			idx: 0,
			steps: []step{
				{"3g.40gb@0", nil},
				{"2g.20gb@4", nil},
				{"1g.10gb@6", nil},
				// 1g profiles start at 0..6 on A100: refused before NVML.
				{"1g.10gb@7", []error{gpu.ErrInsufficientResources, mig.ErrInvalidLayout}},
				// Overlaps 3g.40gb@0: NVML refuses.
				{"1g.10gb@1", []error{gpu.ErrInsufficientResources}},
				{"5g.50gb@0", []error{mig.ErrUnknownProfile}},
			},
			layout: "3g.40gb@0,2g.20gb@4,1g.10gb@6",
			ids:    []int{9, 14, 19},
		},
		{
			idx: 1,
			steps: []step{
				{"3g.40gb@4", nil},
				{"1g.10gb@0", nil},
				{"1g.10gb@1", nil},
				{"2g.20gb@2", nil},
				// All 7 compute slices are taken.
				{"1g.10gb@6", []error{gpu.ErrInsufficientResources}},
			},
			layout: "1g.10gb@0,1g.10gb@1,2g.20gb@2,3g.40gb@4",
			ids:    []int{19, 19, 14, 9},
		},
		{
			idx: 2,
			steps: []step{
				{"4g.40gb@0", nil},
				{"1g.20gb@4", nil},
				{"1g.10gb+me@6", nil},
				{"7g.80gb@0", []error{gpu.ErrInsufficientResources}},
			},
			layout: "4g.40gb@0,1g.20gb@4,1g.10gb+me@6",
			ids:    []int{5, 15, 20},
		},
	}
	for _, tc := range tests {
		t.Run(gpus[tc.idx].ProductName+"/"+tc.layout, func(t *testing.T) {
			enableMIG(t, ctx, sim, m, tc.idx)
			md := gpus[tc.idx].Model
			created := map[mig.Device]gpu.MIGDevice{}
			for _, s := range tc.steps {
				d := mig.MustParseLayout(s.dev)[0]
				before := simLayout(sim, tc.idx)
				got, err := m.CreateMIGDevice(ctx, tc.idx, d)
				if s.wantErr == nil {
					if err != nil {
						t.Fatalf("CreateMIGDevice(%s): %v", d, err)
					}
					if !migUUIDRE.MatchString(got.UUID) || got.CIID < 0 || got.GIID < 1 {
						t.Errorf("CreateMIGDevice(%s) = %+v: want GI ID >= 1, CI ID >= 0, MIG UUID", d, got)
					}
					want := wantDevice(t, md, tc.idx, gpus[tc.idx].UUID, d, got)
					if diff := cmp.Diff(want, got); diff != "" {
						t.Errorf("CreateMIGDevice(%s) (-want +got):\n%s", d, diff)
					}
					created[d] = got
					continue
				}
				if err == nil {
					t.Fatalf("CreateMIGDevice(%s) succeeded, want an error wrapping %v", d, s.wantErr)
				}
				for _, w := range s.wantErr {
					if !errors.Is(err, w) {
						t.Errorf("CreateMIGDevice(%s) = %v, want it to wrap %v", d, err, w)
					}
				}
				if !strings.Contains(err.Error(), d.String()) || !strings.Contains(err.Error(), fmt.Sprintf("GPU %d", tc.idx)) {
					t.Errorf("error %q does not name the device and GPU", err)
				}
				if after := simLayout(sim, tc.idx); !after.Equal(before) {
					t.Errorf("failed CreateMIGDevice(%s) changed the GPU: %s -> %s", d, before, after)
				}
			}
			devs, err := m.MIGDevices(ctx, tc.idx)
			if err != nil {
				t.Fatal(err)
			}
			var want []gpu.MIGDevice
			var layout mig.Layout
			var ids []int
			for _, d := range devs {
				layout = append(layout, d.Device())
				ids = append(ids, d.ProfileID)
				want = append(want, created[d.Device()])
			}
			if got := layout.String(); got != tc.layout {
				t.Errorf("MIGDevices layout = %s, want %s", got, tc.layout)
			}
			if got := simLayout(sim, tc.idx).String(); got != tc.layout {
				t.Errorf("simulator layout = %s, want %s", got, tc.layout)
			}
			if diff := cmp.Diff(tc.ids, ids); diff != "" {
				t.Errorf("GI profile IDs (-want +got):\n%s", diff)
			}
			// Listing gives back exactly what creating returned (IDs, UUIDs).
			if diff := cmp.Diff(want, devs); diff != "" {
				t.Errorf("MIGDevices differs from the created devices (-want +got):\n%s", diff)
			}
			// The MIG UUIDs are the simulator's.
			snap := sim.Snapshot().GPUs[tc.idx]
			for i, gi := range snap.GPUInstances {
				if len(gi.ComputeInstances) != 1 || gi.ComputeInstances[0].UUID != devs[i].UUID || gi.ID != devs[i].GIID {
					t.Errorf("device %d: simulator has GI %d %+v, manager reports GI %d UUID %s", i, gi.ID, gi.ComputeInstances, devs[i].GIID, devs[i].UUID)
				}
			}

			// Destroy everything, in order; the GPU ends empty.
			for _, d := range devs {
				if err := m.DestroyMIGDevice(ctx, tc.idx, d.Device()); err != nil {
					t.Fatalf("DestroyMIGDevice(%s): %v", d.Device(), err)
				}
			}
			if devs, err := m.MIGDevices(ctx, tc.idx); err != nil || len(devs) != 0 {
				t.Errorf("MIGDevices after destroying all = %v, %v; want none", devs, err)
			}
			if l := simLayout(sim, tc.idx); len(l) != 0 {
				t.Errorf("simulator still has %s", l)
			}
		})
	}
}

// TestGPUProcesses: the processes on a whole GPU (MIG off) are listed with
// their memory in MiB; a GPU NVML does not know is ErrNotFound.
func TestGPUProcesses(t *testing.T) {
	ctx := t.Context()
	sim, m := newSim(t)
	pid, err := sim.StartProcess(sim.Snapshot().GPUs[1].UUID, 2048)
	if err != nil {
		t.Fatal(err)
	}
	procs, err := m.GPUProcesses(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]gpu.Process{{PID: pid, UsedMemoryMiB: 2048}}, procs); diff != "" {
		t.Errorf("GPUProcesses(1) (-want +got):\n%s", diff)
	}
	if procs, err := m.GPUProcesses(ctx, 0); err != nil || len(procs) != 0 {
		t.Errorf("GPUProcesses(0) = %v, %v; want none", procs, err)
	}
	if _, err := m.GPUProcesses(ctx, 7); !errors.Is(err, gpu.ErrNotFound) {
		t.Errorf("GPUProcesses(7) = %v, want ErrNotFound", err)
	}
}

// TestMIGProcesses: the processes of every MIG device of a GPU at once
// are those Processes lists device by device; devices without any are
// left out, and a GPU with MIG mode off has none.
func TestMIGProcesses(t *testing.T) {
	ctx := t.Context()
	sim, m := newSim(t)
	if got, err := m.MIGProcesses(ctx, 0); err != nil || len(got) != 0 {
		t.Errorf("MIG mode off: %v, %v; want none", got, err)
	}
	enableMIG(t, ctx, sim, m, 0)
	layout := mig.MustParseLayout("3g.40gb@0,2g.20gb@4,1g.10gb@6")
	uuids := map[mig.Device]string{}
	for _, d := range layout {
		md, err := m.CreateMIGDevice(ctx, 0, d)
		if err != nil {
			t.Fatal(err)
		}
		uuids[d] = md.UUID
	}
	want := map[mig.Device][]gpu.Process{}
	for _, d := range []mig.Device{layout[0], layout[2]} {
		pid, err := sim.StartProcess(uuids[d], 100)
		if err != nil {
			t.Fatal(err)
		}
		want[d] = []gpu.Process{{PID: pid, UsedMemoryMiB: 100}}
	}
	got, err := m.MIGProcesses(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("MIGProcesses (-want +got):\n%s", diff)
	}
	for _, d := range layout {
		one, err := m.Processes(ctx, 0, d)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want[d], one, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("Processes(%s) differs from MIGProcesses (-MIGProcesses +Processes):\n%s", d, diff)
		}
	}
	if _, err := m.MIGProcesses(ctx, 7); !errors.Is(err, gpu.ErrNotFound) {
		t.Errorf("MIGProcesses(7) = %v, want ErrNotFound", err)
	}
}

// TestDestroyStaleCIHandle: a compute-instance destroy answered with
// INVALID_ARGUMENT (a stale handle) while the CI is still there does not
// pass for the device being gone: the GI's destroy, refused while the CI
// stays, decides, and the device is still listed; the next destroy works.
func TestDestroyStaleCIHandle(t *testing.T) {
	ctx := t.Context()
	sim, m := newSim(t)
	enableMIG(t, ctx, sim, m, 0)
	d := mig.Device{Profile: "3g.40gb", Start: 0}
	if _, err := m.CreateMIGDevice(ctx, 0, d); err != nil {
		t.Fatal(err)
	}
	if err := sim.InjectFault(nvmlsim.Fault{Op: "ComputeInstance.Destroy", Nth: 1, Return: nvml.ERROR_INVALID_ARGUMENT}); err != nil {
		t.Fatal(err)
	}
	err := m.DestroyMIGDevice(ctx, 0, d)
	if err == nil || errors.Is(err, gpu.ErrNotFound) {
		t.Fatalf("DestroyMIGDevice with the CI left = %v, want an error other than ErrNotFound", err)
	}
	if l := simLayout(sim, 0); len(l) != 1 {
		t.Errorf("simulator has %s, want the device kept", l)
	}
	if err := m.DestroyMIGDevice(ctx, 0, d); err != nil {
		t.Fatalf("second DestroyMIGDevice: %v", err)
	}
	if l := simLayout(sim, 0); len(l) != 0 {
		t.Errorf("simulator still has %s", l)
	}
}

func TestDestroyInUse(t *testing.T) {
	ctx := t.Context()
	sim, m := newSim(t)
	enableMIG(t, ctx, sim, m, 0)
	d := mig.Device{Profile: "3g.40gb", Start: 4}
	md, err := m.CreateMIGDevice(ctx, 0, d)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := sim.StartProcess(md.UUID, 1536)
	if err != nil {
		t.Fatal(err)
	}
	procs, err := m.Processes(ctx, 0, d)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]gpu.Process{{PID: pid, UsedMemoryMiB: 1536}}, procs); diff != "" {
		t.Errorf("Processes (-want +got):\n%s", diff)
	}

	err = m.DestroyMIGDevice(ctx, 0, d)
	if !errors.Is(err, gpu.ErrInUse) {
		t.Fatalf("DestroyMIGDevice with a process = %v, want ErrInUse", err)
	}
	if !strings.Contains(err.Error(), "3g.40gb@4") || !strings.Contains(err.Error(), "GPU 0") {
		t.Errorf("error %q does not name the device and GPU", err)
	}
	devs, err := m.MIGDevices(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]gpu.MIGDevice{md}, devs); diff != "" {
		t.Errorf("device changed by a refused destroy (-want +got):\n%s", diff)
	}

	if err := sim.StopProcess(pid); err != nil {
		t.Fatal(err)
	}
	if procs, err := m.Processes(ctx, 0, d); err != nil || len(procs) != 0 {
		t.Errorf("Processes after stop = %v, %v; want none", procs, err)
	}
	if err := m.DestroyMIGDevice(ctx, 0, d); err != nil {
		t.Fatalf("DestroyMIGDevice after the process stopped: %v", err)
	}
	if l := simLayout(sim, 0); len(l) != 0 {
		t.Errorf("simulator still has %s", l)
	}
}

func TestDestroyNotFound(t *testing.T) {
	ctx := t.Context()
	sim, m := newSim(t)
	enableMIG(t, ctx, sim, m, 0)
	if _, err := m.CreateMIGDevice(ctx, 0, mig.Device{Profile: "3g.40gb", Start: 0}); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		idx  int
		dev  mig.Device
	}{
		{"nothing at that placement", 0, mig.Device{Profile: "3g.40gb", Start: 4}},
		{"another profile at that placement", 0, mig.Device{Profile: "4g.40gb", Start: 0}},
		{"MIG mode off", 1, mig.Device{Profile: "3g.40gb", Start: 0}},
		// The GPU instance is not known to be gone: not ErrNotFound for
		// a destroy (TestDestroyOnAMissingGPUIsNotGone).
		{"no such GPU", 9, mig.Device{Profile: "3g.40gb", Start: 0}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := m.DestroyMIGDevice(ctx, tc.idx, tc.dev)
			if errors.Is(err, gpu.ErrNotFound) != (tc.name != "no such GPU") {
				t.Errorf("DestroyMIGDevice(%d, %s) = %v, want ErrNotFound unless the GPU is missing", tc.idx, tc.dev, err)
			}
			if _, err := m.Processes(ctx, tc.idx, tc.dev); !errors.Is(err, gpu.ErrNotFound) {
				t.Errorf("Processes(%d, %s) = %v, want ErrNotFound", tc.idx, tc.dev, err)
			}
		})
	}
	if got := simLayout(sim, 0).String(); got != "3g.40gb@0" {
		t.Errorf("simulator layout = %s, want 3g.40gb@0 untouched", got)
	}
}

func TestCreateRollback(t *testing.T) {
	ctx := t.Context()
	d := mig.Device{Profile: "2g.20gb", Start: 2}
	tests := []struct {
		name     string
		faults   []nvmlsim.Fault
		wantErrs []error
		// notWantErrs are classes the error must not match.
		notWantErrs []error
		wantCode    nvml.Return
		wantMsg     []string
		notWantMsg  []string
		wantLayout  string // what remains on the GPU
	}{
		{
			name:       "CI fails, GI rolled back",
			faults:     []nvmlsim.Fault{{Op: "CreateComputeInstance", Nth: 1, Return: nvml.ERROR_INSUFFICIENT_RESOURCES}},
			wantErrs:   []error{gpu.ErrInsufficientResources},
			wantCode:   nvml.ERROR_INSUFFICIENT_RESOURCES,
			wantMsg:    []string{"creating compute instance", "GPU instance was destroyed again", "2g.20gb@2", "GPU 0"},
			wantLayout: "",
		},
		// ERROR_INVALID_ARGUMENT from a CI create on a GI made just now is
		// an argument the driver refuses, not a handle gone.
		{
			name:        "CI refused as an invalid argument",
			faults:      []nvmlsim.Fault{{Op: "CreateComputeInstance", Nth: 1, Return: nvml.ERROR_INVALID_ARGUMENT}},
			wantErrs:    []error{gpu.ErrNVML},
			notWantErrs: []error{gpu.ErrNotFound},
			wantCode:    nvml.ERROR_INVALID_ARGUMENT,
			wantMsg:     []string{"creating compute instance", "GPU instance was destroyed again"},
			wantLayout:  "",
		},
		{
			name: "CI fails and the rollback fails too",
			faults: []nvmlsim.Fault{
				{Op: "CreateComputeInstance", Nth: 1, Return: nvml.ERROR_INSUFFICIENT_RESOURCES},
				{Op: "GpuInstance.Destroy", Nth: 1, Return: nvml.ERROR_UNKNOWN},
			},
			wantErrs:   []error{gpu.ErrInsufficientResources, gpu.ErrNVML},
			wantCode:   nvml.ERROR_INSUFFICIENT_RESOURCES,
			wantMsg:    []string{"creating compute instance", "; and then rolling back the GPU instance failed", "2g.20gb@2", "GPU 0"},
			wantLayout: "2g.20gb@2",
		},
		// The create reported success without making the GPU instance
		// (or another client destroyed it at once): its handle is stale,
		// and the rollback has nothing to destroy.
		{
			name:       "GI gone before the rollback",
			faults:     []nvmlsim.Fault{{Op: "CreateGpuInstanceWithPlacement", Nth: 1, Lie: true}},
			wantErrs:   []error{gpu.ErrNotFound},
			wantCode:   nvml.ERROR_INVALID_ARGUMENT,
			wantMsg:    []string{"reading the new GPU instance", "the GPU instance is gone already", "2g.20gb@2", "GPU 0"},
			notWantMsg: []string{"rolling back the GPU instance failed", "left without a compute instance"},
			wantLayout: "",
		},
		// The rollback refused as in use: the failure is still the
		// create's (not a device in use), ErrInUse not matched.
		{
			name: "CI fails and the rollback is refused in use",
			faults: []nvmlsim.Fault{
				{Op: "CreateComputeInstance", Nth: 1, Return: nvml.ERROR_UNKNOWN},
				{Op: "GpuInstance.Destroy", Nth: 1, Return: nvml.ERROR_IN_USE},
			},
			wantErrs:    []error{gpu.ErrNVML},
			notWantErrs: []error{gpu.ErrInUse},
			wantCode:    nvml.ERROR_UNKNOWN,
			wantMsg:     []string{"creating compute instance", "; and then rolling back the GPU instance failed", "ERROR_IN_USE"},
			wantLayout:  "2g.20gb@2",
		},
		// A rollback refused in use is a failure of NVML's, whatever the
		// class of the create's own failure.
		{
			name: "CI has no room and the rollback is refused in use",
			faults: []nvmlsim.Fault{
				{Op: "CreateComputeInstance", Nth: 1, Return: nvml.ERROR_INSUFFICIENT_RESOURCES},
				{Op: "GpuInstance.Destroy", Nth: 1, Return: nvml.ERROR_IN_USE},
			},
			wantErrs:    []error{gpu.ErrInsufficientResources, gpu.ErrNVML},
			notWantErrs: []error{gpu.ErrInUse},
			wantCode:    nvml.ERROR_INSUFFICIENT_RESOURCES,
			wantMsg:     []string{"; and then rolling back the GPU instance failed", "ERROR_IN_USE"},
			wantLayout:  "2g.20gb@2",
		},
		// A rollback whose destroy NVML answers NOT_FOUND has nothing to
		// roll back: no failure of its own.
		{
			name: "CI fails and the rollback finds the GI gone",
			faults: []nvmlsim.Fault{
				{Op: "CreateComputeInstance", Nth: 1, Return: nvml.ERROR_UNKNOWN},
				{Op: "GpuInstance.Destroy", Nth: 1, Return: nvml.ERROR_NOT_FOUND},
			},
			wantErrs:   []error{gpu.ErrNVML},
			wantCode:   nvml.ERROR_UNKNOWN,
			wantMsg:    []string{"creating compute instance", "the GPU instance is gone already"},
			notWantMsg: []string{"rolling back the GPU instance failed"},
			wantLayout: "2g.20gb@2",
		},
		// Other classes of the rollback's failure are kept: one that
		// needs a reset says so.
		{
			name: "CI fails and the rollback needs a reset",
			faults: []nvmlsim.Fault{
				{Op: "CreateComputeInstance", Nth: 1, Return: nvml.ERROR_UNKNOWN},
				{Op: "GpuInstance.Destroy", Nth: 1, Return: nvml.ERROR_RESET_REQUIRED},
			},
			wantErrs:   []error{gpu.ErrNVML, gpu.ErrResetRequired},
			wantCode:   nvml.ERROR_UNKNOWN,
			wantMsg:    []string{"creating compute instance", "; and then rolling back the GPU instance failed", "ERROR_RESET_REQUIRED"},
			wantLayout: "2g.20gb@2",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sim, m := newSim(t)
			enableMIG(t, ctx, sim, m, 0)
			for _, f := range tc.faults {
				if err := sim.InjectFault(f); err != nil {
					t.Fatal(err)
				}
			}
			_, err := m.CreateMIGDevice(ctx, 0, d)
			if err == nil {
				t.Fatal("CreateMIGDevice succeeded despite the fault")
			}
			for _, w := range tc.wantErrs {
				if !errors.Is(err, w) {
					t.Errorf("error %v does not wrap %v", err, w)
				}
			}
			for _, w := range tc.notWantErrs {
				if errors.Is(err, w) {
					t.Errorf("error %v wraps %v", err, w)
				}
			}
			if code, ok := gpu.ReturnCode(err); !ok || code != tc.wantCode {
				t.Errorf("ReturnCode = %v, %v; want %v", code, ok, tc.wantCode)
			}
			for _, s := range tc.wantMsg {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q lacks %q", err, s)
				}
			}
			for _, s := range tc.notWantMsg {
				if strings.Contains(err.Error(), s) {
					t.Errorf("error %q says %q", err, s)
				}
			}
			if got := simLayout(sim, 0).String(); got != tc.wantLayout {
				t.Errorf("simulator layout after the failed create = %q, want %q", got, tc.wantLayout)
			}
			devs, err := m.MIGDevices(ctx, 0)
			if err != nil {
				t.Fatal(err)
			}
			if tc.wantLayout == "" {
				if len(devs) != 0 {
					t.Errorf("MIGDevices = %+v, want none", devs)
				}
			} else {
				// The GI left without CI is listed with CIID -1 and no UUID,
				// and DestroyMIGDevice cleans it up.
				if len(devs) != 1 || devs[0].Device() != d || devs[0].CIID != -1 || devs[0].UUID != "" {
					t.Fatalf("MIGDevices = %+v, want %s with CIID -1 and no UUID", devs, d)
				}
				if err := m.DestroyMIGDevice(ctx, 0, d); err != nil {
					t.Fatalf("destroying the GI left without CI: %v", err)
				}
			}
			// The fault was one-shot: the same create now succeeds.
			if _, err := m.CreateMIGDevice(ctx, 0, d); err != nil {
				t.Errorf("CreateMIGDevice after the fault: %v", err)
			}
		})
	}
}

func TestErrorsFromNVML(t *testing.T) {
	ctx := t.Context()
	sim, m := newSim(t)
	enableMIG(t, ctx, sim, m, 2)
	tests := []struct {
		name  string
		fault nvmlsim.Fault
		call  func() error
		want  error
		code  nvml.Return
	}{
		{
			name:  "no permission on create",
			fault: nvmlsim.Fault{Op: "CreateGpuInstanceWithPlacement", Nth: 1, Return: nvml.ERROR_NO_PERMISSION},
			call: func() error {
				_, err := m.CreateMIGDevice(ctx, 2, mig.Device{Profile: "7g.80gb", Start: 0})
				return err
			},
			want: gpu.ErrNoPermission, code: nvml.ERROR_NO_PERMISSION,
		},
		{
			name:  "reset required on SetMigMode",
			fault: nvmlsim.Fault{Op: "SetMigMode", Nth: 1, Return: nvml.ERROR_RESET_REQUIRED},
			call: func() error {
				_, err := m.SetMIGMode(ctx, 1, true)
				return err
			},
			want: gpu.ErrResetRequired, code: nvml.ERROR_RESET_REQUIRED,
		},
		{
			name:  "GPU lost while listing",
			fault: nvmlsim.Fault{Op: "GetGpuInstances", Nth: 1, Return: nvml.ERROR_GPU_IS_LOST},
			call: func() error {
				_, err := m.MIGDevices(ctx, 2)
				return err
			},
			want: gpu.ErrGPULost, code: nvml.ERROR_GPU_IS_LOST,
		},
		{
			name:  "in use on CI destroy",
			fault: nvmlsim.Fault{Op: "ComputeInstance.Destroy", Nth: 1, Return: nvml.ERROR_IN_USE},
			call: func() error {
				d := mig.Device{Profile: "1g.10gb", Start: 3}
				if _, err := m.CreateMIGDevice(ctx, 2, d); err != nil {
					return err
				}
				return m.DestroyMIGDevice(ctx, 2, d)
			},
			want: gpu.ErrInUse, code: nvml.ERROR_IN_USE,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := sim.InjectFault(tc.fault); err != nil {
				t.Fatal(err)
			}
			err := tc.call()
			if !errors.Is(err, tc.want) {
				t.Errorf("error %v does not wrap %v", err, tc.want)
			}
			if code, ok := gpu.ReturnCode(err); !ok || code != tc.code {
				t.Errorf("ReturnCode(%v) = %v, %v; want %v", err, code, ok, tc.code)
			}
			if err := sim.ClearFaults(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// A GPU that the catalog lacks is listed with a nil Model and never
// repartitioned.
func TestUnknownModel(t *testing.T) {
	sim, err := nvmlsim.New(nvmlsim.Config{Spec: "1xA100-SXM4-80GB"})
	if err != nil {
		t.Fatal(err)
	}
	// A catalog without the A100 stands in for a GPU the catalog lacks.
	empty, err := mig.LoadCatalog(fstest.MapFS{})
	if err != nil {
		t.Fatal(err)
	}
	m, err := gpu.NewNVML(sim, empty)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Shutdown()
	ctx := t.Context()
	gpus, err := m.GPUs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(gpus) != 1 || gpus[0].Model != nil || gpus[0].ProductName != "NVIDIA A100-SXM4-80GB" {
		t.Fatalf("GPUs = %+v, want one A100 with nil Model", gpus)
	}
	enableMIG(t, ctx, sim, m, 0)
	d := mig.Device{Profile: "3g.40gb", Start: 0}
	if _, err := m.CreateMIGDevice(ctx, 0, d); !errors.Is(err, mig.ErrUnknownModel) {
		t.Errorf("CreateMIGDevice on an uncatalogued GPU = %v, want ErrUnknownModel", err)
	}
	if l := simLayout(sim, 0); len(l) != 0 {
		t.Errorf("uncatalogued GPU was touched: %s", l)
	}
	// Devices made by someone else are still listed, named from NVML's
	// profile info by walking every NVML profile index.
	full, err := gpu.NewNVML(sim, mig.DefaultCatalog())
	if err != nil {
		t.Fatal(err)
	}
	defer full.Shutdown()
	for _, dev := range mig.MustParseLayout("3g.40gb@0,1g.20gb@4,1g.10gb+me@6") {
		if _, err := full.CreateMIGDevice(ctx, 0, dev); err != nil {
			t.Fatal(err)
		}
	}
	want, err := full.MIGDevices(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	got, err := m.MIGDevices(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("MIGDevices without catalog differs from with catalog (-with +without):\n%s", diff)
	}
	if err := m.DestroyMIGDevice(ctx, 0, mig.Device{Profile: "1g.20gb", Start: 4}); err != nil {
		t.Errorf("DestroyMIGDevice on an uncatalogued GPU: %v", err)
	}
	if got := simLayout(sim, 0).String(); got != "3g.40gb@0,1g.10gb+me@6" {
		t.Errorf("layout after destroy = %s", got)
	}
}

// driverCatalog is the default catalog but for H100-SXM5-80GB's 3g.40gb,
// whose memory NVML gives as 40600 MiB: hardware whose driver describes a
// profile otherwise than miglayout's catalog.
func driverCatalog(t *testing.T) *mig.Catalog {
	t.Helper()
	h100 := model(t, "H100-SXM5-80GB")
	p, err := h100.Profile("3g.40gb")
	if err != nil {
		t.Fatal(err)
	}
	values := p.NVMLValues()
	values.MemoryMiB = 40600
	v, err := h100.WithNVMLValues([]mig.NVMLProfileValues{values})
	if err != nil {
		t.Fatal(err)
	}
	c, err := mig.DefaultCatalog().With(v)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestGPUsProfileValues: where NVML describes a profile otherwise than the
// catalog (a driver's values, or an unverified catalog entry), GPUs reports
// NVML's values for it, with MIG mode off too (driver 580 answers then; see
// TestProfileTableWithMIGModeOff); where they agree, nothing.
func TestGPUsProfileValues(t *testing.T) {
	_, m := gputest.Simulated(t, nvmlsim.Config{Spec: "1xH100-SXM5-80GB,1xA100-SXM4-80GB", Catalog: driverCatalog(t)})
	ctx := t.Context()
	values := func() [][]mig.NVMLProfileValues {
		t.Helper()
		gpus, err := m.GPUs(ctx)
		if err != nil {
			t.Fatal(err)
		}
		out := make([][]mig.NVMLProfileValues, len(gpus))
		for i, g := range gpus {
			out[i] = g.ProfileValues
		}
		return out
	}
	want := [][]mig.NVMLProfileValues{{{Profile: "3g.40gb", MemoryMiB: 40600, Multiprocessors: 60, CopyEngines: 3, Decoders: 3, JPEG: 3}}, nil}
	if diff := cmp.Diff(want, values()); diff != "" {
		t.Errorf("MIG off (-want +got):\n%s", diff)
	}
	for i := range 2 {
		if _, err := m.SetMIGMode(ctx, i, true); err != nil {
			t.Fatal(err)
		}
	}
	if diff := cmp.Diff(want, values()); diff != "" {
		t.Errorf("MIG on (-want +got):\n%s", diff)
	}
}

// TestGPUsProfileValuesBestEffort: a profile table NVML fails to give does
// not fail the inventory (the kubelet plugin reads it to prepare claims); it
// is read again on the next call, and once read it is not read again.
func TestGPUsProfileValuesBestEffort(t *testing.T) {
	sim, m := gputest.Simulated(t, nvmlsim.Config{Spec: "1xH100-SXM5-80GB"})
	ctx := t.Context()
	if _, err := m.SetMIGMode(ctx, 0, true); err != nil {
		t.Fatal(err)
	}
	// The first profile info the next GPUs call reads fails.
	if err := sim.InjectFault(nvmlsim.Fault{Op: "GetGpuInstanceProfileInfo", Nth: 1, Return: nvml.ERROR_UNKNOWN}); err != nil {
		t.Fatal(err)
	}
	if gpus, err := m.GPUs(ctx); err != nil || len(gpus) != 1 {
		t.Fatalf("GPUs with the profile table failing: %v, %v; want the GPU", gpus, err)
	}
	// Read and cached now: a fault on the table is not reached again.
	if _, err := m.GPUs(ctx); err != nil {
		t.Fatal(err)
	}
	if err := sim.InjectFault(nvmlsim.Fault{Op: "GetGpuInstanceProfileInfo", Nth: 1, Return: nvml.ERROR_GPU_IS_LOST}); err != nil {
		t.Fatal(err)
	}
	if _, err := m.GPUs(ctx); err != nil {
		t.Fatal(err)
	}
	if st := sim.Snapshot(); len(st.Faults) != 1 {
		t.Errorf("faults left %+v: the cached table was read again", st.Faults)
	}
}

// TestGPUsWithALostGPU: a GPU fallen off the bus is left out of GPUs, named
// with its error, while the node's other GPUs are listed; calls on it fail
// with ErrGPULost; once recovered it is listed again.
func TestGPUsWithALostGPU(t *testing.T) {
	ctx := t.Context()
	sim, m := newSim(t)
	if err := sim.LoseGPU(1); err != nil {
		t.Fatal(err)
	}
	gpus, err := m.GPUs(ctx)
	unreadable, fatal := gpu.SplitUnreadable(err)
	if fatal != nil {
		t.Fatalf("GPUs with GPU 1 lost failed as a whole: %v", fatal)
	}
	var got []int
	for _, g := range gpus {
		got = append(got, g.Index)
	}
	if diff := cmp.Diff([]int{0, 2}, got); diff != "" {
		t.Errorf("GPUs listed (-want +got):\n%s", diff)
	}
	if len(unreadable) != 1 || !errors.Is(unreadable[1], gpu.ErrGPULost) {
		t.Errorf("unreadable GPUs %v, want GPU 1 lost", unreadable)
	}
	if err == nil || !strings.Contains(err.Error(), "reading GPU 1: ") || !strings.Contains(err.Error(), "ERROR_GPU_IS_LOST") {
		t.Errorf("error %v does not name GPU 1 and NVML's code", err)
	}
	if _, err := m.MIGDevices(ctx, 1); !errors.Is(err, gpu.ErrGPULost) {
		t.Errorf("MIGDevices of the lost GPU: %v, want ErrGPULost", err)
	}
	if _, err := m.CreateMIGDevice(ctx, 1, mig.Device{Profile: "7g.80gb", Start: 0}); !errors.Is(err, gpu.ErrGPULost) {
		t.Errorf("CreateMIGDevice on the lost GPU: %v, want ErrGPULost", err)
	}
	if err := sim.RecoverGPU(1); err != nil {
		t.Fatal(err)
	}
	if gpus, err := m.GPUs(ctx); err != nil || len(gpus) != 3 {
		t.Errorf("GPUs after recovery: %d, %v; want 3", len(gpus), err)
	}
	// A GPU without power (its handle: ERROR_INSUFFICIENT_POWER) is left
	// out as a lost one is.
	if err := sim.InjectFault(nvmlsim.Fault{Op: "DeviceGetHandleByIndex", Nth: 2, Return: nvml.ERROR_INSUFFICIENT_POWER}); err != nil {
		t.Fatal(err)
	}
	gpus, err = m.GPUs(ctx)
	if u, fatal := gpu.SplitUnreadable(err); fatal != nil || len(gpus) != 2 || u[1] == nil {
		t.Errorf("GPUs with GPU 1 unpowered: %d GPUs, unreadable %v, error %v; want the other two", len(gpus), u, fatal)
	}
	// An error on one GPU that may pass (not a lost GPU) fails the
	// listing: a sound GPU is never reported gone for it.
	if err := sim.InjectFault(nvmlsim.Fault{Op: "GetUUID", Nth: 2, Return: nvml.ERROR_UNKNOWN}); err != nil {
		t.Fatal(err)
	}
	gpus, err = m.GPUs(ctx)
	if u, fatal := gpu.SplitUnreadable(err); fatal == nil || u != nil || !strings.Contains(fatal.Error(), "reading GPU 1") {
		t.Errorf("GPUs with ERROR_UNKNOWN on GPU 1: unreadable %v, error %v; want the listing failed naming GPU 1", u, fatal)
	}
	// A caller that needs some GPUs only still gets the others.
	if perGPU, ok := gpu.GPUErrors(err); !ok || len(perGPU) != 1 || perGPU[1] == nil || len(gpus) != 2 || gpus[0].Index != 0 || gpus[1].Index != 2 {
		t.Errorf("GPUErrors with ERROR_UNKNOWN on GPU 1: %v, %v with GPUs %v; want GPU 1's error and GPUs 0 and 2", perGPU, ok, gpus)
	}
	// An error that is not about single GPUs fails the listing.
	if err := sim.InjectFault(nvmlsim.Fault{Op: "DeviceGetCount", Nth: 1, Return: nvml.ERROR_UNKNOWN}); err != nil {
		t.Fatal(err)
	}
	_, err = m.GPUs(ctx)
	if u, fatal := gpu.SplitUnreadable(err); fatal == nil || u != nil {
		t.Errorf("GPUs with the count failing: unreadable %v, error %v; want the error", u, fatal)
	}
	if _, ok := gpu.GPUErrors(err); ok {
		t.Errorf("GPUErrors with the count failing: ok, want the listing failed as a whole")
	}
}

// TestCatalogMismatches: a GPU whose NVML offers a profile under another GI
// profile ID, or at other placements, than the catalog says is reported
// with one line per difference; the default simulator (built from the
// catalog) shows none.
func TestCatalogMismatches(t *testing.T) {
	ctx := t.Context()
	_, m := newSim(t)
	gpus, err := m.GPUs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range gpus {
		if len(g.CatalogMismatches) > 0 {
			t.Errorf("GPU %d (%s) of the catalog's own simulator: mismatches %q", g.Index, g.ProductName, g.CatalogMismatches)
		}
	}

	// Hardware whose driver gives the A100's 1g.20gb another ID and its
	// 2g.20gb a fourth placement.
	files := fstest.MapFS{}
	for _, name := range []string{"ampere.yaml", "hopper.yaml", "blackwell.yaml"} {
		data, err := os.ReadFile(filepath.Join("..", "models", name))
		if err != nil {
			t.Fatal(err)
		}
		if name == "ampere.yaml" {
			text := strings.ReplaceAll(string(data), "{name: 1g.20gb,    id: 15,", "{name: 1g.20gb,    id: 16,")
			text = strings.ReplaceAll(text, "placements: *p2g,", "placements: *p2,")
			if text == string(data) {
				t.Fatal("the test's edit of ampere.yaml changed nothing")
			}
			data = []byte(text)
		}
		files["models/"+name] = &fstest.MapFile{Data: data}
	}
	hardware, err := mig.LoadCatalog(files)
	if err != nil {
		t.Fatal(err)
	}
	sim, err := nvmlsim.New(nvmlsim.Config{Spec: "1xA100-SXM4-80GB", Catalog: hardware})
	if err != nil {
		t.Fatal(err)
	}
	hm := managerOver(t, sim, nil, "")
	if _, err := hm.SetMIGMode(ctx, 0, true); err != nil {
		t.Fatal(err)
	}
	gpus, err = hm.GPUs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"1g.20gb (NVML profile index 9): NVML's GI profile ID is 16, the catalog's 15",
		"2g.20gb placements: NVML offers 0+2,2+2,4+2,6+2, the catalog 0+2,2+2,4+2",
	}
	if diff := cmp.Diff(want, gpus[0].CatalogMismatches); diff != "" {
		t.Errorf("mismatches (-want +got):\n%s", diff)
	}
	// The same, for the agent to refuse what NVML would.
	if diff := cmp.Diff(map[string]int{"1g.20gb": 16}, gpus[0].NVMLProfileIDs); diff != "" {
		t.Errorf("NVML profile IDs (-want +got):\n%s", diff)
	}
	wantPl := map[string][]mig.Placement{"2g.20gb": {{Start: 0, Size: 2}, {Start: 2, Size: 2}, {Start: 4, Size: 2}, {Start: 6, Size: 2}}}
	if diff := cmp.Diff(wantPl, gpus[0].NVMLPlacements); diff != "" {
		t.Errorf("NVML placements (-want +got):\n%s", diff)
	}
}

// noMEProfile is a 1g.10gb-me profile on A100-SXM4-80GB: a profile a
// driver may offer (NVML index 1_SLICE_NO_ME) that the catalog lacks.
var noMEProfile = mig.Profile{Name: "1g.10gb-me", ID: 21, NVMLProfile: nvml.GPU_INSTANCE_PROFILE_1_SLICE_NO_ME, ComputeSlices: 1, MemorySlices: 1,
	MemoryMiB: 9856, MaxCount: 7, Multiprocessors: 14, CopyEngines: 1,
	Placements: []mig.Placement{{Start: 0, Size: 1}, {Start: 1, Size: 1}, {Start: 2, Size: 1}, {Start: 3, Size: 1}, {Start: 4, Size: 1}, {Start: 5, Size: 1}, {Start: 6, Size: 1}}}

// newUncataloguedSim is one A100 whose driver also offers noMEProfile, MIG
// on, holding 3g.40gb@0 and a 1g.10gb-me@6 someone made with the driver's
// own profile table; m is a manager with miglayout's catalog.
func newUncataloguedSim(t *testing.T) (*nvmlsim.Sim, *gpu.NVMLManager) {
	t.Helper()
	ctx := t.Context()
	hardware, err := nvmlsim.CatalogWithProfiles(nil, "A100-SXM4-80GB", noMEProfile)
	if err != nil {
		t.Fatal(err)
	}
	sim, m := gputest.Simulated(t, nvmlsim.Config{Spec: "1xA100-SXM4-80GB", Catalog: hardware})
	enableMIG(t, ctx, sim, m, 0)
	hm, err := gpu.NewNVML(sim, hardware)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = hm.Shutdown() })
	if _, err := hm.CreateMIGDevice(ctx, 0, mig.Device{Profile: "1g.10gb-me", Start: 6}); err != nil {
		t.Fatal(err)
	}
	if _, err := m.CreateMIGDevice(ctx, 0, mig.Device{Profile: "3g.40gb", Start: 0}); err != nil {
		t.Fatal(err)
	}
	return sim, m
}

// TestUncataloguedProfileGI: a GPU instance of a profile the catalog lacks
// on a catalogued GPU (made with nvidia-smi, or a newer driver's profile)
// is listed, named as nvidia-smi names it, so that it is never overlapped
// blindly and can be destroyed; the profile is reported as a catalog
// mismatch.
func TestUncataloguedProfileGI(t *testing.T) {
	ctx := t.Context()
	sim, m := newUncataloguedSim(t)

	devs, err := m.MIGDevices(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, d := range devs {
		got = append(got, fmt.Sprintf("%s id %d %d+%d %d MiB ci %d", d.Profile, d.ProfileID, d.Placement.Start, d.Placement.Size, d.MemoryMiB, d.CIID))
	}
	want := []string{"3g.40gb id 9 0+4 40192 MiB ci 0", "1g.10gb-me id 21 6+1 9856 MiB ci 0"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("MIG devices (-want +got):\n%s", diff)
	}
	gpus, err := m.GPUs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	wantMismatch := []string{"1g.10gb-me (NVML profile index 13, GI profile ID 21): NVML offers a profile the catalog lacks; its GPU instances are listed and destroyed where a layout lacks them, never created"}
	if diff := cmp.Diff(wantMismatch, gpus[0].CatalogMismatches); diff != "" {
		t.Errorf("mismatches (-want +got):\n%s", diff)
	}
	// A device the layout asks for where it stands is refused by NVML
	// (the slice is taken), not by a blind overlap.
	if _, err := m.CreateMIGDevice(ctx, 0, mig.Device{Profile: "3g.40gb", Start: 4}); !errors.Is(err, gpu.ErrInsufficientResources) {
		t.Errorf("creating 3g.40gb@4 over it: %v, want ErrInsufficientResources", err)
	}
	if err := m.DestroyMIGDevice(ctx, 0, mig.Device{Profile: "1g.10gb-me", Start: 6}); err != nil {
		t.Fatalf("destroying it: %v", err)
	}
	if _, err := m.CreateMIGDevice(ctx, 0, mig.Device{Profile: "3g.40gb", Start: 4}); err != nil {
		t.Errorf("creating 3g.40gb@4 once it is gone: %v", err)
	}
	if got := simLayout(sim, 0).String(); got != "3g.40gb@0,3g.40gb@4" {
		t.Errorf("layout = %s", got)
	}
	// An error reading an index the catalog does not use fails the walk as
	// for any other (a GI of that profile may exist; the next walk reads
	// it), unreadable or not as its code says.
	firstExtra := len(model(t, "A100-SXM4-80GB").Profiles) + 1
	for _, tc := range []struct {
		ret        nvml.Return
		unreadable bool
	}{{nvml.ERROR_UNKNOWN, false}, {nvml.ERROR_GPU_IS_LOST, true}} {
		if err := sim.InjectFault(nvmlsim.Fault{Op: "GetGpuInstanceProfileInfo", Nth: firstExtra, Return: tc.ret}); err != nil {
			t.Fatal(err)
		}
		_, err := m.MIGDevices(ctx, 0)
		if err == nil || gpu.Unreadable(err) != tc.unreadable {
			t.Errorf("%v on an extra profile index: %v, want an error (unreadable: %v)", tc.ret, err, tc.unreadable)
		}
		if devs, err := m.MIGDevices(ctx, 0); err != nil || len(devs) != 2 {
			t.Errorf("the walk after: %d devices, %v", len(devs), err)
		}
	}
}
