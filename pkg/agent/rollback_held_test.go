package agent

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/miglayout/miglayout/api/v1alpha1"
	"github.com/miglayout/miglayout/pkg/mig"
	"github.com/miglayout/miglayout/pkg/mig/nvmlsim"
)

// removeCI destroys the compute instance of the 3g GPU instance at start on
// GPU idx behind the agent's back (nvidia-smi mig -dci), leaving the GPU
// instance.
func (g *rig) removeCI(t *testing.T, idx, start int) {
	t.Helper()
	for _, gi := range g.gis3g(t, idx) {
		info, ret := gi.GetInfo()
		if ret != nvml.SUCCESS {
			t.Fatal(ret)
		}
		if int(info.Placement.Start) != start {
			continue
		}
		for _, ci := range mustCIs(t, gi) {
			if ret := ci.Destroy(); ret != nvml.SUCCESS {
				t.Fatal(ret)
			}
		}
		return
	}
	t.Fatalf("no 3g GPU instance at %d on GPU %d", start, idx)
}

// TestRollbackLeavesHeldGPUInstance: a GPU instance whose compute instance
// another tool removed, while a claim allocates its device or the kubelet
// plugin holds it prepared, is not destroyed: the GPU is Blocked on it
// (DeviceInUse, naming the device), and rolled back and made whole again
// once the claim lets it go.
func TestRollbackLeavesHeldGPUInstance(t *testing.T) {
	const held = "gpu-0-mig-3g40gb-9-4"
	for name, hold := range map[string]func(g *rig){
		"allocated": func(g *rig) { g.alloc.cached, g.alloc.live = sets.New(held), sets.New(held) },
		"prepared":  func(g *rig) { g.prep.names.Insert(held) },
	} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			g := newRig(t, "1xA100-SXM4-80GB")
			g.setup(t, 0, "3g.40gb@0,3g.40gb@4")
			hold(g)
			g.removeCI(t, 0, 4)
			want := []v1alpha1.GPUSpec{spec(0, "3g.40gb@0,3g.40gb@4")}
			res, err := g.r.Sync(ctx, want, nil)
			if err != nil {
				t.Fatal(err)
			}
			got := res.Results[0]
			if got.Phase != v1alpha1.PhaseBlocked || got.Reason != v1alpha1.ReasonDeviceInUse || !strings.Contains(got.Message, held) {
				t.Errorf("result %+v, want Blocked/DeviceInUse naming %s", got, held)
			}
			gis := g.sim.Snapshot().GPUs[0].GPUInstances
			if len(gis) != 2 {
				t.Fatalf("%d GPU instances, want both kept (the held one without its compute instance)", len(gis))
			}

			g.alloc.cached, g.alloc.live = nil, nil
			g.prep.names.Delete(held)
			if res, err = g.r.Sync(ctx, want, nil); err != nil {
				t.Fatal(err)
			}
			if got := res.Results[0]; got.Phase != v1alpha1.PhaseReady {
				t.Errorf("result once released %+v, want Ready", got)
			}
			for _, gi := range g.sim.Snapshot().GPUs[0].GPUInstances {
				if len(gi.ComputeInstances) != 1 {
					t.Errorf("GI at %d has %d compute instances once released, want 1", gi.Placement.Start, len(gi.ComputeInstances))
				}
			}
		})
	}
}

// TestRollbackReadsAgainUnderLock: one NVML answer that makes a sound GPU
// instance read as one without its compute instance (NOT_SUPPORTED for the
// full-size compute instance profile, at any of the pass's first reads)
// destroys nothing, whether or not its device is in use: the rollback reads
// the GPU again under the lock.
func TestRollbackReadsAgainUnderLock(t *testing.T) {
	for _, allocated := range []bool{false, true} {
		for nth := 1; nth <= 4; nth++ {
			t.Run(fmt.Sprintf("allocated=%v/read%d", allocated, nth), func(t *testing.T) {
				ctx := context.Background()
				g := newRig(t, "1xA100-SXM4-80GB")
				g.setup(t, 0, "3g.40gb@0,3g.40gb@4")
				if allocated {
					const held = "gpu-0-mig-3g40gb-9-4"
					g.alloc.cached, g.alloc.live = sets.New(held), sets.New(held)
				}
				before := []string{g.migUUID(t, 0, "3g.40gb@0"), g.migUUID(t, 0, "3g.40gb@4")}
				if err := g.sim.InjectFault(nvmlsim.Fault{Op: "GpuInstance.GetComputeInstanceProfileInfo", Nth: nth, Return: nvml.ERROR_NOT_SUPPORTED}); err != nil {
					t.Fatal(err)
				}
				want := []v1alpha1.GPUSpec{spec(0, "3g.40gb@0,3g.40gb@4")}
				for range 2 {
					if _, err := g.r.Sync(ctx, want, nil); err != nil {
						t.Fatal(err)
					}
				}
				after := []string{g.migUUID(t, 0, "3g.40gb@0"), g.migUUID(t, 0, "3g.40gb@4")}
				if before[0] != after[0] || before[1] != after[1] {
					t.Errorf("MIG devices destroyed and made again on one odd read: UUIDs %v, then %v", before, after)
				}
			})
		}
	}
}

// TestRollbackAsksAPIServerBeforeDestroying: a claim allocated the device
// a moment ago, which the informer cache does not show yet: the rollback
// reads the allocations live before it destroys a GPU instance, and leaves
// this one.
func TestRollbackAsksAPIServerBeforeDestroying(t *testing.T) {
	const held = "gpu-0-mig-3g40gb-9-4"
	g := newRig(t, "1xA100-SXM4-80GB")
	g.setup(t, 0, "3g.40gb@0,3g.40gb@4")
	g.alloc.cached, g.alloc.live = sets.New[string](), sets.New(held)
	g.removeCI(t, 0, 4)
	before := g.sim.Snapshot().GPUs[0].GPUInstances
	res, err := g.r.Sync(context.Background(), []v1alpha1.GPUSpec{spec(0, "3g.40gb@0,3g.40gb@4")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Results[0]; got.Phase != v1alpha1.PhaseBlocked || !strings.Contains(got.Message, held) {
		t.Errorf("result %+v, want Blocked naming %s", got, held)
	}
	if diff := cmp.Diff(before, g.sim.Snapshot().GPUs[0].GPUInstances); diff != "" {
		t.Errorf("GPU instances changed (-before +after):\n%s", diff)
	}
}

// TestRollbackOwnCreateOfHeldDevice: a GPU reset destroyed a device a
// running pod's claim holds (allocated and prepared); the agent, making it
// again, was killed between its GPU instance and its compute instance. The
// half-made GPU instance is the journal's create in flight, which no
// container can have used: the new process rolls it back and makes the
// device whole under its name, rather than keep the GPU Blocked until a
// claim lets go whose pod waits for that very device.
func TestRollbackOwnCreateOfHeldDevice(t *testing.T) {
	const held = "gpu-0-mig-3g40gb-9-4"
	ctx := context.Background()
	g := newRig(t, "1xA100-SXM4-80GB")
	g.setup(t, 0, "3g.40gb@0,3g.40gb@4")
	g.alloc.cached, g.alloc.live = sets.New(held), sets.New(held)
	g.prep.names.Insert(held)
	// The GPU reset: the held device is gone.
	if err := g.mgr.DestroyMIGDevice(ctx, 0, mig.MustParseLayout("3g.40gb@4")[0]); err != nil {
		t.Fatal(err)
	}
	// What a pass leaves when killed inside CreateMIGDevice, after the GPU
	// instance, before the compute instance.
	g.orphan3g(t, 0, 4)
	if err := g.r.Journal.Record(JournalEntry{GPU: 0, UUID: g.sim.Snapshot().GPUs[0].UUID, Step: StepCreating,
		Desired: "3g.40gb@0,3g.40gb@4", Create: []string{"3g.40gb@4"}}); err != nil {
		t.Fatal(err)
	}
	g.restart(t)
	want := []v1alpha1.GPUSpec{spec(0, "3g.40gb@0,3g.40gb@4")}
	var got GPUResult
	for range 2 {
		res, err := g.r.Sync(ctx, want, nil)
		if err != nil {
			t.Fatal(err)
		}
		got = res.Results[0]
	}
	if got.Phase != v1alpha1.PhaseReady {
		t.Errorf("result %+v, want Ready (the device made whole)", got)
	}
	gis := g.sim.Snapshot().GPUs[0].GPUInstances
	var starts []int
	for _, gi := range gis {
		starts = append(starts, int(gi.Placement.Start))
		if len(gi.ComputeInstances) != 1 {
			t.Errorf("GI at %d has %d compute instances, want 1", gi.Placement.Start, len(gi.ComputeInstances))
		}
	}
	if diff := cmp.Diff([]int{0, 4}, starts, cmpopts.SortSlices(func(a, b int) bool { return a < b })); diff != "" {
		t.Errorf("GPU instances at starts (-want +got):\n%s", diff)
	}
	if n := len(g.r.Journal.Entries()); n != 0 {
		t.Errorf("journal holds %d entries, want none once converged", n)
	}
}
