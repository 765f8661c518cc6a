package agent

import (
	"context"
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/miglayout/miglayout/api/v1alpha1"
	"github.com/miglayout/miglayout/pkg/mig/gpu/gputest"
)

// splitGI makes, as an administrator would with nvidia-smi (mig -cgi 9 then
// -cci 0,0,0), a 3g.40gb GPU instance at start on GPU idx with three 1-slice
// compute instances (1c.3g.40gb), and returns their MIG device UUIDs.
func (g *rig) splitGI(t *testing.T, idx, start int) []string {
	t.Helper()
	gi := g.orphan3g(t, idx, start)
	ciInfo, ret := gi.GetComputeInstanceProfileInfo(nvml.COMPUTE_INSTANCE_PROFILE_1_SLICE, nvml.COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED)
	if ret != nvml.SUCCESS {
		t.Fatal(ret)
	}
	for range 3 {
		if _, ret := gi.CreateComputeInstance(&ciInfo); ret != nvml.SUCCESS {
			t.Fatal(ret)
		}
	}
	var uuids []string
	for _, sgi := range g.sim.Snapshot().GPUs[idx].GPUInstances {
		if sgi.Placement.Start == start {
			for _, ci := range sgi.ComputeInstances {
				uuids = append(uuids, ci.UUID)
			}
		}
	}
	if len(uuids) != 3 {
		t.Fatalf("split GI has %d compute instances, want 3", len(uuids))
	}
	return uuids
}

// TestSyncGIWithSmallerComputeInstances: on a GPU the spec manages, an
// administrator split a 3g.40gb into three 1c.3g.40gb compute instances. A
// process on one of them keeps the whole GPU instance: it is not destroyed
// (NVML would refuse: the agent checks for processes first) and the GPU
// waits Blocked (DeviceInUse), naming it. Once the process ends, the next
// pass destroys the compute instances, then the GPU instance, and makes the
// layout.
func TestSyncGIWithSmallerComputeInstances(t *testing.T) {
	g := newRig(t, "1xA100-SXM4-80GB")
	g.setup(t, 0, "")
	uuids := g.splitGI(t, 0, 4)
	pid, err := g.sim.StartProcess(uuids[1], 512)
	if err != nil {
		t.Fatal(err)
	}
	want := []v1alpha1.GPUSpec{spec(0, "4g.40gb@0,2g.20gb@4,1g.10gb@6")}
	res, err := g.r.Sync(context.Background(), want, nil)
	if err != nil {
		t.Fatal(err)
	}
	gis := g.sim.Snapshot().GPUs[0].GPUInstances
	kept := false
	for _, gi := range gis {
		if gi.Placement.Start == 4 && gi.Profile == "3g.40gb" && len(gi.ComputeInstances) == 3 {
			kept = true
		}
	}
	if !kept {
		t.Fatalf("the split 3g.40gb@4 with a process on a compute instance was not kept whole: %+v", gis)
	}
	if got := res.Results[0]; got.Phase != v1alpha1.PhaseBlocked || got.Reason != v1alpha1.ReasonDeviceInUse || !res.Retry {
		t.Errorf("GPU 0 result %+v (retry %v), want Blocked, DeviceInUse, retried while the process runs", got, res.Retry)
	}
	if got := res.Results[0].Message; !strings.Contains(got, "3g.40gb@4") {
		t.Errorf("GPU 0 message %q does not name the GPU instance in use", got)
	}

	if err := g.sim.StopProcess(pid); err != nil {
		t.Fatal(err)
	}
	res, err = g.r.Sync(context.Background(), want, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := g.layouts(t)[0]; got != "4g.40gb@0,2g.20gb@4,1g.10gb@6" {
		t.Errorf("layout after the process ended %q, want 4g.40gb@0,2g.20gb@4,1g.10gb@6 (result %+v)", got, res.Results[0])
	}
	if got := res.Results[0]; got.Phase != v1alpha1.PhaseReady {
		t.Errorf("GPU 0 result %+v, want Ready", got)
	}
}

// TestSyncGIWithRev1ComputeInstance: on an H100 the spec manages, an
// administrator made a 2g.20gb GPU instance with the 1_SLICE_REV1 compute
// instance it offers (1c.2g.20gb, 26 SMs, the only one it then holds; a
// GPU instance that keeps it cannot be destroyed). While a process runs on
// it the GPU waits (Blocked, DeviceInUse); once the process ends, the next
// pass destroys it, then its GPU instance, and makes the layout.
func TestSyncGIWithRev1ComputeInstance(t *testing.T) {
	g := newRig(t, "1xH100-SXM5-80GB")
	g.setup(t, 0, "")
	gi := gputest.CreateGPUInstance(t, g.sim, 0, nvml.GPU_INSTANCE_PROFILE_2_SLICE, 0, 2)
	ciInfo, ret := gi.GetComputeInstanceProfileInfo(nvml.COMPUTE_INSTANCE_PROFILE_1_SLICE_REV1, nvml.COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED)
	if ret != nvml.SUCCESS {
		t.Fatal(ret)
	}
	if _, ret := gi.CreateComputeInstance(&ciInfo); ret != nvml.SUCCESS {
		t.Fatal(ret)
	}
	uuid := g.sim.Snapshot().GPUs[0].GPUInstances[0].ComputeInstances[0].UUID
	pid, err := g.sim.StartProcess(uuid, 512)
	if err != nil {
		t.Fatal(err)
	}
	want := []v1alpha1.GPUSpec{spec(0, "7g.80gb@0")}
	res, err := g.r.Sync(context.Background(), want, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Results[0]; got.Phase != v1alpha1.PhaseBlocked || got.Reason != v1alpha1.ReasonDeviceInUse || !strings.Contains(got.Message, "2g.20gb@0") {
		t.Errorf("GPU 0 result %+v, want Blocked, DeviceInUse, naming 2g.20gb@0", got)
	}
	if gis := g.sim.Snapshot().GPUs[0].GPUInstances; len(gis) != 1 || len(gis[0].ComputeInstances) != 1 {
		t.Fatalf("the 2g.20gb with a process on its compute instance was not kept: %+v", gis)
	}

	if err := g.sim.StopProcess(pid); err != nil {
		t.Fatal(err)
	}
	res, err = g.r.Sync(context.Background(), want, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Results[0]; got.Phase != v1alpha1.PhaseReady {
		t.Errorf("GPU 0 result %+v, want Ready", got)
	}
	g.wantLayouts(t, "7g.80gb@0")
}
