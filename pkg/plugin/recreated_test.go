package plugin

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/google/go-cmp/cmp"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/miglayout/miglayout/pkg/gpulock"
	"github.com/miglayout/miglayout/pkg/mig"
	"github.com/miglayout/miglayout/pkg/mig/gpu"
	"github.com/miglayout/miglayout/pkg/mig/nvmlsim"
	"github.com/miglayout/miglayout/pkg/slices"
)

// TestPrepareOfRecreatedDeviceThatFailsKeepsPreparation: after a reboot (MIG
// devices gone, /var/run/cdi gone, checkpoint kept) the agent creates the
// claim's MIG device again, with a new UUID, and the kubelet asks for the
// claim again. When preparing it afresh fails (the agent still holds GPU 0
// to create the rest of the layout, or the driver's capability file of the
// new device cannot be read yet) the prepare fails, and the claim's
// preparation stays in memory and in the checkpoint, as it does when the
// device is not created again yet (TestPrepareAfterReboot): its device stays
// protected from the repartitioner and from other claims until a prepare
// succeeds. Once the cause is gone, the prepare succeeds with the new UUID.
func TestPrepareOfRecreatedDeviceThatFailsKeepsPreparation(t *testing.T) {
	const dev = "gpu-0-mig-1g10gb-19-3"
	d := mig.Device{Profile: "1g.10gb", Start: 3}
	tests := map[string]struct {
		// block makes the fresh preparation fail; it returns what undoes it.
		block   func(e *env) (undo func())
		wantErr error // nil: any error
	}{
		"GPU being reconfigured": {
			block: func(e *env) func() {
				end, err := e.locks.BeginReconfigure(e.ctx, 0)
				if err != nil {
					e.t.Fatal(err)
				}
				return end
			},
			wantErr: gpulock.ErrReconfiguring,
		},
		"capability file of the new device not readable yet": {
			block: func(e *env) func() {
				caps := filepath.Join(e.hostRoot, "proc")
				moved := caps + ".moved"
				if err := os.Rename(caps, moved); err != nil {
					e.t.Fatal(err)
				}
				return func() {
					if err := os.Rename(moved, caps); err != nil {
						e.t.Fatal(err)
					}
				}
			},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			// The reboot, then the agent creates the device again.
			c := e.preparedThenDestroyed(dev, d)
			if err := os.RemoveAll(e.cdiDir); err != nil {
				t.Fatal(err)
			}
			p := e.plugin("")
			md := e.createMIG(d)

			undo := tc.block(e)
			r := e.prepare(p, c)
			if r.Err == nil || (tc.wantErr != nil && !errors.Is(r.Err, tc.wantErr)) {
				t.Fatalf("prepare = %v, want an error (%v)", r.Err, tc.wantErr)
			}
			want := map[string][]types.NamespacedName{dev: {{Namespace: "team-a", Name: "infer"}}}
			if diff := cmp.Diff(want, p.PreparedDevices()); diff != "" {
				t.Errorf("PreparedDevices after the failed prepare (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(want, e.plugin("").PreparedDevices()); diff != "" {
				t.Errorf("checkpoint after the failed prepare (-want +got):\n%s", diff)
			}

			undo()
			if r := e.prepare(p, c); r.Err != nil {
				t.Fatalf("prepare once the cause is gone: %v", r.Err)
			}
			if got := p.claims[uid1].Devices; len(got) != 1 || got[0].UUID != md.UUID {
				t.Errorf("prepared devices %+v, want %s with UUID %s", got, dev, md.UUID)
			}
		})
	}
}

// TestRecreatedDeviceCheckpointWriteFailureKeepsOldSpec: a claim whose
// device was created again (a GPU reset) is prepared afresh; when the
// checkpoint cannot be written, the claim keeps its old preparation in
// memory, in the checkpoint and in its CDI spec alike (the spec is not
// removed while the claim stays recorded).
func TestRecreatedDeviceCheckpointWriteFailureKeepsOldSpec(t *testing.T) {
	const dev = "gpu-0-mig-1g10gb-19-3"
	d := mig.Device{Profile: "1g.10gb", Start: 3}
	e := newEnv(t)
	c := e.preparedThenDestroyed(dev, d)
	p := e.plugin("")
	old := p.claims[uid1].Devices[0].UUID
	if md := e.createMIG(d); md.UUID == old {
		t.Fatal("the device came back with its old UUID: the test shows nothing")
	}
	// The checkpoint's path becomes a directory that is not empty: the
	// rename that replaces the file fails.
	blockFile(t, filepath.Join(e.cpDir, CheckpointFile))
	if r := e.prepare(p, c); r.Err == nil {
		t.Fatal("prepare succeeded with the checkpoint unwritable")
	}
	if got := p.claims[uid1].Devices[0].UUID; got != old {
		t.Errorf("recorded UUID %s after the failed prepare, want the old %s", got, old)
	}
	spec, err := os.ReadFile(filepath.Join(e.cdiDir, specName(slices.DefaultDriverName, uid1)))
	if err != nil {
		t.Fatalf("the claim's CDI spec after the failed prepare: %v, want the old preparation's", err)
	}
	if !strings.Contains(string(spec), old) {
		t.Errorf("the claim's CDI spec does not name the recorded UUID %s:\n%s", old, spec)
	}
}

// preparedThenDestroyed prepares claim uid1 ("infer") for device dev (d on
// GPU 0) and destroys the device, as a reboot or GPU reset does; it returns
// the claim.
func (e *env) preparedThenDestroyed(dev string, d mig.Device) *resourceapi.ResourceClaim {
	e.t.Helper()
	c := claim(uid1, "infer", alloc{"mig", slices.DefaultDriverName, node, dev})
	if r := e.prepare(e.plugin(""), c); r.Err != nil {
		e.t.Fatal(r.Err)
	}
	if err := e.gpus.DestroyMIGDevice(e.ctx, 0, d); err != nil {
		e.t.Fatal(err)
	}
	return c
}

// TestRefreshRecreated: a GPU reset destroys a running pod's MIG device and
// the agent makes it again (same name, new UUID) while the claim stays
// prepared: the kubelet does not prepare it again, so RefreshRecreated
// rewrites the claim's CDI spec and checkpoint entry for the new device,
// with the CDI device IDs the kubelet holds. Before the device is made
// again, it leaves the claim as it is; a claim the kubelet unprepared
// meanwhile is not prepared again.
func TestRefreshRecreated(t *testing.T) {
	const dev = "gpu-0-mig-1g10gb-19-3"
	d := mig.Device{Profile: "1g.10gb", Start: 3}
	e := newEnv(t)
	c := claim(uid1, "infer", alloc{"mig", slices.DefaultDriverName, node, dev})
	p := e.plugin("")
	r := e.prepare(p, c)
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	old := p.claims[uid1]
	specPath := filepath.Join(e.cdiDir, specName(slices.DefaultDriverName, uid1))
	if err := e.gpus.DestroyMIGDevice(e.ctx, 0, d); err != nil {
		t.Fatal(err)
	}

	if failed := p.RefreshRecreated(e.ctx); len(failed) > 0 {
		t.Errorf("RefreshRecreated before the device is made again: %v, want nothing done", failed)
	}
	if diff := cmp.Diff(old, p.claims[uid1]); diff != "" {
		t.Errorf("the preparation changed before the device is made again (-old +now):\n%s", diff)
	}

	md := e.createMIG(d)
	if md.UUID == old.Devices[0].UUID {
		t.Fatal("the simulator made the device again with the same UUID")
	}
	if failed := p.RefreshRecreated(e.ctx); len(failed) > 0 {
		t.Fatalf("RefreshRecreated: %v", failed)
	}
	now := p.claims[uid1]
	if got := now.Devices[0].UUID; got != md.UUID {
		t.Errorf("prepared device UUID %s, want the new device's %s", got, md.UUID)
	}
	if got, want := resultDevices(now), r.Devices; !cmp.Equal(got, want) {
		t.Errorf("CDI devices %v, want those the kubelet holds %v", got, want)
	}
	spec := string(mustRead(t, specPath))
	if !strings.Contains(spec, md.UUID) || strings.Contains(spec, old.Devices[0].UUID) {
		t.Errorf("CDI spec does not name the new device %s only:\n%s", md.UUID, spec)
	}
	cp, err := readCheckpoint(p.checkpointPath)
	if err != nil {
		t.Fatal(err)
	}
	if got := cp[uid1].Devices[0].UUID; got != md.UUID {
		t.Errorf("checkpointed UUID %s, want %s", got, md.UUID)
	}

	// Made again once more, while the kubelet unprepares the claim
	// between RefreshRecreated's read and its write.
	if err := e.gpus.DestroyMIGDevice(e.ctx, 0, d); err != nil {
		t.Fatal(err)
	}
	e.createMIG(d)
	if err := e.unprepare(p, c); err != nil {
		t.Fatal(err)
	}
	if _, err := p.prepareClaimIf(e.ctx, p.claimOf(now), &now); !errors.Is(err, errSuperseded) {
		t.Errorf("refreshing a claim unprepared meanwhile: %v, want %v", err, errSuperseded)
	}
	if got := p.PreparedDevices(); len(got) != 0 {
		t.Errorf("prepared devices %v after the kubelet unprepared the claim, want none", got)
	}
}

// callingMeanwhile is a gpu.Manager that, once armed, runs meanwhile at its
// next GPUs call: the kubelet calling the plugin while RefreshRecreated
// reads NVML for a claim.
type callingMeanwhile struct {
	gpu.Manager
	meanwhile func()
}

func (h *callingMeanwhile) GPUs(ctx context.Context) ([]gpu.GPU, error) {
	if f := h.meanwhile; f != nil {
		h.meanwhile = nil
		f()
	}
	return h.Manager.GPUs(ctx)
}

// preparedBesideTheKubelet is a plugin over callingMeanwhile with claim
// infer prepared on gpu-0-mig-1g10gb-19-3.
func preparedBesideTheKubelet(t *testing.T) (*env, *Plugin, *callingMeanwhile, *resourceapi.ResourceClaim) {
	t.Helper()
	e := newEnv(t)
	h := &callingMeanwhile{Manager: e.gpus}
	p, err := New(Config{NodeName: node, GPUs: h, Locks: e.locks, CDIDir: e.cdiDir, CheckpointDir: e.cpDir, HostRoot: e.hostRoot})
	if err != nil {
		t.Fatal(err)
	}
	c := claim(uid1, "infer", alloc{"mig", slices.DefaultDriverName, node, "gpu-0-mig-1g10gb-19-3"})
	if r := e.prepare(p, c); r.Err != nil {
		t.Fatal(r.Err)
	}
	return e, p, h, c
}

// TestRefreshRecreatedLeavesAClaimUnpreparedMeanwhile: the kubelet
// unprepares a claim while RefreshRecreated (the agent's pass) reads NVML
// for it: the claim's CDI spec stays removed.
func TestRefreshRecreatedLeavesAClaimUnpreparedMeanwhile(t *testing.T) {
	e, p, h, c := preparedBesideTheKubelet(t)
	specPath := filepath.Join(e.cdiDir, specName(slices.DefaultDriverName, uid1))
	h.meanwhile = func() {
		if err := e.unprepare(p, c); err != nil {
			t.Fatal(err)
		}
	}
	if failed := p.RefreshRecreated(e.ctx); len(failed) > 0 {
		t.Fatalf("RefreshRecreated: %v", failed)
	}
	if len(p.PreparedClaims()) != 0 {
		t.Fatalf("claim still prepared")
	}
	if _, err := os.Stat(specPath); err == nil {
		t.Errorf("CDI spec %s of a claim the kubelet unprepared was written again by RefreshRecreated", specPath)
	}
}

// TestRefreshRecreatedLeavesAClaimPreparedAnewMeanwhile: the kubelet
// prepares the claim anew (same UID, allocated another device: its
// unprepare never reached the plugin) while RefreshRecreated reads NVML for
// its old preparation: the CDI spec names the new device.
func TestRefreshRecreatedLeavesAClaimPreparedAnewMeanwhile(t *testing.T) {
	e, p, h, _ := preparedBesideTheKubelet(t)
	c2 := claim(uid1, "infer", alloc{"mig", slices.DefaultDriverName, node, "gpu-0-mig-1g10gb-19-2"})
	h.meanwhile = func() {
		if r := e.prepare(p, c2); r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	if failed := p.RefreshRecreated(e.ctx); len(failed) > 0 {
		t.Fatalf("RefreshRecreated: %v", failed)
	}
	rec := p.claims[uid1]
	if len(rec.Devices) != 1 || rec.Devices[0].Device != "gpu-0-mig-1g10gb-19-2" {
		t.Fatalf("record %+v, want the new device", rec.Devices)
	}
	spec, err := os.ReadFile(filepath.Join(e.cdiDir, specName(slices.DefaultDriverName, uid1)))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(spec), rec.Devices[0].UUID) {
		t.Errorf("checkpoint says the claim holds %s (%s), but its CDI spec, rewritten by RefreshRecreated, names another device:\n%s",
			rec.Devices[0].Device, rec.Devices[0].UUID, spec)
	}
}

// TestRefreshRecreatedLeavesAClaimPreparedAnewAndRunning: as
// TestRefreshRecreatedLeavesAClaimPreparedAnewMeanwhile, the claim's MIG
// device made again (a GPU reset) and its new pod's container running on
// the device the kubelet prepared anew: RefreshRecreated leaves the claim
// alone, where it reported the running pod as an orphan holding the
// claim's old devices (ErrOrphanInUse) and failed every pass.
func TestRefreshRecreatedLeavesAClaimPreparedAnewAndRunning(t *testing.T) {
	e, p, h, _ := preparedBesideTheKubelet(t)
	d := mig.Device{Profile: "1g.10gb", Start: 3}
	if err := e.gpus.DestroyMIGDevice(e.ctx, 0, d); err != nil {
		t.Fatal(err)
	}
	e.createMIG(d)
	c2 := claim(uid1, "infer", alloc{"mig", slices.DefaultDriverName, node, "gpu-0-mig-1g10gb-19-2"})
	h.meanwhile = func() {
		if r := e.prepare(p, c2); r.Err != nil {
			t.Fatal(r.Err)
		}
		if _, err := e.sim.StartProcess(p.claims[uid1].Devices[0].UUID, 1024); err != nil {
			t.Fatal(err)
		}
	}
	if failed := p.RefreshRecreated(e.ctx); len(failed) > 0 {
		t.Errorf("RefreshRecreated: %v", failed)
	}
	if rec := p.claims[uid1]; len(rec.Devices) != 1 || rec.Devices[0].Device != "gpu-0-mig-1g10gb-19-2" {
		t.Errorf("record %+v, want the kubelet's new preparation", rec.Devices)
	}
}

// countingGPUs is a gpu.Manager that counts the reads RefreshRecreated
// makes: the GPU listings, and the MIG-device listings by GPU.
type countingGPUs struct {
	gpu.Manager
	listings int
	migs     map[int]int
}

func (c *countingGPUs) GPUs(ctx context.Context) ([]gpu.GPU, error) {
	c.listings++
	return c.Manager.GPUs(ctx)
}

func (c *countingGPUs) MIGDevices(ctx context.Context, idx int) ([]gpu.MIGDevice, error) {
	if c.migs == nil {
		c.migs = map[int]int{}
	}
	c.migs[idx]++
	return c.Manager.MIGDevices(ctx, idx)
}

// TestRefreshRecreatedReadsNVMLOnce: RefreshRecreated reads the node's GPUs
// once, and the MIG devices of GPU 0 once, for three claims (two on GPU
// 0's MIG devices, one on the whole GPU 1), where it read both for each
// claim; a GPU that cannot be read fails only the claim on it, and the
// others' devices, one of them made again, are still refreshed.
func TestRefreshRecreatedReadsNVMLOnce(t *testing.T) {
	const uid3 = "1f0e9a3c-0000-4000-8000-000000000003"
	e := newEnv(t)
	counting := &countingGPUs{Manager: e.gpus}
	p, err := New(Config{NodeName: node, GPUs: counting, Locks: e.locks, CDIDir: e.cdiDir, CheckpointDir: e.cpDir, HostRoot: e.hostRoot})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []*resourceapi.ResourceClaim{
		claim(uid1, "infer", alloc{"mig", slices.DefaultDriverName, node, "gpu-0-mig-1g10gb-19-2"}),
		claim(uid2, "train", alloc{"mig", slices.DefaultDriverName, node, "gpu-0-mig-3g40gb-9-4"}),
		claim(uid3, "whole", alloc{"gpu", slices.DefaultDriverName, node, "gpu-1"}),
	} {
		if r := e.prepare(p, c); r.Err != nil {
			t.Fatal(r.Err)
		}
	}

	*counting = countingGPUs{Manager: e.gpus}
	if failed := p.RefreshRecreated(e.ctx); len(failed) > 0 {
		t.Fatalf("RefreshRecreated: %v", failed)
	}
	if counting.listings != 1 || !cmp.Equal(counting.migs, map[int]int{0: 1}) {
		t.Errorf("RefreshRecreated listed the GPUs %d times and MIG devices %v, want once and {0: 1}", counting.listings, counting.migs)
	}

	// GPU 1 cannot be read (its GetPciInfo, the second of the listing)
	// while claim infer's device was made again.
	d := mig.Device{Profile: "1g.10gb", Start: 2}
	if err := e.gpus.DestroyMIGDevice(e.ctx, 0, d); err != nil {
		t.Fatal(err)
	}
	md := e.createMIG(d)
	if err := e.sim.InjectFault(nvmlsim.Fault{Op: "GetPciInfo", Nth: 2, Return: nvml.ERROR_UNKNOWN}); err != nil {
		t.Fatal(err)
	}
	failed := p.RefreshRecreated(e.ctx)
	if len(failed) != 1 || failed[uid3] == nil || !strings.Contains(failed[uid3].Error(), "reading GPU 1") {
		t.Errorf("RefreshRecreated with GPU 1 unreadable: %v, want only claim whole failed, reading GPU 1", failed)
	}
	if got := p.claims[uid1].Devices[0].UUID; got != md.UUID {
		t.Errorf("claim infer's device UUID %s, want the device made again's %s", got, md.UUID)
	}
}

// TestRefreshRecreatedWithoutDevicesReadsNothing: with no claim holding a
// device of this driver prepared (one holds another driver's only),
// RefreshRecreated does not read NVML, and so reports no failure while
// NVML cannot list the GPUs: the agent would otherwise log, and try again
// in every pass, a refresh of a claim that has nothing to refresh.
func TestRefreshRecreatedWithoutDevicesReadsNothing(t *testing.T) {
	e := newEnv(t)
	counting := &countingGPUs{Manager: e.gpus}
	p, err := New(Config{NodeName: node, GPUs: counting, Locks: e.locks, CDIDir: e.cdiDir, CheckpointDir: e.cpDir, HostRoot: e.hostRoot})
	if err != nil {
		t.Fatal(err)
	}
	if failed := p.RefreshRecreated(e.ctx); len(failed) != 0 || counting.listings != 0 {
		t.Errorf("RefreshRecreated with no claim prepared: failed %v, %d GPU listings; want none", failed, counting.listings)
	}
	if r := e.prepare(p, claim(uid1, "train", alloc{"nic", "other.example.com", node, "nic-0"})); r.Err != nil {
		t.Fatal(r.Err)
	}
	*counting = countingGPUs{Manager: unlistable{e.gpus}}
	if failed := p.RefreshRecreated(e.ctx); len(failed) != 0 || counting.listings != 0 {
		t.Errorf("RefreshRecreated with a claim of another driver's devices only, NVML down: failed %v, %d GPU listings; want none", failed, counting.listings)
	}
}

// TestRefreshRecreatedKeepsAdminAccess: a device made again that a claim
// holds exclusively and a monitoring claim with admin access: both claims'
// preparations are refreshed in place, the monitor's still with admin
// access (refreshed as an exclusive claim, it would be a stale allocation,
// dropped, then refused: the device is the other claim's).
func TestRefreshRecreatedKeepsAdminAccess(t *testing.T) {
	const dev = "gpu-0-mig-1g10gb-19-3"
	d := mig.Device{Profile: "1g.10gb", Start: 3}
	e := newEnv(t)
	calls := 0
	p := e.countingPlugin(&calls)
	monitor := claim(uid2, "monitor", alloc{"watch", slices.DefaultDriverName, node, dev})
	withAdminAccess(monitor, 0)
	for _, c := range []*resourceapi.ResourceClaim{claim(uid1, "train", alloc{"work", slices.DefaultDriverName, node, dev}), monitor} {
		if r := e.prepare(p, c); r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	want := p.PreparedClaims()
	if err := e.gpus.DestroyMIGDevice(e.ctx, 0, d); err != nil {
		t.Fatal(err)
	}
	md := e.createMIG(d)
	if failed := p.RefreshRecreated(e.ctx); len(failed) > 0 {
		t.Fatalf("RefreshRecreated: %v", failed)
	}
	for i := range want {
		want[i].Devices[0].UUID = md.UUID
	}
	if diff := cmp.Diff(want, p.PreparedClaims()); diff != "" {
		t.Errorf("prepared claims after the refresh (-want +got):\n%s", diff)
	}
	if calls != 0 {
		t.Errorf("OnUnprepared called %d times: a preparation was dropped", calls)
	}
}
