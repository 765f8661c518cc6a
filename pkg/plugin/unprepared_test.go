package plugin

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	goslices "slices"
	"strings"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/google/go-cmp/cmp"

	"github.com/miglayout/miglayout/pkg/mig"
	"github.com/miglayout/miglayout/pkg/mig/gpu"
	"github.com/miglayout/miglayout/pkg/slices"
)

// TestOnUnpreparedCalledWhenDevicesReleased: the agent hears of an
// unprepare that released prepared devices (a GPU may have waited for them
// alone), once they are out of PreparedDevices, and only then: not for a
// claim that was never prepared here, nor when asked again.
func TestOnUnpreparedCalledWhenDevicesReleased(t *testing.T) {
	e := newEnv(t)
	var p *Plugin
	var calls, preparedAtCall int
	var err error
	p, err = New(Config{NodeName: node, GPUs: e.gpus, Locks: e.locks, CDIDir: e.cdiDir, CheckpointDir: e.cpDir,
		HostRoot: e.hostRoot, OnUnprepared: func() {
			calls++
			preparedAtCall = len(p.PreparedDevices()) // also shows no lock is held
		}})
	if err != nil {
		t.Fatal(err)
	}
	c := mixedClaim(slices.DefaultDriverName)
	if r := e.prepare(p, c); r.Err != nil {
		t.Fatal(r.Err)
	}
	other := claim(uid2, "never-prepared", alloc{"mig", slices.DefaultDriverName, node, "gpu-0-mig-1g10gb-19-2"})
	if err := e.unprepare(p, other); err != nil {
		t.Fatal(err)
	}
	if calls != 0 {
		t.Errorf("OnUnprepared called %d times for a claim never prepared", calls)
	}
	if err := e.unprepare(p, c); err != nil {
		t.Fatal(err)
	}
	if calls != 1 {
		t.Errorf("OnUnprepared called %d times after a prepared claim was unprepared, want 1", calls)
	}
	if preparedAtCall != 0 {
		t.Errorf("at OnUnprepared %d devices were still prepared, want 0", preparedAtCall)
	}
	if err := e.unprepare(p, c); err != nil {
		t.Fatal(err)
	}
	if calls != 1 {
		t.Errorf("OnUnprepared called again (%d) for a claim unprepared already", calls)
	}
}

// TestOnUnpreparedCalledWhenStaleDropped: a claim allocated other devices
// than the ones prepared for it (its unprepare never reached the plugin)
// is prepared afresh; the devices of the stale preparation are released
// then, and the agent hears of it as of an unprepare.
func TestOnUnpreparedCalledWhenStaleDropped(t *testing.T) {
	e := newEnv(t)
	calls := 0
	p := e.countingPlugin(&calls)
	driver := slices.DefaultDriverName
	if r := e.prepare(p, claim(uid1, "train", alloc{"mig", driver, node, "gpu-0-mig-3g40gb-9-4"})); r.Err != nil {
		t.Fatal(r.Err)
	}
	if r := e.prepare(p, claim(uid1, "train", alloc{"mig", driver, node, "gpu-0-mig-3g40gb-9-4"})); r.Err != nil || calls != 0 {
		t.Fatalf("prepared again as it was: err %v, OnUnprepared called %d times; want no error and no call", r.Err, calls)
	}
	if r := e.prepare(p, claim(uid1, "train", alloc{"whole", driver, node, "gpu-1"})); r.Err != nil {
		t.Fatal(r.Err)
	}
	if calls != 1 {
		t.Errorf("OnUnprepared called %d times after a stale preparation was dropped, want 1", calls)
	}
}

// TestReleaseOrphan: a claim released as an orphan loses its CDI spec and
// checkpoint entry, so its devices are no longer prepared, another claim
// allocated them is prepared, and a plugin started again does not bring it
// back; the agent hears of it as of an unprepare. Releasing it again, or a
// claim never prepared, does nothing.
func TestReleaseOrphan(t *testing.T) {
	e := newEnv(t)
	calls := 0
	cfg := Config{NodeName: node, GPUs: e.gpus, Locks: e.locks, CDIDir: e.cdiDir, CheckpointDir: e.cpDir,
		HostRoot: e.hostRoot, OnUnprepared: func() { calls++ }}
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	driver := slices.DefaultDriverName
	dev := "gpu-0-mig-3g40gb-9-4"
	if r := e.prepare(p, claim(uid1, "train", alloc{"mig", driver, node, dev})); r.Err != nil {
		t.Fatal(r.Err)
	}
	if _, err := os.Stat(filepath.Join(e.cdiDir, specName(driver, uid1))); err != nil {
		t.Fatalf("the prepared claim's CDI spec: %v", err)
	}
	if r := e.prepare(p, claim(uid2, "next", alloc{"mig", driver, node, dev})); r.Err == nil {
		t.Fatal("a second claim of a prepared device was prepared: the test shows nothing")
	}
	pc, released, err := p.ReleaseOrphan(t.Context(), uid1, nil)
	if err != nil || !released || pc.Name != "train" || len(pc.Devices) != 1 || pc.Devices[0].Device != dev {
		t.Fatalf("ReleaseOrphan: %+v, %v, %v; want the claim's record, released", pc, released, err)
	}
	if calls != 1 {
		t.Errorf("OnUnprepared called %d times, want 1", calls)
	}
	if got := p.PreparedDevices(); len(got) != 0 {
		t.Errorf("prepared devices after the release: %v, want none", got)
	}
	if _, err := os.Stat(filepath.Join(e.cdiDir, specName(driver, uid1))); !errors.Is(err, fs.ErrNotExist) {
		t.Error("the released claim's CDI spec is still there")
	}
	if _, released, err := p.ReleaseOrphan(t.Context(), uid1, nil); released || err != nil {
		t.Errorf("released again: %v, %v; want nothing done", released, err)
	}
	if calls != 1 {
		t.Errorf("OnUnprepared called %d times after a second release, want 1", calls)
	}
	again, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if got := again.PreparedDevices(); len(got) != 0 {
		t.Errorf("a plugin started again has prepared devices %v, want none", got)
	}
	if r := e.prepare(again, claim(uid2, "next", alloc{"mig", driver, node, dev})); r.Err != nil {
		t.Errorf("the next claim of the released device: %v", r.Err)
	}
}

// TestReleaseOrphanRefusedWhileAProcessRuns: a claim whose device still runs
// a process (a container that outlived its pod's deletion) is not
// released, naming the device and process; once the process is gone, it
// is.
func TestReleaseOrphanRefusedWhileAProcessRuns(t *testing.T) {
	e := newEnv(t)
	p := e.plugin("")
	// Two MIG devices of GPU 0; the process runs on the second.
	const idle, dev = "gpu-0-mig-2g20gb-14-0", "gpu-0-mig-3g40gb-9-4"
	if r := e.prepare(p, claim(uid1, "train", alloc{"a", slices.DefaultDriverName, node, idle}, alloc{"b", slices.DefaultDriverName, node, dev})); r.Err != nil {
		t.Fatal(r.Err)
	}
	uuid := preparedUUID(t, p, uid1, dev)
	pid, err := e.sim.StartProcess(uuid, 1024)
	if err != nil {
		t.Fatal(err)
	}
	_, released, err := p.ReleaseOrphan(t.Context(), uid1, nil)
	if !errors.Is(err, ErrOrphanInUse) || released || !strings.Contains(err.Error(), fmt.Sprintf("%s (pid %d)", dev, pid)) || strings.Contains(err.Error(), idle) {
		t.Fatalf("ReleaseOrphan with a process running: released %v, %v; want ErrOrphanInUse naming %s and pid %d only", released, err, dev, pid)
	}
	if got := p.PreparedDevices(); len(got) != 2 {
		t.Errorf("prepared devices %v after a refused release, want %s still", got, dev)
	}
	if err := e.sim.StopProcess(pid); err != nil {
		t.Fatal(err)
	}
	if _, released, err := p.ReleaseOrphan(t.Context(), uid1, nil); err != nil || !released {
		t.Errorf("ReleaseOrphan once the process is gone: %v, %v; want released", released, err)
	}
}

// TestReleaseOrphanHeldWithAdminAccess: a gone claim that held its device
// with admin access only (a monitor beside the training job whose claim
// holds the device) is released while the job's process runs there: the
// process is the other claim's. The job's claim itself is not.
func TestReleaseOrphanHeldWithAdminAccess(t *testing.T) {
	e := newEnv(t)
	p := e.plugin("")
	const dev = "gpu-0-mig-3g40gb-9-4"
	if r := e.prepare(p, claim(uid1, "train", alloc{"r", slices.DefaultDriverName, node, dev})); r.Err != nil {
		t.Fatal(r.Err)
	}
	monitor := claim(uid2, "monitor", alloc{"r", slices.DefaultDriverName, node, dev})
	withAdminAccess(monitor, 0)
	if r := e.prepare(p, monitor); r.Err != nil {
		t.Fatal(r.Err)
	}
	if _, err := e.sim.StartProcess(p.claims[uid1].Devices[0].UUID, 1024); err != nil {
		t.Fatal(err)
	}
	if _, released, err := p.ReleaseOrphan(t.Context(), uid2, nil); err != nil || !released {
		t.Errorf("releasing the admin-access claim while another claim's process runs: released %v, %v; want released", released, err)
	}
	if _, released, err := p.ReleaseOrphan(t.Context(), uid1, nil); !errors.Is(err, ErrOrphanInUse) || released {
		t.Errorf("releasing the claim whose process runs: released %v, %v; want ErrOrphanInUse", released, err)
	}
}

// TestReleaseOrphanWithALostGPU: a gone claim with a device on a GPU that
// fell off the bus and one on a healthy GPU is released: the lost GPU's
// processes cannot be listed, but none of its devices is published, and
// the healthy GPU is not held prepared for as long as the other stays lost.
// A process on the healthy GPU still keeps the claim.
func TestReleaseOrphanWithALostGPU(t *testing.T) {
	e := newEnv(t)
	p := e.plugin("")
	driver := slices.DefaultDriverName
	if r := e.prepare(p, claim(uid1, "train",
		alloc{"mig", driver, node, "gpu-0-mig-3g40gb-9-4"},
		alloc{"whole", driver, node, "gpu-1"})); r.Err != nil {
		t.Fatal(r.Err)
	}
	p.cfg.GPUs = losingGPU0{e.gpus}
	uuid := p.claims[uid1].Devices[1].UUID
	pid, err := e.sim.StartProcess(uuid, 1024)
	if err != nil {
		t.Fatal(err)
	}
	if _, released, err := p.ReleaseOrphan(t.Context(), uid1, nil); !errors.Is(err, ErrOrphanInUse) || released {
		t.Fatalf("ReleaseOrphan with a process on the healthy GPU: released %v, %v; want ErrOrphanInUse", released, err)
	}
	if err := e.sim.StopProcess(pid); err != nil {
		t.Fatal(err)
	}
	if _, released, err := p.ReleaseOrphan(t.Context(), uid1, nil); err != nil || !released {
		t.Errorf("ReleaseOrphan with GPU 0 lost: released %v, %v; want released", released, err)
	}
	if got := p.PreparedDevices(); len(got) != 0 {
		t.Errorf("prepared devices %v after the release, want none", got)
	}
}

// denyingGPU0 is a gpu.Manager that NVML denies GPU 0 (ERROR_NO_PERMISSION:
// its device node taken from the container, say): GPUs leaves it out, as
// it does a lost one, but its processes may run on.
type denyingGPU0 struct{ gpu.Manager }

func (m denyingGPU0) GPUs(ctx context.Context) ([]gpu.GPU, error) {
	all, err := m.Manager.GPUs(ctx)
	if err != nil {
		return nil, err
	}
	denied := &gpu.NVMLError{Op: "nvmlDeviceGetHandleByIndex", Return: nvml.ERROR_NO_PERMISSION}
	return goslices.DeleteFunc(all, func(g gpu.GPU) bool { return g.Index == 0 }), &gpu.UnreadableGPUsError{Errors: map[int]error{0: denied}}
}

// TestReleaseOrphanWithADeniedGPU: unlike a GPU fallen off the bus, one
// NVML denies the agent may still run the gone claim's container: its
// preparation is kept (the release fails, and is tried again) rather than
// released while its processes cannot be listed.
func TestReleaseOrphanWithADeniedGPU(t *testing.T) {
	e := newEnv(t)
	p := e.plugin("")
	if r := e.prepare(p, claim(uid1, "train", alloc{"mig", slices.DefaultDriverName, node, "gpu-0-mig-3g40gb-9-4"})); r.Err != nil {
		t.Fatal(r.Err)
	}
	p.cfg.GPUs = denyingGPU0{e.gpus}
	if _, released, err := p.ReleaseOrphan(t.Context(), uid1, nil); err == nil || released {
		t.Errorf("ReleaseOrphan with GPU 0 denied: released %v, %v; want it kept, with an error", released, err)
	}
	if got := p.PreparedDevices(); len(got) != 1 {
		t.Errorf("prepared devices %v, want the claim's kept", got)
	}
}

// preparingMeanwhile is a gpu.Manager that, once armed, runs meanwhile at
// its next MIGProcesses call: a prepare the kubelet makes while
// ReleaseOrphan lists the claim's processes.
type preparingMeanwhile struct {
	gpu.Manager
	meanwhile func()
}

func (m *preparingMeanwhile) MIGProcesses(ctx context.Context, idx int) (map[mig.Device][]gpu.Process, error) {
	if f := m.meanwhile; f != nil {
		m.meanwhile = nil
		f()
	}
	return m.Manager.MIGProcesses(ctx, idx)
}

// TestReleaseOrphanConfirmsLast: ReleaseOrphan asks stillGone last, with
// the plugin's record locked, so no prepare comes between its answer and
// the release; a claim stillGone says is back stays prepared, and so does
// one prepared anew (allocated again, other devices) while its processes
// were listed.
func TestReleaseOrphanConfirmsLast(t *testing.T) {
	e := newEnv(t)
	m := &preparingMeanwhile{Manager: e.gpus}
	p, err := New(Config{NodeName: node, GPUs: m, Locks: e.locks, CDIDir: e.cdiDir, CheckpointDir: e.cpDir, HostRoot: e.hostRoot})
	if err != nil {
		t.Fatal(err)
	}
	driver := slices.DefaultDriverName
	if r := e.prepare(p, claim(uid1, "train", alloc{"mig", driver, node, "gpu-0-mig-3g40gb-9-4"})); r.Err != nil {
		t.Fatal(r.Err)
	}
	asked := 0
	back := func(context.Context) (bool, error) {
		asked++
		if p.mu.TryLock() {
			p.mu.Unlock()
			t.Error("stillGone asked with the plugin's record unlocked")
		}
		return false, nil
	}
	if _, released, err := p.ReleaseOrphan(t.Context(), uid1, back); released || err != nil || asked != 1 {
		t.Fatalf("claim back: released %v, %v, stillGone asked %d times; want it kept, asked once", released, err, asked)
	}
	if len(p.PreparedDevices()) != 1 {
		t.Fatalf("prepared devices %v, want the claim's", p.PreparedDevices())
	}

	m.meanwhile = func() {
		if r := e.prepare(p, claim(uid1, "train", alloc{"mig", driver, node, "gpu-0-mig-2g20gb-14-0"})); r.Err != nil {
			t.Errorf("prepare meanwhile: %v", r.Err)
		}
	}
	gone := func(context.Context) (bool, error) { return true, nil }
	if _, released, err := p.ReleaseOrphan(t.Context(), uid1, gone); released || err != nil {
		t.Errorf("prepared anew meanwhile: released %v, %v; want the new preparation kept", released, err)
	}
	var names []string
	for name := range p.PreparedDevices() {
		names = append(names, name)
	}
	if diff := cmp.Diff([]string{"gpu-0-mig-2g20gb-14-0"}, names); diff != "" {
		t.Errorf("prepared devices (-want +got):\n%s", diff)
	}
}

// unreadableGPU0 is a gpu.Manager on which NVML answers code for GPU 0:
// GPUs leaves it out, with that error.
type unreadableGPU0 struct {
	gpu.Manager
	code nvml.Return
}

func (m unreadableGPU0) GPUs(ctx context.Context) ([]gpu.GPU, error) {
	all, err := m.Manager.GPUs(ctx)
	if err != nil {
		return nil, err
	}
	e := &gpu.NVMLError{Op: "nvmlDeviceGetUUID", Return: m.code}
	return goslices.DeleteFunc(all, func(g gpu.GPU) bool { return g.Index == 0 }), &gpu.UnreadableGPUsError{Errors: map[int]error{0: e}}
}

// TestReleaseOrphanOnAGPUThatCannotRun: a gone claim whose device lies on a
// GPU that fell off the bus, or that needs a reset, is released (no process
// runs there until a reset or reboot, which ends them); one on a GPU NVML
// denies is kept.
func TestReleaseOrphanOnAGPUThatCannotRun(t *testing.T) {
	for name, tc := range map[string]struct {
		code         nvml.Return
		wantReleased bool
	}{
		"fallen off the bus": {code: nvml.ERROR_GPU_IS_LOST, wantReleased: true},
		"needs a reset":      {code: nvml.ERROR_RESET_REQUIRED, wantReleased: true},
		"denied":             {code: nvml.ERROR_NO_PERMISSION},
	} {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			p := e.plugin("")
			if r := e.prepare(p, claim(uid1, "train", alloc{"mig", slices.DefaultDriverName, node, "gpu-0-mig-3g40gb-9-4"})); r.Err != nil {
				t.Fatal(r.Err)
			}
			p.cfg.GPUs = unreadableGPU0{e.gpus, tc.code}
			_, released, err := p.ReleaseOrphan(t.Context(), uid1, nil)
			if released != tc.wantReleased || (err == nil) != tc.wantReleased {
				t.Errorf("ReleaseOrphan with GPU 0 answering %v: released %v, %v; want released %v", tc.code, released, err, tc.wantReleased)
			}
		})
	}
}

// TestReleaseOrphanWhoseDeviceIsGone: a gone claim whose MIG device no
// longer exists is released while another claim's process runs elsewhere
// on the same GPU: a device that is gone runs nothing.
func TestReleaseOrphanWhoseDeviceIsGone(t *testing.T) {
	e := newEnv(t)
	p := e.plugin("")
	const gone, busy = "gpu-0-mig-1g10gb-19-3", "gpu-0-mig-3g40gb-9-4"
	if r := e.prepare(p, claim(uid1, "train", alloc{"mig", slices.DefaultDriverName, node, gone})); r.Err != nil {
		t.Fatal(r.Err)
	}
	if r := e.prepare(p, claim(uid2, "infer", alloc{"mig", slices.DefaultDriverName, node, busy})); r.Err != nil {
		t.Fatal(r.Err)
	}
	if _, err := e.sim.StartProcess(p.claims[uid2].Devices[0].UUID, 1024); err != nil {
		t.Fatal(err)
	}
	if err := e.gpus.DestroyMIGDevice(e.ctx, 0, mig.Device{Profile: "1g.10gb", Start: 3}); err != nil {
		t.Fatal(err)
	}
	if _, released, err := p.ReleaseOrphan(t.Context(), uid1, nil); err != nil || !released {
		t.Errorf("ReleaseOrphan of a claim whose device is gone: released %v, %v; want released", released, err)
	}
}

// TestNoOnUnpreparedWhenDevicelessOrphanReleased: releasing a gone claim
// that held none of this driver's devices does not tell the agent that
// devices were released.
func TestNoOnUnpreparedWhenDevicelessOrphanReleased(t *testing.T) {
	e := newEnv(t)
	calls := 0
	p := e.countingPlugin(&calls)
	if r := e.prepare(p, claim(uid1, "train", alloc{"nic", "other.example.com", node, "nic-0"})); r.Err != nil {
		t.Fatal(r.Err)
	}
	if _, released, err := p.ReleaseOrphan(t.Context(), uid1, nil); err != nil || !released {
		t.Fatalf("ReleaseOrphan: released %v, %v; want released", released, err)
	}
	if calls != 0 {
		t.Errorf("OnUnprepared called %d times after releasing a claim that held no device, want 0", calls)
	}
}

// TestReleaseOrphanBoundsStillGone: stillGone, asked with every prepare and
// unprepare of the node waiting on the plugin's record, is given at most
// orphanConfirmTimeout (an API server that does not answer cannot hold
// them longer).
func TestReleaseOrphanBoundsStillGone(t *testing.T) {
	e := newEnv(t)
	p := e.plugin("")
	if r := e.prepare(p, claim(uid1, "train", alloc{"mig", slices.DefaultDriverName, node, "gpu-0-mig-3g40gb-9-4"})); r.Err != nil {
		t.Fatal(r.Err)
	}
	var left time.Duration
	bounded := func(ctx context.Context) (bool, error) {
		dl, ok := ctx.Deadline()
		if !ok {
			return false, errors.New("no deadline")
		}
		left = time.Until(dl)
		return true, nil
	}
	if _, released, err := p.ReleaseOrphan(t.Context(), uid1, bounded); err != nil || !released {
		t.Fatalf("ReleaseOrphan: released %v, %v; want released", released, err)
	}
	if left <= 0 || left > orphanConfirmTimeout {
		t.Errorf("stillGone given %v, want at most %v", left, orphanConfirmTimeout)
	}
}
