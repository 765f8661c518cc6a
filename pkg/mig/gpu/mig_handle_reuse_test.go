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
// with another MIG device's UUID, and no process on another MIG device,
// also where the new MIG device has the IDs of the one it replaced.
func TestReadsThroughAReusedMIGDeviceHandle(t *testing.T) {
	for name, tc := range map[string]struct {
		// held are made first, with a process on the last; replaced
		// gives way to by while a read holds the handles.
		held         []mig.Device
		replaced, by mig.Device
	}{
		// 2g.20gb@0 (GI 3, MIG device 0) makes way for 1g.10gb@0 (GI 9,
		// MIG device 1): 2g.20gb@2's handle, MIG device 1 when listed,
		// is the 1g's once the create lists the MIG devices again.
		"other IDs": {
			held:     []mig.Device{{Profile: "2g.20gb", Start: 0}, {Profile: "2g.20gb", Start: 2}},
			replaced: mig.Device{Profile: "2g.20gb", Start: 0}, by: mig.Device{Profile: "1g.10gb", Start: 0},
		},
		// 1g.20gb@0 takes 2g.20gb@0's GI ID (a GI ID follows from the
		// placement) and CI 0: the handle names the same IDs.
		"the same IDs": {
			held:     []mig.Device{{Profile: "2g.20gb", Start: 0}},
			replaced: mig.Device{Profile: "2g.20gb", Start: 0}, by: mig.Device{Profile: "1g.20gb", Start: 0},
		},
	} {
		for _, op := range []string{"GetUUID", "GetComputeRunningProcesses"} {
			t.Run(name+"/"+op, func(t *testing.T) {
				n := &reuseNVML{op: op}
				sim, m := gputest.SimulatedOver(t, nvmlsim.Config{Spec: "1xH100-SXM5-80GB", Seed: t.Name()},
					func(l nvml.Interface) nvml.Interface { n.Interface = l; return n })
				ctx := t.Context()
				if _, err := m.SetMIGMode(ctx, 0, true); err != nil {
					t.Fatal(err)
				}
				var last gpu.MIGDevice
				for _, d := range tc.held {
					md, err := m.CreateMIGDevice(ctx, 0, d)
					if err != nil {
						t.Fatal(err)
					}
					last = md
				}
				want := map[mig.Device][]gpu.Process{}
				if last.Device() != tc.replaced {
					pid, err := sim.StartProcess(last.UUID, 256)
					if err != nil {
						t.Fatal(err)
					}
					want[last.Device()] = []gpu.Process{{PID: pid, UsedMemoryMiB: 256}}
				}
				n.meanwhile = func() {
					if err := m.DestroyMIGDevice(ctx, 0, tc.replaced); err != nil {
						t.Fatal(err)
					}
					md, err := m.CreateMIGDevice(ctx, 0, tc.by)
					if err != nil {
						t.Fatal(err)
					}
					pid, err := sim.StartProcess(md.UUID, 128)
					if err != nil {
						t.Fatal(err)
					}
					want[tc.by] = []gpu.Process{{PID: pid, UsedMemoryMiB: 128}}
				}
				if op == "GetUUID" {
					devs, err := m.MIGDevices(ctx, 0)
					if err != nil {
						t.Fatalf("MIGDevices: %v", err)
					}
					truth := map[string]mig.Device{}
					for _, gi := range sim.Snapshot().GPUs[0].GPUInstances {
						for _, ci := range gi.ComputeInstances {
							truth[ci.UUID] = mig.Device{Profile: gi.Profile, Start: gi.Placement.Start}
						}
					}
					if len(devs) != len(truth) {
						t.Errorf("MIGDevices lists %d devices, NVML has %d", len(devs), len(truth))
					}
					for _, d := range devs {
						if got := truth[d.UUID]; got != d.Device() {
							t.Errorf("%s reported with the UUID of %s", d.Device(), got)
						}
					}
					return
				}
				procs, err := m.MIGProcesses(ctx, 0)
				if err != nil {
					t.Fatalf("MIGProcesses: %v", err)
				}
				if diff := cmp.Diff(want, procs); diff != "" {
					t.Errorf("MIGProcesses (-want +got):\n%s", diff)
				}
			})
		}
	}
}
