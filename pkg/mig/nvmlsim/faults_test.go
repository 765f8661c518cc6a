package nvmlsim

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/google/go-cmp/cmp"
)

func TestInjectFaultValidation(t *testing.T) {
	s := newTestSim(t, Config{Spec: "1xA30"})
	tests := []struct {
		name    string
		f       Fault
		wantErr string
	}{
		{"unknown op", Fault{Op: "CreateGPUInstance", Nth: 1, Return: nvml.ERROR_UNKNOWN}, `unknown operation "CreateGPUInstance"`},
		{"Nth 0", Fault{Op: "SetMigMode", Nth: 0, Return: nvml.ERROR_UNKNOWN}, "Nth 0 is not >= 1"},
		{"SUCCESS without Lie", Fault{Op: "SetMigMode", Nth: 1}, "Return must be an error code"},
		{"Lie on a read", Fault{Op: "GetMigMode", Nth: 1, Lie: true}, "Lie is only for mutating operations"},
		{"Lie with a code", Fault{Op: "GpuInstance.Destroy", Nth: 1, Lie: true, Return: nvml.ERROR_UNKNOWN}, "must be left SUCCESS"},
		{"ok", Fault{Op: "GpuInstance.Destroy", Nth: 1, Lie: true}, ""},
		{"ok alias", Fault{Op: "GpuInstance.CreateComputeInstance", Nth: 2, Return: nvml.ERROR_UNKNOWN}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := s.InjectFault(tt.f)
			if tt.wantErr == "" {
				if err != nil {
					t.Errorf("InjectFault(%+v): %v", tt.f, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("InjectFault(%+v) = %v, want error containing %q", tt.f, err, tt.wantErr)
			}
		})
	}
	want := []Fault{{Op: "GpuInstance.Destroy", Nth: 1, Lie: true}, {Op: "CreateComputeInstance", Nth: 2, Return: nvml.ERROR_UNKNOWN}}
	if diff := cmp.Diff(want, s.Snapshot().Faults); diff != "" {
		t.Errorf("pending faults (-want +got):\n%s", diff)
	}
	if err := s.ClearFaults(); err != nil {
		t.Fatal(err)
	}
	if f := s.Snapshot().Faults; len(f) != 0 {
		t.Errorf("faults after ClearFaults: %+v", f)
	}
}

// TestFaultFailsNthCallOnly injects through one simulator and triggers in
// another on the same state file (the fault is persisted).
func TestFaultFailsNthCallOnly(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.json")
	const spec = "1xA100-PCIE-80GB"
	injector := newTestSim(t, Config{Spec: spec, StatePath: path})
	agent := newTestSim(t, Config{Spec: spec, StatePath: path})
	d := migOn(t, agent, 0)
	if err := injector.InjectFault(Fault{Op: "CreateGpuInstanceWithPlacement", Nth: 2, Return: nvml.ERROR_UNKNOWN}); err != nil {
		t.Fatal(err)
	}
	var rets []nvml.Return
	for start := range 4 {
		_, ret := createGI(d, nvml.GPU_INSTANCE_PROFILE_1_SLICE, start)
		rets = append(rets, ret)
		if start == 0 {
			if diff := cmp.Diff([]Fault{{Op: "CreateGpuInstanceWithPlacement", Nth: 1, Return: nvml.ERROR_UNKNOWN}}, injector.Snapshot().Faults); diff != "" {
				t.Errorf("fault after one call (-want +got):\n%s", diff)
			}
		}
	}
	if diff := cmp.Diff([]nvml.Return{nvml.SUCCESS, nvml.ERROR_UNKNOWN, nvml.SUCCESS, nvml.SUCCESS}, rets); diff != "" {
		t.Errorf("returns of four creates (-want +got):\n%s", diff)
	}
	if got := layout(injector, 0); strings.Count(got, "@") != 3 || strings.Contains(got, "@1") {
		t.Errorf("layout %q, want GIs at 0, 2, 3 only (the failed create did nothing)", got)
	}
	if f := injector.Snapshot().Faults; len(f) != 0 {
		t.Errorf("fault still pending after it triggered: %+v", f)
	}
}

func TestFaultOnOtherOps(t *testing.T) {
	s := newTestSim(t, Config{Spec: "1xA100-PCIE-80GB"})
	d := handle(t, s, 0)

	// A read: only the first call fails.
	if err := s.InjectFault(Fault{Op: "GetMigMode", Nth: 1, Return: nvml.ERROR_GPU_IS_LOST}); err != nil {
		t.Fatal(err)
	}
	_, _, ret := d.GetMigMode()
	wantRet(t, "GetMigMode 1", ret, nvml.ERROR_GPU_IS_LOST)
	_, _, ret = s.DeviceGetMigMode(d)
	wantRet(t, "GetMigMode 2 (Interface form)", ret, nvml.SUCCESS)

	// SetMigMode: both codes are the fault's; nothing changes.
	if err := s.InjectFault(Fault{Op: "SetMigMode", Nth: 1, Return: nvml.ERROR_RESET_REQUIRED}); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(modeStep{nvml.ERROR_RESET_REQUIRED, nvml.ERROR_RESET_REQUIRED, 0, 0}, setMode(t, d, nvml.DEVICE_MIG_ENABLE)); diff != "" {
		t.Errorf("SetMigMode with a fault (-want +got):\n%s", diff)
	}
	d = migOn(t, s, 0)

	// CreateComputeInstance and ComputeInstance.Destroy.
	g := mustGI(t, d, nvml.GPU_INSTANCE_PROFILE_7_SLICE, 0)
	info := fullCI(t, g)
	if err := s.InjectFault(Fault{Op: "CreateComputeInstance", Nth: 1, Return: nvml.ERROR_INSUFFICIENT_RESOURCES}); err != nil {
		t.Fatal(err)
	}
	_, ret = g.CreateComputeInstance(&info)
	wantRet(t, "CreateComputeInstance with a fault", ret, nvml.ERROR_INSUFFICIENT_RESOURCES)
	ci, ret := g.CreateComputeInstance(&info)
	must(t, "CreateComputeInstance after the fault", ret)
	if err := s.InjectFault(Fault{Op: "ComputeInstance.Destroy", Nth: 1, Return: nvml.ERROR_UNKNOWN}); err != nil {
		t.Fatal(err)
	}
	wantRet(t, "ComputeInstance.Destroy with a fault", ci.Destroy(), nvml.ERROR_UNKNOWN)
	must(t, "ComputeInstance.Destroy after the fault", ci.Destroy())

	// ResetGPU.
	if err := s.InjectFault(Fault{Op: "ResetGPU", Nth: 1, Return: nvml.ERROR_GPU_IS_LOST}); err != nil {
		t.Fatal(err)
	}
	if err := s.ResetGPU(0); !errors.Is(err, nvml.ERROR_GPU_IS_LOST) {
		t.Errorf("ResetGPU with a fault: %v, want ERROR_GPU_IS_LOST", err)
	}
	if n := len(s.Snapshot().GPUs[0].GPUInstances); n != 1 {
		t.Errorf("failed reset destroyed GIs: %d left", n)
	}
	if f := s.Snapshot().Faults; len(f) != 0 {
		t.Errorf("ResetGPU fault still pending: %+v", f)
	}
	if err := s.ResetGPU(0); err != nil {
		t.Errorf("ResetGPU after the fault: %v", err)
	}
}

func TestLie(t *testing.T) {
	s := newTestSim(t, Config{Spec: "1xA100-PCIE-80GB"})
	d := migOn(t, s, 0)

	// A lying GI destroy leaves the GI.
	g := mustGI(t, d, nvml.GPU_INSTANCE_PROFILE_3_SLICE, 0)
	if err := s.InjectFault(Fault{Op: "GpuInstance.Destroy", Nth: 1, Lie: true}); err != nil {
		t.Fatal(err)
	}
	must(t, "lying GpuInstance.Destroy", g.Destroy())
	if _, ret := d.GetGpuInstanceById(1); ret != nvml.SUCCESS {
		t.Errorf("GI 1 gone after a lying destroy: %v", ret)
	}
	if _, ret := g.GetInfo(); ret != nvml.SUCCESS {
		t.Errorf("handle stale after a lying destroy: %v", ret)
	}
	must(t, "real GpuInstance.Destroy", g.Destroy())
	if _, ret := d.GetGpuInstanceById(1); ret != nvml.ERROR_NOT_FOUND {
		t.Errorf("GI 1 after the real destroy: %v, want NOT_FOUND", ret)
	}

	// A lying CI destroy leaves the CI (and the MIG device).
	g, ci := mustMIG(t, d, nvml.GPU_INSTANCE_PROFILE_2_SLICE, 0)
	if err := s.InjectFault(Fault{Op: "ComputeInstance.Destroy", Nth: 1, Lie: true}); err != nil {
		t.Fatal(err)
	}
	must(t, "lying ComputeInstance.Destroy", ci.Destroy())
	if _, ret := d.GetMigDeviceHandleByIndex(0); ret != nvml.SUCCESS {
		t.Errorf("MIG device gone after a lying CI destroy: %v", ret)
	}
	wantRet(t, "GI destroy while the CI still exists", g.Destroy(), nvml.ERROR_IN_USE)

	// A lying create returns a handle to nothing.
	if err := s.InjectFault(Fault{Op: "CreateGpuInstanceWithPlacement", Nth: 1, Lie: true}); err != nil {
		t.Fatal(err)
	}
	before := layout(s, 0)
	phantom, ret := createGI(d, nvml.GPU_INSTANCE_PROFILE_3_SLICE, 4)
	must(t, "lying CreateGpuInstanceWithPlacement", ret)
	if after := layout(s, 0); after != before {
		t.Errorf("lying create changed the layout %q -> %q", before, after)
	}
	_, ret = phantom.GetInfo()
	wantRet(t, "GetInfo of the phantom GI", ret, nvml.ERROR_INVALID_ARGUMENT)

	// A lying SetMigMode changes nothing.
	if err := s.InjectFault(Fault{Op: "SetMigMode", Nth: 1, Lie: true}); err != nil {
		t.Fatal(err)
	}
	must(t, "ComputeInstance.Destroy", ci.Destroy())
	must(t, "GpuInstance.Destroy", g.Destroy())
	if diff := cmp.Diff(modeStep{nvml.SUCCESS, nvml.SUCCESS, 1, 1}, setMode(t, d, nvml.DEVICE_MIG_DISABLE)); diff != "" {
		t.Errorf("lying SetMigMode(DISABLE) (-want +got):\n%s", diff)
	}
}
