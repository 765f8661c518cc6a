package plugin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	goslices "slices"
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/google/go-cmp/cmp"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"
	cdiapi "tags.cncf.io/container-device-interface/pkg/cdi"

	"github.com/miglayout/miglayout/pkg/gpulock"
	"github.com/miglayout/miglayout/pkg/mig"
	"github.com/miglayout/miglayout/pkg/mig/gpu"
	"github.com/miglayout/miglayout/pkg/mig/gpu/gputest"
	"github.com/miglayout/miglayout/pkg/mig/nvmlsim"
	"github.com/miglayout/miglayout/pkg/slices"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

const node = "node-a"

// env is a node: two simulated A100-SXM4-80GB, GPU 0 in MIG mode with
// 2g.20gb@0,1g.10gb@2,1g.10gb@3,3g.40gb@4, GPU 1 whole; the capability files
// of its MIG devices under a temporary host root.
type env struct {
	t        *testing.T
	ctx      context.Context
	sim      *nvmlsim.Sim
	gpus     *gpu.NVMLManager
	locks    *gpulock.Locks
	hostRoot string
	cdiDir   string
	cpDir    string
}

func newEnv(t *testing.T) *env {
	_, ctx := ktesting.NewTestContext(t)
	sim, m := gputest.Simulated(t, nvmlsim.Config{Spec: "2xA100-SXM4-80GB", Seed: "plugin"})
	if _, err := m.SetMIGMode(ctx, 0, true); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	e := &env{t: t, ctx: ctx, sim: sim, gpus: m, locks: gpulock.New(),
		hostRoot: filepath.Join(dir, "host"), cdiDir: filepath.Join(dir, "cdi"), cpDir: filepath.Join(dir, "plugin")}
	for _, d := range mig.MustParseLayout("2g.20gb@0,1g.10gb@2,1g.10gb@3,3g.40gb@4") {
		e.createMIG(d)
	}
	return e
}

// createMIG creates MIG device d on GPU 0, as the agent does, with the
// capability files the driver would have for it.
func (e *env) createMIG(d mig.Device) gpu.MIGDevice {
	e.t.Helper()
	md, err := e.gpus.CreateMIGDevice(e.ctx, 0, d)
	if err != nil {
		e.t.Fatal(err)
	}
	gpus, err := e.gpus.GPUs(e.ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	if err := WriteFakeCapabilities(e.hostRoot, gpus[0].Minor, md); err != nil {
		e.t.Fatal(err)
	}
	return md
}

func (e *env) plugin(driver string) *Plugin {
	e.t.Helper()
	p, err := New(Config{DriverName: driver, NodeName: node, GPUs: e.gpus, Locks: e.locks,
		CDIDir: e.cdiDir, CheckpointDir: e.cpDir, HostRoot: e.hostRoot})
	if err != nil {
		e.t.Fatal(err)
	}
	return p
}

// countingPlugin is e.plugin("") with an OnUnprepared that counts its
// calls in *calls.
func (e *env) countingPlugin(calls *int) *Plugin {
	e.t.Helper()
	p, err := New(Config{NodeName: node, GPUs: e.gpus, Locks: e.locks, CDIDir: e.cdiDir, CheckpointDir: e.cpDir,
		HostRoot: e.hostRoot, OnUnprepared: func() { *calls++ }})
	if err != nil {
		e.t.Fatal(err)
	}
	return p
}

type alloc struct{ request, driver, pool, device string }

func claim(uid, name string, results ...alloc) *resourceapi.ResourceClaim {
	c := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: name, UID: types.UID(uid)}}
	c.Status.Allocation = &resourceapi.AllocationResult{}
	for _, r := range results {
		c.Status.Allocation.Devices.Results = append(c.Status.Allocation.Devices.Results,
			resourceapi.DeviceRequestAllocationResult{Request: r.request, Driver: r.driver, Pool: r.pool, Device: r.device})
	}
	return c
}

// withAdminAccess gives the allocation results of c at results admin
// access.
func withAdminAccess(c *resourceapi.ResourceClaim, results ...int) {
	for _, i := range results {
		c.Status.Allocation.Devices.Results[i].AdminAccess = ptr.To(true)
	}
}

func (e *env) prepare(p *Plugin, c *resourceapi.ResourceClaim) kubeletplugin.PrepareResult {
	e.t.Helper()
	res, err := p.PrepareResourceClaims(e.ctx, []*resourceapi.ResourceClaim{c})
	if err != nil {
		e.t.Fatalf("PrepareResourceClaims: %v", err)
	}
	r, ok := res[c.UID]
	if !ok || len(res) != 1 {
		e.t.Fatalf("PrepareResourceClaims returned %v, want one entry for %s", res, c.UID)
	}
	return r
}

func (e *env) unprepare(p *Plugin, c *resourceapi.ResourceClaim) error {
	e.t.Helper()
	obj := kubeletplugin.NamespacedObject{NamespacedName: types.NamespacedName{Namespace: c.Namespace, Name: c.Name}, UID: c.UID}
	res, err := p.UnprepareResourceClaims(e.ctx, []kubeletplugin.NamespacedObject{obj})
	if err != nil {
		e.t.Fatalf("UnprepareResourceClaims: %v", err)
	}
	if _, ok := res[c.UID]; !ok || len(res) != 1 {
		e.t.Fatalf("UnprepareResourceClaims returned %v", res)
	}
	return res[c.UID]
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("reading golden file (go test -update creates it): %v", err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("%s differs (-want +got):\n%s", path, diff)
	}
}

func indent(t *testing.T, data []byte) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := json.Indent(&b, data, "", "  "); err != nil {
		t.Fatal(err)
	}
	b.WriteByte('\n')
	return b.Bytes()
}

const (
	uid1 = "1f0e9a3c-0000-4000-8000-000000000001"
	uid2 = "1f0e9a3c-0000-4000-8000-000000000002"
)

func mixedClaim(driver string) *resourceapi.ResourceClaim {
	return claim(uid1, "train",
		alloc{"mig", driver, node, "gpu-0-mig-3g40gb-9-4"},
		alloc{"other", "net.example.com", node, "nic-0"}, // another driver's: ignored
		alloc{"whole", driver, node, "gpu-1"},
	)
}

func TestPrepareUnprepare(t *testing.T) {
	e := newEnv(t)
	p := e.plugin("")
	c := mixedClaim(slices.DefaultDriverName)

	r := e.prepare(p, c)
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	wantDevices := []kubeletplugin.Device{
		{Requests: []string{"mig"}, PoolName: node, DeviceName: "gpu-0-mig-3g40gb-9-4",
			CDIDeviceIDs: []string{"k8s.mig.miglayout.io/claim=" + uid1 + "-gpu-0-mig-3g40gb-9-4"}},
		{Requests: []string{"whole"}, PoolName: node, DeviceName: "gpu-1",
			CDIDeviceIDs: []string{"k8s.mig.miglayout.io/claim=" + uid1 + "-gpu-1"}},
	}
	if diff := cmp.Diff(wantDevices, r.Devices); diff != "" {
		t.Errorf("prepared devices (-want +got):\n%s", diff)
	}
	specPath := filepath.Join(e.cdiDir, "k8s.mig.miglayout.io-claim_"+uid1+".json")
	spec, err := os.ReadFile(specPath)
	if err != nil {
		t.Fatalf("CDI spec not written: %v", err)
	}
	golden(t, "cdi-spec-mig-and-gpu.json", indent(t, spec))

	// A container runtime's CDI cache resolves the IDs the kubelet gets.
	cache, err := cdiapi.NewCache(cdiapi.WithSpecDirs(e.cdiDir), cdiapi.WithAutoRefresh(false))
	if err != nil {
		t.Fatal(err)
	}
	if errs := cache.GetErrors(); len(errs) != 0 {
		t.Errorf("CDI cache errors: %v", errs)
	}
	for _, d := range r.Devices {
		if cache.GetDevice(d.CDIDeviceIDs[0]) == nil {
			t.Errorf("CDI cache does not resolve %s (has %v)", d.CDIDeviceIDs[0], cache.ListDevices())
		}
	}

	// The spec names the MIG device's UUID and its capability nodes.
	migs, _ := e.gpus.MIGDevices(e.ctx, 0)
	big := migs[3]
	if big.Profile != "3g.40gb" || !strings.Contains(string(spec), "NVIDIA_VISIBLE_DEVICES="+big.UUID) {
		t.Errorf("spec lacks NVIDIA_VISIBLE_DEVICES=%s", big.UUID)
	}
	giMinor, ciMinor := MIGCapabilityMinors(0, big.GIID, big.CIID)
	for _, n := range []string{"/dev/nvidia0", "/dev/nvidia1", "/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools",
		"/dev/nvidia-caps/nvidia-cap" + itoa(giMinor), "/dev/nvidia-caps/nvidia-cap" + itoa(ciMinor)} {
		if !strings.Contains(string(spec), `"`+n+`"`) {
			t.Errorf("spec lacks device node %s", n)
		}
	}
	// PreparedDevices protects both devices.
	want := map[string][]types.NamespacedName{
		"gpu-0-mig-3g40gb-9-4": {{Namespace: "team-a", Name: "train"}},
		"gpu-1":                {{Namespace: "team-a", Name: "train"}},
	}
	if diff := cmp.Diff(want, p.PreparedDevices()); diff != "" {
		t.Errorf("PreparedDevices (-want +got):\n%s", diff)
	}

	// Idempotent: the same result, the same spec.
	if r2 := e.prepare(p, c); r2.Err != nil || !cmp.Equal(r.Devices, r2.Devices) {
		t.Errorf("second prepare = %+v, want %+v", r2, r)
	}
	if again, _ := os.ReadFile(specPath); !bytes.Equal(again, spec) {
		t.Errorf("second prepare changed the spec")
	}

	// Unprepare removes the spec and the checkpoint entry; twice is fine.
	if err := e.unprepare(p, c); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(specPath); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("CDI spec still there after unprepare: %v", err)
	}
	if n := len(p.PreparedDevices()); n != 0 {
		t.Errorf("%d devices still prepared", n)
	}
	if err := e.unprepare(p, c); err != nil {
		t.Errorf("second unprepare: %v", err)
	}
	cp, err := readCheckpoint(filepath.Join(e.cpDir, CheckpointFile))
	if err != nil || len(cp) != 0 {
		t.Errorf("checkpoint after unprepare: %v, %v", cp, err)
	}
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

// TestPrepareReallocated: a claim prepared, then deallocated and allocated
// another device under the same UID while its unprepare never arrived, is
// prepared afresh for the device it holds now, not handed the old one.
func TestPrepareReallocated(t *testing.T) {
	e := newEnv(t)
	p := e.plugin("")
	driver := slices.DefaultDriverName
	if r := e.prepare(p, claim(uid1, "train", alloc{"mig", driver, node, "gpu-0-mig-3g40gb-9-4"})); r.Err != nil {
		t.Fatal(r.Err)
	}
	r := e.prepare(p, claim(uid1, "train", alloc{"whole", driver, node, "gpu-1"}))
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	want := []kubeletplugin.Device{{Requests: []string{"whole"}, PoolName: node, DeviceName: "gpu-1",
		CDIDeviceIDs: []string{"k8s.mig.miglayout.io/claim=" + uid1 + "-gpu-1"}}}
	if diff := cmp.Diff(want, r.Devices); diff != "" {
		t.Errorf("prepared devices (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string][]types.NamespacedName{"gpu-1": {{Namespace: "team-a", Name: "train"}}}, p.PreparedDevices()); diff != "" {
		t.Errorf("PreparedDevices (-want +got):\n%s", diff)
	}
}

// TestPrepareReallocatedWhileTheOldDeviceRuns: a claim reallocated as in
// TestPrepareReallocated while a container started under its old
// allocation still runs on the old device (its pod force-deleted, the
// kubelet's record lost). The fresh prepare fails (ErrOrphanInUse, naming
// the process) and keeps the old preparation, so the device is prepared
// for no other claim while the process runs; once it ends, the claim is
// prepared afresh. A device the claim held with admin access, which other
// claims' processes use, does not hold the prepare back.
func TestPrepareReallocatedWhileTheOldDeviceRuns(t *testing.T) {
	e := newEnv(t)
	p := e.plugin("")
	driver := slices.DefaultDriverName
	const old = "gpu-0-mig-3g40gb-9-4"
	if r := e.prepare(p, claim(uid1, "train", alloc{"mig", driver, node, old})); r.Err != nil {
		t.Fatal(r.Err)
	}
	pid, err := e.sim.StartProcess(p.claims[uid1].Devices[0].UUID, 1024)
	if err != nil {
		t.Fatal(err)
	}
	r := e.prepare(p, claim(uid1, "train", alloc{"whole", driver, node, "gpu-1"}))
	if !errors.Is(r.Err, ErrOrphanInUse) || !strings.Contains(r.Err.Error(), fmt.Sprintf("%s (pid %d)", old, pid)) {
		t.Fatalf("prepare while a process runs on the old device: %v, want ErrOrphanInUse naming %s and pid %d", r.Err, old, pid)
	}
	if r := e.prepare(p, claim(uid2, "infer", alloc{"mig", driver, node, old})); r.Err == nil {
		t.Errorf("%s prepared for a second claim while the first's process runs on it", old)
	}
	if err := e.sim.StopProcess(pid); err != nil {
		t.Fatal(err)
	}
	if r := e.prepare(p, claim(uid1, "train", alloc{"whole", driver, node, "gpu-1"})); r.Err != nil {
		t.Fatalf("prepare once the process ended: %v", r.Err)
	}

	// Admin access: another claim's process on the device is not the
	// reallocated claim's.
	admin := claim(uid2, "monitor", alloc{"mig", driver, node, old})
	withAdminAccess(admin, 0)
	if r := e.prepare(p, admin); r.Err != nil {
		t.Fatal(r.Err)
	}
	if _, err := e.sim.StartProcess(p.claims[uid2].Devices[0].UUID, 1024); err != nil {
		t.Fatal(err)
	}
	moved := claim(uid2, "monitor", alloc{"mig", driver, node, "gpu-0-mig-2g20gb-14-0"})
	withAdminAccess(moved, 0)
	if r := e.prepare(p, moved); r.Err != nil {
		t.Errorf("admin-access claim reallocated while another's process runs on its old device: %v", r.Err)
	}
}

func TestPrepareSurvivesRestart(t *testing.T) {
	e := newEnv(t)
	c := mixedClaim(slices.DefaultDriverName)
	first := e.prepare(e.plugin(""), c)
	if first.Err != nil {
		t.Fatal(first.Err)
	}
	specPath := filepath.Join(e.cdiDir, "k8s.mig.miglayout.io-claim_"+uid1+".json")
	spec, _ := os.ReadFile(specPath)
	golden(t, "checkpoint.json", mustRead(t, filepath.Join(e.cpDir, CheckpointFile)))

	// A new instance (the agent restarted) knows what is prepared ...
	p2 := e.plugin("")
	if got := p2.PreparedDevices(); len(got) != 2 {
		t.Fatalf("after restart PreparedDevices = %v", got)
	}
	// ... answers the kubelet's repeated prepare from the checkpoint ...
	if r := e.prepare(p2, c); r.Err != nil || !cmp.Equal(first.Devices, r.Devices) {
		t.Errorf("prepare after restart = %+v, want %+v", r, first)
	}
	// ... and writes the spec again if it went missing (e.g. /var/run is a tmpfs).
	if err := os.Remove(specPath); err != nil {
		t.Fatal(err)
	}
	if r := e.prepare(p2, c); r.Err != nil {
		t.Fatal(r.Err)
	}
	if again, err := os.ReadFile(specPath); err != nil || !bytes.Equal(again, spec) {
		t.Errorf("spec rewritten from the checkpoint differs: %v", err)
	}
	// Unprepare on yet another instance.
	if err := e.unprepare(e.plugin(""), c); err != nil {
		t.Fatal(err)
	}
	if got := e.plugin("").PreparedDevices(); len(got) != 0 {
		t.Errorf("after unprepare and restart PreparedDevices = %v", got)
	}
}

// TestPrepareAfterReboot: MIG devices do not survive a reboot (nor a GPU
// reset) and /var/run/cdi is a tmpfs, while the checkpoint under
// /var/lib/kubelet does. Until the agent creates the layout again the
// kubelet's prepare fails (the device does not exist); once it has, the
// allocated device exists under its name with a new UUID, and the claim is
// prepared afresh with that UUID.
func TestPrepareAfterReboot(t *testing.T) {
	e := newEnv(t)
	const dev = "gpu-0-mig-1g10gb-19-3"
	d := mig.Device{Profile: "1g.10gb", Start: 3}
	c := claim(uid1, "infer", alloc{"mig", slices.DefaultDriverName, node, dev})
	if r := e.prepare(e.plugin(""), c); r.Err != nil {
		t.Fatal(r.Err)
	}
	oldUUID := e.plugin("").claims[uid1].Devices[0].UUID

	// The reboot.
	if err := e.gpus.DestroyMIGDevice(e.ctx, 0, d); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(e.cdiDir); err != nil {
		t.Fatal(err)
	}
	p := e.plugin("")
	if r := e.prepare(p, c); !errors.Is(r.Err, ErrDeviceGone) {
		t.Fatalf("prepare before the device is created again = %v, want ErrDeviceGone", r.Err)
	}
	if _, ok := p.PreparedDevices()[dev]; !ok {
		t.Errorf("the failed prepare dropped the claim's preparation: %v", p.PreparedDevices())
	}

	// The agent creates the layout again.
	md := e.createMIG(d)
	if md.UUID == oldUUID {
		t.Fatalf("the simulator gave the new device its old UUID %s", md.UUID)
	}
	r := e.prepare(p, c)
	if r.Err != nil {
		t.Fatalf("prepare once the device exists again: %v", r.Err)
	}
	if got := p.claims[uid1].Devices; len(got) != 1 || got[0].UUID != md.UUID {
		t.Errorf("prepared devices %+v, want %s with UUID %s", got, dev, md.UUID)
	}
	spec := string(mustRead(t, filepath.Join(e.cdiDir, specName(slices.DefaultDriverName, uid1))))
	if !strings.Contains(spec, VisibleDevicesEnv+"="+md.UUID) || strings.Contains(spec, oldUUID) {
		t.Errorf("CDI spec does not name the new UUID %s alone:\n%s", md.UUID, spec)
	}
	// What a restarted agent reads back is the new preparation.
	if got := e.plugin("").claims[uid1].Devices; len(got) != 1 || got[0].UUID != md.UUID {
		t.Errorf("checkpoint holds %+v, want UUID %s", got, md.UUID)
	}
}

// TestPrepareWithALostGPU: a GPU fallen off the bus fails the claims with
// devices on it, naming NVML's code, and not those on the node's other GPUs.
func TestPrepareWithALostGPU(t *testing.T) {
	e := newEnv(t)
	p := e.plugin("")
	if err := e.sim.LoseGPU(1); err != nil {
		t.Fatal(err)
	}
	if r := e.prepare(p, claim(uid1, "infer", alloc{"mig", slices.DefaultDriverName, node, "gpu-0-mig-1g10gb-19-2"})); r.Err != nil {
		t.Errorf("prepare on GPU 0 with GPU 1 lost: %v", r.Err)
	}
	r := e.prepare(p, claim(uid2, "whole", alloc{"g", slices.DefaultDriverName, node, "gpu-1"}))
	if !errors.Is(r.Err, gpu.ErrGPULost) || !strings.Contains(r.Err.Error(), "reading GPU 1") {
		t.Errorf("prepare on the lost GPU 1: %v, want ErrGPULost naming GPU 1", r.Err)
	}
	if _, ok := p.PreparedDevices()["gpu-1"]; ok {
		t.Error("the lost GPU was prepared")
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestPrepareVanishedDevice(t *testing.T) {
	e := newEnv(t)
	p := e.plugin("")
	// The scheduler allocated 1g.10gb@2, then the layout changed.
	if err := e.gpus.DestroyMIGDevice(e.ctx, 0, mig.Device{Profile: "1g.10gb", Start: 2}); err != nil {
		t.Fatal(err)
	}
	c := claim(uid1, "infer", alloc{"mig", slices.DefaultDriverName, node, "gpu-0-mig-1g10gb-19-2"})
	r := e.prepare(p, c)
	if r.Err == nil {
		t.Fatal("prepare of a destroyed device succeeded")
	}
	for _, want := range []string{"team-a/infer", "gpu-0-mig-1g10gb-19-2", "does not exist", node, "present: gpu-0-mig-2g20gb-14-0, gpu-0-mig-1g10gb-19-3, gpu-0-mig-3g40gb-9-4"} {
		if !strings.Contains(r.Err.Error(), want) {
			t.Errorf("error %q lacks %q", r.Err, want)
		}
	}
	if !errors.Is(r.Err, ErrDeviceGone) {
		t.Errorf("error does not wrap ErrDeviceGone")
	}
	// A whole GPU that went into MIG mode is gone as a device too.
	if _, err := e.gpus.SetMIGMode(e.ctx, 1, true); err != nil {
		t.Fatal(err)
	}
	if r := e.prepare(p, claim(uid2, "whole", alloc{"g", slices.DefaultDriverName, node, "gpu-1"})); !errors.Is(r.Err, ErrDeviceGone) {
		t.Errorf("prepare of gpu-1 in MIG mode = %v", r.Err)
	}
	if n := len(p.PreparedDevices()); n != 0 {
		t.Errorf("failed prepares left %d prepared devices", n)
	}
	if entries, _ := os.ReadDir(e.cdiDir); len(entries) != 0 {
		t.Errorf("failed prepares left CDI specs: %v", entries)
	}

	// A device prepared, then destroyed behind the plugin's back (must not
	// happen; NVML truth wins): the repeated prepare fails naming it.
	c3 := claim("uid-3", "kept", alloc{"mig", slices.DefaultDriverName, node, "gpu-0-mig-1g10gb-19-3"})
	if r := e.prepare(p, c3); r.Err != nil {
		t.Fatal(r.Err)
	}
	if err := e.gpus.DestroyMIGDevice(e.ctx, 0, mig.Device{Profile: "1g.10gb", Start: 3}); err != nil {
		t.Fatal(err)
	}
	if r := e.prepare(p, c3); !errors.Is(r.Err, ErrDeviceGone) || !strings.Contains(r.Err.Error(), "gpu-0-mig-1g10gb-19-3") {
		t.Errorf("re-prepare of a vanished device = %v", r.Err)
	}
}

func TestPrepareWhileReconfiguring(t *testing.T) {
	e := newEnv(t)
	p := e.plugin("")
	end, err := e.locks.BeginReconfigure(e.ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	c := claim(uid1, "infer", alloc{"mig", slices.DefaultDriverName, node, "gpu-0-mig-3g40gb-9-4"})
	r := e.prepare(p, c)
	if !errors.Is(r.Err, gpulock.ErrReconfiguring) || !strings.Contains(r.Err.Error(), "GPU 0") || !strings.Contains(r.Err.Error(), "team-a/infer") {
		t.Errorf("prepare during reconfiguration = %v, want ErrReconfiguring naming GPU 0 and the claim", r.Err)
	}
	// A claim on the other GPU is not held up.
	if r := e.prepare(p, claim(uid2, "whole", alloc{"g", slices.DefaultDriverName, node, "gpu-1"})); r.Err != nil {
		t.Errorf("prepare on GPU 1 during GPU 0's reconfiguration: %v", r.Err)
	}
	end()
	if r := e.prepare(p, c); r.Err != nil {
		t.Errorf("prepare after the reconfiguration: %v", r.Err)
	}
}

func TestPrepareRejects(t *testing.T) {
	e := newEnv(t)
	p := e.plugin("")
	unallocated := claim(uid1, "pending")
	unallocated.Status.Allocation = nil
	if r := e.prepare(p, unallocated); r.Err == nil || !strings.Contains(r.Err.Error(), "not allocated") {
		t.Errorf("unallocated claim: %v", r.Err)
	}
	if r := e.prepare(p, claim(uid1, "elsewhere", alloc{"mig", slices.DefaultDriverName, "node-b", "gpu-0"})); r.Err == nil || !strings.Contains(r.Err.Error(), `pool "node-b"`) {
		t.Errorf("claim from another node's pool: %v", r.Err)
	}
	if r := e.prepare(p, claim(uid1, "odd", alloc{"mig", slices.DefaultDriverName, node, "tpu-0"})); !errors.Is(r.Err, ErrDeviceGone) {
		t.Errorf("unknown device name: %v", r.Err)
	}
	// Exclusive use: a second claim on a prepared device fails, unless one has admin access.
	if r := e.prepare(p, claim(uid1, "a", alloc{"r", slices.DefaultDriverName, node, "gpu-1"})); r.Err != nil {
		t.Fatal(r.Err)
	}
	if r := e.prepare(p, claim(uid2, "b", alloc{"r", slices.DefaultDriverName, node, "gpu-1"})); !errors.Is(r.Err, ErrAlreadyPrepared) || !strings.Contains(r.Err.Error(), "team-a/a") {
		t.Errorf("second claim on gpu-1: %v", r.Err)
	}
	admin := claim(uid2, "monitor", alloc{"r", slices.DefaultDriverName, node, "gpu-1"})
	withAdminAccess(admin, 0)
	if r := e.prepare(p, admin); r.Err != nil {
		t.Errorf("admin-access claim on gpu-1: %v", r.Err)
	}
	// The other way round: the claim prepared first has admin access.
	firstAdmin := claim("uid-5", "monitor-first", alloc{"r", slices.DefaultDriverName, node, "gpu-0-mig-1g10gb-19-3"})
	withAdminAccess(firstAdmin, 0)
	if r := e.prepare(p, firstAdmin); r.Err != nil {
		t.Fatalf("admin-access claim on gpu-0-mig-1g10gb-19-3: %v", r.Err)
	}
	if r := e.prepare(p, claim("uid-6", "after-admin", alloc{"r", slices.DefaultDriverName, node, "gpu-0-mig-1g10gb-19-3"})); r.Err != nil {
		t.Errorf("claim on gpu-0-mig-1g10gb-19-3, prepared already for an admin-access claim only: %v", r.Err)
	}
	// Missing MIG capability files (driver without MIG support in /proc, or a wrong host root).
	if err := os.RemoveAll(filepath.Join(e.hostRoot, "proc")); err != nil {
		t.Fatal(err)
	}
	if r := e.prepare(p, claim("uid-4", "caps", alloc{"m", slices.DefaultDriverName, node, "gpu-0-mig-2g20gb-14-0"})); r.Err == nil ||
		!strings.Contains(r.Err.Error(), "reading MIG capability of gpu-0-mig-2g20gb-14-0") {
		t.Errorf("missing capability files: %v", r.Err)
	}
}

// TestPrepareRefusesConfiguration: opaque configuration parameters for this
// driver (a sharing strategy copied from another driver's claims), from the
// claim or its DeviceClass, fail the prepare with ErrUnsupportedConfig and
// prepare nothing; an empty one, or another driver's, is no obstacle.
func TestPrepareRefusesConfiguration(t *testing.T) {
	opaque := func(driver, params string, source resourceapi.AllocationConfigSource) resourceapi.DeviceAllocationConfiguration {
		return resourceapi.DeviceAllocationConfiguration{Source: source, DeviceConfiguration: resourceapi.DeviceConfiguration{
			Opaque: &resourceapi.OpaqueDeviceConfiguration{Driver: driver, Parameters: runtime.RawExtension{Raw: []byte(params)}}}}
	}
	const sharing = `{"sharing":{"strategy":"TimeSlicing"}}`
	tests := map[string]struct {
		config  resourceapi.DeviceAllocationConfiguration
		refused bool
	}{
		"parameters from the claim":             {opaque(slices.DefaultDriverName, sharing, resourceapi.AllocationConfigSourceClaim), true},
		"parameters from the DeviceClass":       {opaque(slices.DefaultDriverName, sharing, resourceapi.AllocationConfigSourceClass), true},
		"empty parameters":                      {opaque(slices.DefaultDriverName, "{ \n}", resourceapi.AllocationConfigSourceClaim), false},
		"a typed configuration setting nothing": {opaque(slices.DefaultDriverName, `{"apiVersion": "resource.example.com/v1", "kind": "GpuConfig"}`, resourceapi.AllocationConfigSourceClass), false},
		"null parameters":                       {opaque(slices.DefaultDriverName, "null", resourceapi.AllocationConfigSourceClaim), false},
		"another driver's parameters":           {opaque("nic.example.com", `{"mtu":9000}`, resourceapi.AllocationConfigSourceClaim), false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			p := e.plugin("")
			c := claim(uid1, "cfg", alloc{"mig", slices.DefaultDriverName, node, "gpu-0-mig-3g40gb-9-4"})
			c.Status.Allocation.Devices.Config = []resourceapi.DeviceAllocationConfiguration{tc.config}
			r := e.prepare(p, c)
			if got := errors.Is(r.Err, ErrUnsupportedConfig); got != tc.refused {
				t.Fatalf("prepare: %v; want refused %t", r.Err, tc.refused)
			}
			if tc.refused && len(p.PreparedDevices()) != 0 {
				t.Errorf("devices prepared for a refused claim: %v", p.PreparedDevices())
			}
		})
	}
}

// Running as gpu.nvidia.com: only that driver's results, its CDI kind.
func TestDriverNameGPUNvidiaCom(t *testing.T) {
	e := newEnv(t)
	p := e.plugin("gpu.nvidia.com")
	c := claim(uid1, "train",
		alloc{"mig", "gpu.nvidia.com", node, "gpu-0-mig-3g40gb-9-4"},
		alloc{"ours-not", slices.DefaultDriverName, node, "gpu-1"})
	r := e.prepare(p, c)
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	if len(r.Devices) != 1 || r.Devices[0].CDIDeviceIDs[0] != "k8s.gpu.nvidia.com/claim="+uid1+"-gpu-0-mig-3g40gb-9-4" {
		t.Errorf("devices = %+v", r.Devices)
	}
	if _, err := os.Stat(filepath.Join(e.cdiDir, "k8s.gpu.nvidia.com-claim_"+uid1+".json")); err != nil {
		t.Error(err)
	}
}

func TestCheckpointIntegrity(t *testing.T) {
	e := newEnv(t)
	if r := e.prepare(e.plugin(""), mixedClaim(slices.DefaultDriverName)); r.Err != nil {
		t.Fatal(r.Err)
	}
	path := filepath.Join(e.cpDir, CheckpointFile)
	good := mustRead(t, path)
	for name, mutate := range map[string]func(string) string{
		"tampered": func(s string) string { return strings.Replace(s, `"gpu-1"`, `"gpu-7"`, 1) },
		"version": func(s string) string {
			return strings.Replace(s, CheckpointVersion, "miglayout.io/plugin-checkpoint/v0", 1)
		},
		"garbage": func(s string) string { return s[:len(s)/2] },
	} {
		if err := os.WriteFile(path, []byte(mutate(string(good))), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := New(Config{NodeName: node, GPUs: e.gpus, CDIDir: e.cdiDir, CheckpointDir: e.cpDir, HostRoot: e.hostRoot})
		if err == nil || !strings.Contains(err.Error(), "checkpoint") {
			t.Errorf("%s checkpoint: New = %v, want an error about the checkpoint", name, err)
		}
	}
}

func TestConfigErrors(t *testing.T) {
	e := newEnv(t)
	for _, cfg := range []Config{
		{GPUs: e.gpus},
		{NodeName: node},
		{NodeName: node, GPUs: e.gpus, DriverName: "Not_A_Driver"},
	} {
		cfg.CDIDir, cfg.CheckpointDir = e.cdiDir, e.cpDir
		if _, err := New(cfg); err == nil {
			t.Errorf("New(%+v) succeeded", cfg)
		}
	}
	p := e.plugin("")
	var fatal error
	p.cfg.OnFatalError = func(err error) { fatal = err }
	p.HandleError(e.ctx, errors.New("boom"), "publishing")
	if fatal == nil || !strings.Contains(fatal.Error(), "publishing: boom") {
		t.Errorf("fatal error not passed on: %v", fatal)
	}
}

func TestReadCapabilityMinor(t *testing.T) {
	dir := t.TempDir()
	for content, want := range map[string]int{
		"DeviceFileMinor: 12\nDeviceFileMode: 292\nDeviceFileModify: 1\n": 12,
		"DeviceFileMode: 292\nDeviceFileMinor:13":                         13,
	} {
		p := filepath.Join(dir, "access")
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		if got, err := readCapabilityMinor(p); err != nil || got != want {
			t.Errorf("readCapabilityMinor(%q) = %d, %v; want %d", content, got, err, want)
		}
	}
	for _, bad := range []string{"DeviceFileMode: 292\n", "DeviceFileMinor: x\n"} {
		p := filepath.Join(dir, "bad")
		_ = os.WriteFile(p, []byte(bad), 0o644)
		if _, err := readCapabilityMinor(p); err == nil {
			t.Errorf("readCapabilityMinor(%q) succeeded", bad)
		}
	}
	// The mig-minors layout: gpu0/gi0/access is 3, gpu0/gi1/access 12, gpu1/gi0/access 138.
	for _, tc := range []struct{ gpu, gi, ci, wantGI, wantCI int }{{0, 0, 0, 3, 4}, {0, 1, 0, 12, 13}, {1, 0, 7, 138, 146}} {
		gi, ci := MIGCapabilityMinors(tc.gpu, tc.gi, tc.ci)
		if gi != tc.wantGI || ci != tc.wantCI {
			t.Errorf("MIGCapabilityMinors(%d, %d, %d) = %d, %d; want %d, %d", tc.gpu, tc.gi, tc.ci, gi, ci, tc.wantGI, tc.wantCI)
		}
	}
}

// TestRestoreSpecsAtStart: an agent that starts with prepared claims in its
// checkpoint whose CDI specs are gone (the CDI directory cleaned without a
// reboot: the kubelet prepares nothing again) writes them again, as they
// were, where the devices still exist; a claim whose device is gone is left
// to the kubelet (its error returned), its preparation kept; a spec that is
// there is not touched.
func TestRestoreSpecsAtStart(t *testing.T) {
	e := newEnv(t)
	c := mixedClaim(slices.DefaultDriverName)
	if r := e.prepare(e.plugin(""), c); r.Err != nil {
		t.Fatal(r.Err)
	}
	const dev = "gpu-0-mig-1g10gb-19-3"
	gone := claim(uid2, "infer", alloc{"mig", slices.DefaultDriverName, node, dev})
	if r := e.prepare(e.plugin(""), gone); r.Err != nil {
		t.Fatal(r.Err)
	}
	specPath := filepath.Join(e.cdiDir, specName(slices.DefaultDriverName, uid1))
	spec := mustRead(t, specPath)
	if err := e.gpus.DestroyMIGDevice(e.ctx, 0, mig.Device{Profile: "1g.10gb", Start: 3}); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(e.cdiDir); err != nil {
		t.Fatal(err)
	}
	p := e.plugin("")
	failed := p.RestoreSpecs(e.ctx)
	if again, err := os.ReadFile(specPath); err != nil || !bytes.Equal(again, spec) {
		t.Errorf("the spec of claim %s is not restored as it was: %v", uid1, err)
	}
	if len(failed) != 1 || !errors.Is(failed[uid2], ErrDeviceGone) {
		t.Errorf("RestoreSpecs errors %v, want claim %s's device gone", failed, uid2)
	}
	if _, ok := p.PreparedDevices()[dev]; !ok {
		t.Errorf("the claim whose device is gone lost its preparation: %v", p.PreparedDevices())
	}
	// A spec that is there, as an older version wrote it (its CDI device
	// names are those the kubelet holds for the running pod), is left.
	older := []byte(`{"cdiVersion":"0.6.0","kind":"k8s.mig.miglayout.io/claim","devices":[]}`)
	if err := os.WriteFile(specPath, older, 0o644); err != nil {
		t.Fatal(err)
	}
	e.plugin("").RestoreSpecs(e.ctx)
	if got := mustRead(t, specPath); !bytes.Equal(got, older) {
		t.Errorf("a spec on disk was rewritten at start:\n%s", got)
	}
}

// losingGPU0 is a gpu.Manager on which GPU 0 has fallen off the bus: GPUs
// leaves it out with ERROR_GPU_IS_LOST, and its MIG devices cannot be read.
type losingGPU0 struct{ gpu.Manager }

func (m losingGPU0) GPUs(ctx context.Context) ([]gpu.GPU, error) {
	all, err := m.Manager.GPUs(ctx)
	if err != nil {
		return nil, err
	}
	lost := &gpu.NVMLError{Op: "nvmlDeviceGetUUID", Return: nvml.ERROR_GPU_IS_LOST}
	return goslices.DeleteFunc(all, func(g gpu.GPU) bool { return g.Index == 0 }), &gpu.UnreadableGPUsError{Errors: map[int]error{0: lost}}
}

// TestPrepareReallocatedAwayFromALostGPU: a claim prepared on GPU 0 is
// allocated the whole GPU 1 after GPU 0 fell off the bus. The processes on
// its old device cannot be listed, but no container runs on a lost GPU and
// none of its devices is published: the claim is prepared afresh.
func TestPrepareReallocatedAwayFromALostGPU(t *testing.T) {
	e := newEnv(t)
	p := e.plugin("")
	driver := slices.DefaultDriverName
	if r := e.prepare(p, claim(uid1, "train", alloc{"mig", driver, node, "gpu-0-mig-3g40gb-9-4"})); r.Err != nil {
		t.Fatal(r.Err)
	}
	p.cfg.GPUs = losingGPU0{e.gpus}
	if r := e.prepare(p, claim(uid1, "train", alloc{"whole", driver, node, "gpu-1"})); r.Err != nil {
		t.Errorf("prepare on GPU 1 with GPU 0 lost: %v", r.Err)
	}
}
