package plugin

import (
	"errors"
	"path/filepath"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/klog/v2/ktesting"

	"github.com/miglayout/miglayout/pkg/gpulock"
	"github.com/miglayout/miglayout/pkg/mig"
	"github.com/miglayout/miglayout/pkg/mig/gpu"
	"github.com/miglayout/miglayout/pkg/mig/gpu/gputest"
	"github.com/miglayout/miglayout/pkg/mig/nvmlsim"
	"github.com/miglayout/miglayout/pkg/slices"
)

// TestReleaseOrphanWholeGPUAfterRenumbering: a process runs on whole GPU 1
// (MIG off), prepared for a claim as gpu-1; GPU 0 leaves the node and the
// restarted plugin reads the board as GPU 0. The claim, gone from the API,
// is not released: the board is found by its UUID, not by the index it was
// prepared at (which names no GPU now, or another one).
func TestReleaseOrphanWholeGPUAfterRenumbering(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	sim, m := gputest.Simulated(t, nvmlsim.Config{Spec: "2xA100-SXM4-80GB", Seed: t.Name()})
	gpus, err := m.GPUs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cfg := Config{NodeName: node, GPUs: m, Locks: gpulock.New(), CDIDir: filepath.Join(dir, "cdi"),
		CheckpointDir: filepath.Join(dir, "plugin"), HostRoot: filepath.Join(dir, "host")}
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	first := claim("uid-1", "first", alloc{"gpu", slices.DefaultDriverName, node, slices.GPUDeviceName(1)})
	if res, _ := p.PrepareResourceClaims(ctx, []*resourceapi.ResourceClaim{first}); res[first.UID].Err != nil {
		t.Fatalf("claim 1: %v", res[first.UID].Err)
	}
	if _, err := sim.StartProcess(gpus[1].UUID, 1024); err != nil {
		t.Fatal(err)
	}
	renumbered, err := gpu.NewNVML(gputest.WithoutGPU{Interface: sim, Gone: 0}, mig.DefaultCatalog())
	if err != nil {
		t.Fatal(err)
	}
	cfg.GPUs, cfg.Locks = renumbered, gpulock.New()
	if p, err = New(cfg); err != nil {
		t.Fatal(err)
	}
	_, released, err := p.ReleaseOrphan(ctx, "uid-1", nil)
	if released || !errors.Is(err, ErrOrphanInUse) {
		t.Errorf("ReleaseOrphan of claim 1 = released %v, error %v; want kept, ErrOrphanInUse (a process runs on %s)", released, err, gpus[1].UUID)
	}
}
