package plugin

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/klog/v2/ktesting"

	"github.com/miglayout/miglayout/pkg/gpulock"
	"github.com/miglayout/miglayout/pkg/mig"
	"github.com/miglayout/miglayout/pkg/mig/gpu"
	"github.com/miglayout/miglayout/pkg/mig/gpu/gputest"
	"github.com/miglayout/miglayout/pkg/mig/nvmlsim"
	"github.com/miglayout/miglayout/pkg/slices"
)

// renumberRig is a node of two A100s whose plugin prepared claim uid-1
// ("first") with board B's 3g.40gb@0 (md), named gpu-1-mig-3g40gb-9-0.
type renumberRig struct {
	ctx context.Context
	sim *nvmlsim.Sim
	md  gpu.MIGDevice
	cfg Config
}

func newRenumberRig(t *testing.T) *renumberRig {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	sim, m := gputest.Simulated(t, nvmlsim.Config{Spec: "2xA100-SXM4-80GB", Seed: t.Name()})
	if _, err := m.SetMIGMode(ctx, 1, true); err != nil {
		t.Fatal(err)
	}
	md, err := m.CreateMIGDevice(ctx, 1, mig.MustParseLayout("3g.40gb@0")[0])
	if err != nil {
		t.Fatal(err)
	}
	gpus, err := m.GPUs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	hostRoot := filepath.Join(dir, "host")
	if err := WriteFakeCapabilities(hostRoot, gpus[1].Minor, md); err != nil {
		t.Fatal(err)
	}
	r := &renumberRig{ctx: ctx, sim: sim, md: md, cfg: Config{NodeName: node, GPUs: m, Locks: gpulock.New(), CDIDir: filepath.Join(dir, "cdi"),
		CheckpointDir: filepath.Join(dir, "plugin"), HostRoot: hostRoot}}
	p, err := New(r.cfg)
	if err != nil {
		t.Fatal(err)
	}
	first := claim("uid-1", "first", alloc{"gpu", slices.DefaultDriverName, node, "gpu-1-mig-3g40gb-9-0"})
	if res, _ := p.PrepareResourceClaims(ctx, []*resourceapi.ResourceClaim{first}); res[first.UID].Err != nil {
		t.Fatalf("claim 1: %v", res[first.UID].Err)
	}
	return r
}

// renumbered is the plugin restarted once GPU 0 was taken off the node
// without a reboot: NVML numbers board B 0, and the device claim 1 holds
// is published as gpu-0-mig-3g40gb-9-0.
func (r *renumberRig) renumbered(t *testing.T) *Plugin {
	t.Helper()
	m, err := gpu.NewNVML(gputest.WithoutGPU{Interface: r.sim, Gone: 0}, mig.DefaultCatalog())
	if err != nil {
		t.Fatal(err)
	}
	cfg := r.cfg
	cfg.GPUs, cfg.Locks = m, gpulock.New()
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestPrepareRefusesADeviceHeldUnderItsOldName: claim 1 is prepared with
// board B's 3g.40gb@0 as gpu-1-mig-3g40gb-9-0. GPU 0 is taken off the node
// without a reboot and the agent restarts: NVML numbers B 0, and the same
// device is published as gpu-0-mig-3g40gb-9-0, which no allocation names.
// A second claim allocated that name is refused (ErrAlreadyPrepared): one
// MIG device is never prepared for two claims, whatever its name.
func TestPrepareRefusesADeviceHeldUnderItsOldName(t *testing.T) {
	r := newRenumberRig(t)
	p := r.renumbered(t)
	second := claim("uid-2", "second", alloc{"gpu", slices.DefaultDriverName, node, "gpu-0-mig-3g40gb-9-0"})
	res, _ := p.PrepareResourceClaims(r.ctx, []*resourceapi.ResourceClaim{second})
	if err := res[second.UID].Err; !errors.Is(err, ErrAlreadyPrepared) {
		t.Errorf("claim 2, allocated the device claim 1 holds under its new name: %v, want %v", err, ErrAlreadyPrepared)
	}
	if held := p.PreparedUUIDs(); !held.Has(r.md.UUID) || held.Len() != 1 {
		t.Errorf("prepared UUIDs %v, want only claim 1's %s", sets.List(held), r.md.UUID)
	}
}

// TestHealthAfterRenumbering: GPU 0 was taken off the node without a
// reboot and the agent restarted: the device claim 1 holds is on its board
// still, under a new name, and is reported Healthy (found by UUID); once
// destroyed there, Unhealthy.
func TestHealthAfterRenumbering(t *testing.T) {
	for name, tc := range map[string]struct {
		destroy bool
		want    kubeletplugin.HealthStatus
	}{
		"on its board":           {want: kubeletplugin.HealthStatusHealthy},
		"destroyed on its board": {destroy: true, want: kubeletplugin.HealthStatusUnhealthy},
	} {
		t.Run(name, func(t *testing.T) {
			r := newRenumberRig(t)
			p := r.renumbered(t)
			if tc.destroy {
				if err := p.cfg.GPUs.DestroyMIGDevice(r.ctx, 0, r.md.Device()); err != nil {
					t.Fatal(err)
				}
			}
			report := p.healthReport(r.ctx, time.Minute)
			if len(report.Devices) != 1 {
				t.Fatalf("report %+v, want claim 1's device", report)
			}
			if h := report.Devices[0]; h.DeviceName != "gpu-1-mig-3g40gb-9-0" || h.Health != tc.want {
				t.Errorf("%s: %s (%q), want %s", h.DeviceName, h.Health, h.Message, tc.want)
			}
		})
	}
}

// TestXidHealthAfterRenumbering: after NVML numbered the GPUs anew, claim
// 1's device (on board B, index 0 now) is hit by a GPU-wide Xid on B, found
// by B's UUID, and not by one on another board at the index B had when the
// device was prepared.
func TestXidHealthAfterRenumbering(t *testing.T) {
	for name, tc := range map[string]struct {
		onB  bool
		want kubeletplugin.HealthStatus
	}{
		"on its board, at its new index":     {onB: true, want: kubeletplugin.HealthStatusUnhealthy},
		"on another board, at its old index": {want: kubeletplugin.HealthStatusHealthy},
	} {
		t.Run(name, func(t *testing.T) {
			r := newRenumberRig(t)
			p := r.renumbered(t)
			gpus, err := p.cfg.GPUs.GPUs(r.ctx)
			if err != nil {
				t.Fatal(err)
			}
			x := gpu.Xid{GPUIndex: 0, GPUUUID: gpus[0].UUID, Code: 48, GIID: -1, CIID: -1}
			if !tc.onB {
				// Another board, numbered 1 (B's index when the device was
				// prepared).
				x = gpu.Xid{GPUIndex: 1, GPUUUID: "GPU-another-board", Code: 48, GIID: -1, CIID: -1}
			}
			p.recordXid(r.ctx, x)
			report := p.healthReport(r.ctx, time.Minute)
			if len(report.Devices) != 1 {
				t.Fatalf("report %+v, want claim 1's device", report)
			}
			if h := report.Devices[0]; h.Health != tc.want {
				t.Errorf("%s: %s (%q), want %s", h.DeviceName, h.Health, h.Message, tc.want)
			}
		})
	}
}
