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

// TestReleaseOrphanAfterRenumbering: a process runs on the MIG device a
// claim was prepared with on GPU 1; GPU 0 leaves the node and the restarted
// plugin reads the board as GPU 0, its device named gpu-0-... now. The
// claim, gone from the API, is not released (a lookup by the recorded name
// found nothing and took the device for idle), so a second claim allocated
// the device under its new name is refused.
func TestReleaseOrphanAfterRenumbering(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	sim, m := gputest.Simulated(t, nvmlsim.Config{Spec: "2xA100-SXM4-80GB", Seed: t.Name()})
	if _, err := m.SetMIGMode(ctx, 1, true); err != nil {
		t.Fatal(err)
	}
	md, err := m.CreateMIGDevice(ctx, 1, mig.MustParseLayout("3g.40gb@0")[0])
	if err != nil {
		t.Fatal(err)
	}
	gpus, _ := m.GPUs(ctx)
	dir := t.TempDir()
	hostRoot := filepath.Join(dir, "host")
	if err := WriteFakeCapabilities(hostRoot, gpus[1].Minor, md); err != nil {
		t.Fatal(err)
	}
	cfg := Config{NodeName: node, GPUs: m, Locks: gpulock.New(), CDIDir: filepath.Join(dir, "cdi"),
		CheckpointDir: filepath.Join(dir, "plugin"), HostRoot: hostRoot}
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	first := claim("uid-1", "first", alloc{"gpu", slices.DefaultDriverName, node, "gpu-1-mig-3g40gb-9-0"})
	if r, _ := p.PrepareResourceClaims(ctx, []*resourceapi.ResourceClaim{first}); r[first.UID].Err != nil {
		t.Fatalf("claim 1: %v", r[first.UID].Err)
	}
	if _, err := sim.StartProcess(md.UUID, 1024); err != nil {
		t.Fatal(err)
	}
	renumbered, err := gpu.NewNVML(gputest.WithoutGPU{Interface: sim, Gone: 0}, mig.DefaultCatalog())
	if err != nil {
		t.Fatal(err)
	}
	cfg.GPUs, cfg.Locks = renumbered, gpulock.New()
	p, err = New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	_, released, err := p.ReleaseOrphan(ctx, "uid-1", nil)
	if released || !errors.Is(err, ErrOrphanInUse) {
		t.Errorf("ReleaseOrphan of claim 1 = released %v, error %v; want kept, ErrOrphanInUse (a process runs on %s)", released, err, md.UUID)
	}
	second := claim("uid-2", "second", alloc{"gpu", slices.DefaultDriverName, node, "gpu-0-mig-3g40gb-9-0"})
	r, _ := p.PrepareResourceClaims(ctx, []*resourceapi.ResourceClaim{second})
	if r[second.UID].Err == nil {
		t.Errorf("claim 2 prepared device %s while claim 1's process runs on it", md.UUID)
	}
}
