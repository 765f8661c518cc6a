package plugin

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/miglayout/miglayout/pkg/gpulock"
	"github.com/miglayout/miglayout/pkg/mig/gpu"
	"github.com/miglayout/miglayout/pkg/slices"
)

// A claim prepared with none of this driver's devices (all its results are
// another driver's), then allocated one of ours, drops a preparation that
// held nothing: the agent is not told devices were released.
func TestNoOnUnpreparedWhenDevicelessStaleDropped(t *testing.T) {
	e := newEnv(t)
	calls := 0
	p := e.countingPlugin(&calls)
	if r := e.prepare(p, claim(uid1, "train", alloc{"nic", "other.example.com", node, "nic-0"})); r.Err != nil {
		t.Fatal(r.Err)
	}
	if r := e.prepare(p, claim(uid1, "train", alloc{"whole", slices.DefaultDriverName, node, "gpu-1"})); r.Err != nil {
		t.Fatal(r.Err)
	}
	if calls != 0 {
		t.Errorf("OnUnprepared called %d times after dropping a preparation that held no device, want 0", calls)
	}
}

// unlistable is a gpu.Manager whose GPU listing fails outright.
type unlistable struct{ gpu.Manager }

func (unlistable) GPUs(context.Context) ([]gpu.GPU, error) { return nil, errors.New("NVML is down") }

// RestoreSpecs leaves claims that hold none of this driver's devices alone
// (they have no CDI spec): it does not read the GPUs for them, nor report
// them failed when the GPUs cannot be listed.
func TestRestoreSpecsSkipsDevicelessClaims(t *testing.T) {
	e := newEnv(t)
	if r := e.prepare(e.plugin(""), claim(uid1, "train", alloc{"nic", "other.example.com", node, "nic-0"})); r.Err != nil {
		t.Fatal(r.Err)
	}
	p := e.plugin("")
	p.cfg.GPUs = unlistable{e.gpus}
	if failed := p.RestoreSpecs(e.ctx); len(failed) != 0 {
		t.Errorf("RestoreSpecs = %v, want no failures for a claim holding no device", failed)
	}
}

// A device a claim is allocated for two requests, only one of them with
// admin access, is prepared for exclusive use: another claim allocated it
// is refused.
func TestMixedAdminAccessOnOneDeviceIsExclusive(t *testing.T) {
	e := newEnv(t)
	p := e.plugin("")
	driver := slices.DefaultDriverName
	const dev = "gpu-0-mig-3g40gb-9-4"
	c := claim(uid1, "train", alloc{"monitor", driver, node, dev}, alloc{"work", driver, node, dev})
	withAdminAccess(c, 0)
	if r := e.prepare(p, c); r.Err != nil {
		t.Fatal(r.Err)
	}
	if r := e.prepare(p, claim(uid2, "other", alloc{"work", driver, node, dev})); !errors.Is(r.Err, ErrAlreadyPrepared) {
		t.Errorf("another claim of %s: %v, want %v", dev, r.Err, ErrAlreadyPrepared)
	}
}

// A prepared claim handed over again without its allocation (as the kubelet
// may, from its cache) keeps its preparation: its devices are returned.
func TestPrepareAgainWithoutAllocationKeepsDevices(t *testing.T) {
	e := newEnv(t)
	p := e.plugin("")
	c := claim(uid1, "train", alloc{"mig", slices.DefaultDriverName, node, "gpu-0-mig-3g40gb-9-4"})
	if r := e.prepare(p, c); r.Err != nil {
		t.Fatal(r.Err)
	}
	c.Status.Allocation = nil
	if r := e.prepare(p, c); r.Err != nil || len(r.Devices) != 1 {
		t.Errorf("prepare again without allocation: %v, %d devices; want the prepared device", r.Err, len(r.Devices))
	}
	if _, ok := p.PreparedDevices()["gpu-0-mig-3g40gb-9-4"]; !ok {
		t.Errorf("the preparation was dropped")
	}
}

// Preparing a claim again as it was keeps its preparation, whether it also
// holds another driver's devices or holds one device for two requests, one
// of them with admin access: nothing is dropped and prepared afresh.
func TestPrepareAgainAsItWasKeepsPreparation(t *testing.T) {
	driver := slices.DefaultDriverName
	const dev = "gpu-0-mig-3g40gb-9-4"
	twoRequests := claim(uid1, "train", alloc{"monitor", driver, node, dev}, alloc{"work", driver, node, dev})
	withAdminAccess(twoRequests, 1)
	for name, c := range map[string]*resourceapi.ResourceClaim{
		"mixed drivers": mixedClaim(driver),
		"two requests":  twoRequests,
	} {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			calls := 0
			p := e.countingPlugin(&calls)
			if r := e.prepare(p, c); r.Err != nil {
				t.Fatal(r.Err)
			}
			if r := e.prepare(p, c); r.Err != nil || calls != 0 {
				t.Errorf("prepared again as it was: err %v, OnUnprepared called %d times; want no error and no call", r.Err, calls)
			}
		})
	}
}

// A claim prepared with one device and allocated it plus another is
// prepared afresh with both.
func TestPrepareReallocatedWithAnExtraDevice(t *testing.T) {
	e := newEnv(t)
	p := e.plugin("")
	driver := slices.DefaultDriverName
	if r := e.prepare(p, claim(uid1, "train", alloc{"mig", driver, node, "gpu-0-mig-3g40gb-9-4"})); r.Err != nil {
		t.Fatal(r.Err)
	}
	r := e.prepare(p, claim(uid1, "train", alloc{"mig", driver, node, "gpu-0-mig-3g40gb-9-4"}, alloc{"whole", driver, node, "gpu-1"}))
	if r.Err != nil || len(r.Devices) != 2 {
		t.Errorf("prepare with an extra device: %v, %d devices; want 2", r.Err, len(r.Devices))
	}
}

// A prepare takes the locks of its claim's GPUs in index order, whatever the
// order of the allocation results: two prepares of claims on the same GPUs
// (the kubelet's, and the agent's RefreshRecreated preparing a claim afresh)
// never each hold one lock and wait for the other's. Pinned without racing
// two prepares: GPU 0 is being reconfigured and another holder has GPU 1, so
// a prepare that asks for GPU 0 first fails at once, while one that asked
// for GPU 1 first would wait for it (until its context ends). The GPUs come
// from a map, so the order of an unsorted prepare varies from one call to
// the next: the prepare is repeated.
func TestPrepareLocksGPUsInIndexOrder(t *testing.T) {
	e := newEnv(t)
	p := e.plugin("")
	end, err := e.locks.BeginReconfigure(e.ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer end()
	unlock, err := e.locks.Lock(e.ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	for _, c := range []*resourceapi.ResourceClaim{
		claim(uid1, "train", alloc{"a", slices.DefaultDriverName, node, "gpu-0-mig-3g40gb-9-4"}, alloc{"b", slices.DefaultDriverName, node, "gpu-1"}),
		claim(uid2, "infer", alloc{"b", slices.DefaultDriverName, node, "gpu-1"}, alloc{"a", slices.DefaultDriverName, node, "gpu-0-mig-3g40gb-9-4"}),
	} {
		for range 100 {
			ctx, cancel := context.WithTimeout(e.ctx, 10*time.Second)
			res, err := p.PrepareResourceClaims(ctx, []*resourceapi.ResourceClaim{c})
			cancel()
			if err != nil {
				t.Fatal(err)
			}
			if err := res[c.UID].Err; !errors.Is(err, gpulock.ErrReconfiguring) || !strings.Contains(err.Error(), "GPU 0") {
				t.Fatalf("prepare of claim %s on GPUs 0 and 1, GPU 0 reconfiguring and GPU 1 held = %v, want ErrReconfiguring for GPU 0 (its lock asked first)", c.Name, err)
			}
		}
	}
}
