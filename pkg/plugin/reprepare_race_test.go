package plugin

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/miglayout/miglayout/pkg/mig"
	"github.com/miglayout/miglayout/pkg/mig/gpu"
	"github.com/miglayout/miglayout/pkg/slices"
)

// pausingGPUs holds the first MIGDevices read after it is armed until
// released: a prepare caught between reading its record and writing its
// CDI spec.
type pausingGPUs struct {
	gpu.Manager
	armed            atomic.Bool
	reached, release chan struct{}
}

func (h *pausingGPUs) MIGDevices(ctx context.Context, idx int) ([]gpu.MIGDevice, error) {
	r, err := h.Manager.MIGDevices(ctx, idx)
	if h.armed.CompareAndSwap(true, false) {
		close(h.reached)
		<-h.release
	}
	return r, err
}

// pausedPrepare prepares c once, then starts the kubelet's second prepare
// of it and returns once that prepare reads NVML, with the channel its
// error comes on after release is closed.
func pausedPrepare(t *testing.T, e *env, c *resourceapi.ResourceClaim) (*Plugin, *pausingGPUs, chan error) {
	t.Helper()
	h := &pausingGPUs{Manager: e.gpus, reached: make(chan struct{}), release: make(chan struct{})}
	p, err := New(Config{NodeName: node, GPUs: h, Locks: e.locks, CDIDir: e.cdiDir, CheckpointDir: e.cpDir, HostRoot: e.hostRoot})
	if err != nil {
		t.Fatal(err)
	}
	if r := e.prepare(p, c); r.Err != nil {
		t.Fatal(r.Err)
	}
	h.armed.Store(true)
	done := make(chan error, 1)
	go func() {
		res, err := p.PrepareResourceClaims(e.ctx, []*resourceapi.ResourceClaim{c})
		if err == nil {
			err = res[c.UID].Err
		}
		done <- err
	}()
	<-h.reached
	return p, h, done
}

// TestKubeletPrepareAgainWhileRefreshed: the kubelet prepares a prepared
// claim again while the agent, seeing its MIG device created again (a GPU
// reset), records the new device and writes its CDI spec. The kubelet's
// prepare, which read the old record, does not write the spec back to the
// destroyed device: it fails (the kubelet retries) and the spec names the
// device the checkpoint records; the retry answers with it.
func TestKubeletPrepareAgainWhileRefreshed(t *testing.T) {
	d := mig.Device{Profile: "1g.10gb", Start: 3}
	e := newEnv(t)
	c := claim(uid1, "infer", alloc{"mig", slices.DefaultDriverName, node, "gpu-0-mig-1g10gb-19-3"})
	p, h, done := pausedPrepare(t, e, c)
	old := p.claims[uid1].Devices[0].UUID
	if err := e.gpus.DestroyMIGDevice(e.ctx, 0, d); err != nil {
		t.Fatal(err)
	}
	made := e.createMIG(d)
	if failed := p.RefreshRecreated(e.ctx); len(failed) > 0 {
		t.Fatal(failed)
	}
	close(h.release)
	if err := <-done; !errors.Is(err, errSuperseded) {
		t.Errorf("the kubelet's prepare from the replaced record: %v, want it to fail as superseded", err)
	}
	spec := string(mustRead(t, filepath.Join(e.cdiDir, specName(slices.DefaultDriverName, uid1))))
	if got := p.claims[uid1].Devices[0].UUID; got != made.UUID || !strings.Contains(spec, made.UUID) || strings.Contains(spec, old) {
		t.Errorf("checkpoint records %s, the spec names the new device %s: %t, the destroyed %s: %t; want the new one in both",
			got, made.UUID, strings.Contains(spec, made.UUID), old, strings.Contains(spec, old))
	}
	if r := e.prepare(p, c); r.Err != nil {
		t.Errorf("the kubelet's retry: %v", r.Err)
	}
}

// TestKubeletPrepareAgainWhileReleased: the kubelet prepares a prepared
// claim again while the orphan sweep releases it. The prepare does not
// answer success for a claim the checkpoint no longer holds (its device
// unprotected, its spec left behind); it fails, and the kubelet's retry
// prepares it afresh.
func TestKubeletPrepareAgainWhileReleased(t *testing.T) {
	e := newEnv(t)
	c := claim(uid1, "infer", alloc{"mig", slices.DefaultDriverName, node, "gpu-0-mig-1g10gb-19-3"})
	p, h, done := pausedPrepare(t, e, c)
	if _, released, err := p.ReleaseOrphan(e.ctx, uid1, nil); !released || err != nil {
		t.Fatal(released, err)
	}
	close(h.release)
	err := <-done
	_, recorded := p.claims[uid1]
	_, specErr := os.Stat(filepath.Join(e.cdiDir, specName(slices.DefaultDriverName, uid1)))
	if err == nil || recorded || specErr == nil {
		t.Errorf("prepare of a released claim: %v, in the checkpoint %t, spec written %t; want an error, neither", err, recorded, specErr == nil)
	}
	if r := e.prepare(p, c); r.Err != nil {
		t.Errorf("the kubelet's retry: %v", r.Err)
	}
	if _, ok := p.PreparedDevices()["gpu-0-mig-1g10gb-19-3"]; !ok {
		t.Errorf("after the retry the device is not protected: %v", p.PreparedDevices())
	}
}

// TestPrepareAgainFollowsTheGPUMinor: a whole GPU prepared as
// /dev/nvidia7 (its device minor then) and found at the same index with the
// same UUID but another minor (the driver's probe order changed with a GPU
// removed) is prepared afresh: the spec names the GPU's node now, not the
// recorded one, which may be another GPU's.
func TestPrepareAgainFollowsTheGPUMinor(t *testing.T) {
	e := newEnv(t)
	p := e.plugin("")
	c := claim(uid1, "whole", alloc{"gpu", slices.DefaultDriverName, node, "gpu-1"})
	if r := e.prepare(p, c); r.Err != nil {
		t.Fatal(r.Err)
	}
	pc := p.claims[uid1]
	pc.Devices[0].DeviceNodes = []string{"/dev/nvidia7"}
	p.claims[uid1] = pc
	if err := writeCheckpoint(p.checkpointPath, p.claims); err != nil {
		t.Fatal(err)
	}
	restarted := e.plugin("")
	if r := e.prepare(restarted, c); r.Err != nil {
		t.Fatal(r.Err)
	}
	gpus, err := e.gpus.GPUs(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	spec := string(mustRead(t, filepath.Join(e.cdiDir, specName(slices.DefaultDriverName, uid1))))
	if want := gpuDeviceNode(gpus[1].Minor); strings.Contains(spec, "/dev/nvidia7") || !strings.Contains(spec, `"`+want+`"`) {
		t.Errorf("spec names /dev/nvidia7: %t, the GPU's %s: %t", strings.Contains(spec, "/dev/nvidia7"), want, strings.Contains(spec, `"`+want+`"`))
	}
	if got := restarted.claims[uid1].Devices[0].DeviceNodes; !strings.Contains(strings.Join(got, ","), gpuDeviceNode(gpus[1].Minor)) {
		t.Errorf("checkpoint records device nodes %v", got)
	}
}

// TestFakeCapabilitiesReadWhileWritten: simulated nodes write their MIG
// devices' capability files on every NVML read; a prepare reading one
// meanwhile never sees it empty or cut short.
func TestFakeCapabilitiesReadWhileWritten(t *testing.T) {
	dir := t.TempDir()
	d := gpu.MIGDevice{GIID: 1, CIID: 0}
	if err := WriteFakeCapabilities(dir, 0, d); err != nil {
		t.Fatal(err)
	}
	path := capabilityPath(dir, 0, 1, 0)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if err := WriteFakeCapabilities(dir, 0, d); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	fails := 0
	var first error
	for range 20000 {
		if _, err := readCapabilityMinor(path); err != nil {
			if fails++; first == nil {
				first = err
			}
		}
	}
	close(stop)
	wg.Wait()
	if fails > 0 {
		t.Errorf("%d of 20000 reads beside the writes failed, the first: %v", fails, first)
	}
}
