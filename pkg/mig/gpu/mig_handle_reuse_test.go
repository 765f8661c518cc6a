package gpu_test

import (
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/google/go-cmp/cmp"

	"github.com/miglayout/miglayout/pkg/mig"
	"github.com/miglayout/miglayout/pkg/mig/gpu"
	"github.com/miglayout/miglayout/pkg/mig/gpu/gputest"
	"github.com/miglayout/miglayout/pkg/mig/nvmlsim"
)

// reuseNVML runs meanwhile once, before the first read named by op
// ("GetUUID" or "GetComputeRunningProcesses") through a MIG device handle:
// there another goroutine of the process changes the GPU.
type reuseNVML struct {
	nvml.Interface
	op        string
	meanwhile func()
}

type reuseGPU struct {
	nvml.Device
	n *reuseNVML
}

type reuseMIG struct {
	nvml.Device
	n *reuseNVML
}

func (n *reuseNVML) DeviceGetHandleByIndex(i int) (nvml.Device, nvml.Return) {
	d, ret := n.Interface.DeviceGetHandleByIndex(i)
	if ret != nvml.SUCCESS {
		return d, ret
	}
	return reuseGPU{Device: d, n: n}, ret
}

func (g reuseGPU) GetMigDeviceHandleByIndex(j int) (nvml.Device, nvml.Return) {
	h, ret := g.Device.GetMigDeviceHandleByIndex(j)
	if ret != nvml.SUCCESS {
		return h, ret
	}
	return reuseMIG{Device: h, n: g.n}, ret
}

func (n *reuseNVML) before(op string) {
	if f := n.meanwhile; f != nil && op == n.op {
		n.meanwhile = nil
		f()
	}
}

func (h reuseMIG) GetUUID() (string, nvml.Return) {
	h.n.before("GetUUID")
	return h.Device.GetUUID()
}

func (h reuseMIG) GetComputeRunningProcesses() ([]nvml.ProcessInfo, nvml.Return) {
	h.n.before("GetComputeRunningProcesses")
	return h.Device.GetComputeRunningProcesses()
}

// TestReadsThroughAReusedMIGDeviceHandle: NVML may reuse a MIG device
// handle for another MIG device once the process asks for the handle of
// its index again (nvml.h, nvmlDeviceGetMigDeviceHandleByIndex). Where the
// agent's own repartitioning does so while a read of the GPU holds the
// handles it listed, the read is made again: no GPU instance is reported
// with another MIG device's UUID, and no process on another MIG device.
func TestReadsThroughAReusedMIGDeviceHandle(t *testing.T) {
	a, b := mig.Device{Profile: "2g.20gb", Start: 0}, mig.Device{Profile: "2g.20gb", Start: 2}
	small := mig.Device{Profile: "1g.10gb", Start: 0}
	for _, op := range []string{"GetUUID", "GetComputeRunningProcesses"} {
		t.Run(op, func(t *testing.T) {
			n := &reuseNVML{op: op}
			sim, m := gputest.SimulatedOver(t, nvmlsim.Config{Spec: "1xH100-SXM5-80GB", Seed: t.Name()},
				func(l nvml.Interface) nvml.Interface { n.Interface = l; return n })
			ctx := t.Context()
			if _, err := m.SetMIGMode(ctx, 0, true); err != nil {
				t.Fatal(err)
			}
			for _, d := range []mig.Device{a, b} {
				if _, err := m.CreateMIGDevice(ctx, 0, d); err != nil {
					t.Fatal(err)
				}
			}
			devs, err := m.MIGDevices(ctx, 0)
			if err != nil {
				t.Fatal(err)
			}
			pid, err := sim.StartProcess(devs[1].UUID, 256) // on b
			if err != nil {
				t.Fatal(err)
			}
			// a (GI 3, MIG device 0) makes way for 1g.10gb@0 (GI 9, MIG
			// device 1): b's handle, MIG device 1 when listed, is 1g's once
			// the create lists the MIG devices again.
			n.meanwhile = func() {
				if err := m.DestroyMIGDevice(ctx, 0, a); err != nil {
					t.Fatal(err)
				}
				if _, err := m.CreateMIGDevice(ctx, 0, small); err != nil {
					t.Fatal(err)
				}
			}
			truth := map[string]mig.Device{}
			if op == "GetUUID" {
				if devs, err = m.MIGDevices(ctx, 0); err != nil {
					t.Fatalf("MIGDevices: %v", err)
				}
				for _, gi := range sim.Snapshot().GPUs[0].GPUInstances {
					for _, ci := range gi.ComputeInstances {
						truth[ci.UUID] = mig.Device{Profile: gi.Profile, Start: gi.Placement.Start}
					}
				}
				for _, d := range devs {
					if got, want := truth[d.UUID], (mig.Device{Profile: d.Profile, Start: d.Placement.Start}); got != want {
						t.Errorf("%s reported with the UUID of %s", want, got)
					}
				}
				return
			}
			procs, err := m.MIGProcesses(ctx, 0)
			if err != nil {
				t.Fatalf("MIGProcesses: %v", err)
			}
			want := map[mig.Device][]gpu.Process{b: {{PID: pid, UsedMemoryMiB: 256}}}
			if diff := cmp.Diff(want, procs); diff != "" {
				t.Errorf("MIGProcesses (-want +got):\n%s", diff)
			}
		})
	}
}
