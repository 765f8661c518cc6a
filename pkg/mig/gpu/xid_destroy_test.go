package gpu_test

import (
	"context"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/google/go-cmp/cmp"

	"github.com/miglayout/miglayout/pkg/mig"
	"github.com/miglayout/miglayout/pkg/mig/gpu"
	"github.com/miglayout/miglayout/pkg/mig/gpu/gputest"
	"github.com/miglayout/miglayout/pkg/mig/nvmlsim"
)

// xidWatchOn starts m's Xid watch, sending every Xid but the 13s it uses
// to tell the watch is registered to got, and returns once it is; the
// watch's WatchXids result goes to done. Where hold is not nil, fn blocks
// after sending an Xid 48 until hold is closed.
func xidWatchOn(t *testing.T, ctx context.Context, sim *nvmlsim.Sim, m *gpu.NVMLManager, hold chan struct{}) (got chan gpu.Xid, done chan error) {
	t.Helper()
	got, done = make(chan gpu.Xid, 16), make(chan error, 1)
	registered := make(chan struct{}, 1)
	go func() {
		done <- m.WatchXids(ctx, nil, func(x gpu.Xid) {
			if x.Code == 13 {
				select {
				case registered <- struct{}{}:
				default:
				}
				return
			}
			got <- x
			if x.Code == 48 && hold != nil {
				<-hold
			}
		})
	}()
	deadline := time.After(10 * time.Second)
	for {
		if err := sim.InjectXid(0, 13, -1, -1); err != nil {
			t.Fatal(err)
		}
		select {
		case <-registered:
			return got, done
		case <-time.After(100 * time.Millisecond):
		case <-deadline:
			t.Fatal("the watch delivered no Xid within 10s")
		}
	}
}

// xidDevice is the MIG device the tests of this file give Xids to.
var xidDevice = mig.Device{Profile: "3g.40gb", Start: 4}

// withXidDevice turns MIG mode on on GPU 0 of m and makes xidDevice there.
func withXidDevice(t *testing.T, m *gpu.NVMLManager) gpu.MIGDevice {
	t.Helper()
	if _, err := m.SetMIGMode(t.Context(), 0, true); err != nil {
		t.Fatal(err)
	}
	dev, err := m.CreateMIGDevice(t.Context(), 0, xidDevice)
	if err != nil {
		t.Fatal(err)
	}
	return dev
}

// heldWatch is xidWatchOn with the watch held in fn (by an Xid 48, taken
// from got) until hold is closed: it reads no event meanwhile.
func heldWatch(t *testing.T, ctx context.Context, sim *nvmlsim.Sim, m *gpu.NVMLManager) (got chan gpu.Xid, hold chan struct{}, done chan error) {
	t.Helper()
	hold = make(chan struct{})
	got, done = xidWatchOn(t, ctx, sim, m, hold)
	if err := sim.InjectXid(0, 48, -1, -1); err != nil {
		t.Fatal(err)
	}
	select {
	case <-got:
	case <-time.After(10 * time.Second):
		t.Fatal("Xid 48 not delivered within 10s")
	}
	return got, hold, done
}

// makeAgain makes xidDevice on GPU 0 again where old was destroyed: the
// same GPU instance ID (NVML derives it from the placement), another UUID.
func makeAgain(t *testing.T, m *gpu.NVMLManager, old gpu.MIGDevice) gpu.MIGDevice {
	t.Helper()
	made, err := m.CreateMIGDevice(t.Context(), 0, xidDevice)
	if err != nil {
		t.Fatal(err)
	}
	if made.GIID != old.GIID || made.UUID == old.UUID {
		t.Fatalf("made again as GI %d (%s), want GI %d under another UUID than %s", made.GIID, made.UUID, old.GIID, old.UUID)
	}
	return made
}

// wantXid waits for the next Xid of got and compares it with want.
func wantXid(t *testing.T, got chan gpu.Xid, want gpu.Xid) {
	t.Helper()
	select {
	case x := <-got:
		if diff := cmp.Diff(want, x); diff != "" {
			t.Errorf("Xid (-want +got):\n%s", diff)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the Xid was not delivered within 10s")
	}
}

// xid94 is an Xid 94 of dev's GPU instance, with the devices given.
func xid94(dev gpu.MIGDevice, devices ...gpu.MIGDevice) gpu.Xid {
	return gpu.Xid{GPUIndex: 0, GPUUUID: dev.ParentUUID, Code: 94, GIID: dev.GIID, CIID: -1, Devices: devices}
}

// TestXidOfGPUInstanceDestroyedAndMadeAgain: an Xid of a GPU instance that
// is destroyed, and made again at its placement (NVML gives it the same
// GPU instance ID), before the watch reads the event names the device it
// happened on, not the new one: the destroy reads the pending events
// first.
func TestXidOfGPUInstanceDestroyedAndMadeAgain(t *testing.T) {
	ctx := t.Context()
	sim, m := gputest.Simulated(t, nvmlsim.Config{Spec: "1xA100-SXM4-80GB", Seed: "n1"})
	old := withXidDevice(t, m)
	got, _ := xidWatchOn(t, ctx, sim, m, nil)
	for i := range 5 {
		if err := sim.InjectXid(0, 94, old.GIID, -1); err != nil {
			t.Fatal(err)
		}
		if err := m.DestroyMIGDevice(ctx, 0, xidDevice); err != nil {
			t.Fatal(err)
		}
		made := makeAgain(t, m, old)
		wantXid(t, got, xid94(old, old))
		if t.Failed() {
			t.Fatalf("round %d", i)
		}
		old = made
	}
}

// TestXidReadBeforeDestroyDeliveredAsTheWatchStops: an Xid the destroy read
// off the event set is delivered even when the watch's context ends before
// the watch came to it (the agent stopping).
func TestXidReadBeforeDestroyDeliveredAsTheWatchStops(t *testing.T) {
	sim, m := gputest.Simulated(t, nvmlsim.Config{Spec: "1xA100-SXM4-80GB", Seed: "n1"})
	dev := withXidDevice(t, m)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	got, hold, done := heldWatch(t, ctx, sim, m)
	if err := sim.InjectXid(0, 94, dev.GIID, -1); err != nil {
		t.Fatal(err)
	}
	if err := m.DestroyMIGDevice(t.Context(), 0, xidDevice); err != nil {
		t.Fatal(err)
	}
	cancel()
	close(hold)
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("WatchXids after ctx ended: %v, want nil", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("WatchXids did not end within 10s of ctx")
	}
	close(got)
	var xids []gpu.Xid
	for x := range got {
		xids = append(xids, x)
	}
	if diff := cmp.Diff([]gpu.Xid{xid94(dev, dev)}, xids); diff != "" {
		t.Errorf("Xids after the 48 (-want +got):\n%s", diff)
	}
}

// xidAtDestroy is an NVML whose GPU instances call hook (once, then it is
// cleared) as their Destroy is called, before the destroy.
type xidAtDestroy struct {
	nvml.Interface
	hook *func()
}

func (l xidAtDestroy) DeviceGetHandleByIndex(i int) (nvml.Device, nvml.Return) {
	d, ret := l.Interface.DeviceGetHandleByIndex(i)
	if ret != nvml.SUCCESS {
		return d, ret
	}
	return xidAtDestroyDevice{Device: d, hook: l.hook}, ret
}

type xidAtDestroyDevice struct {
	nvml.Device
	hook *func()
}

func (d xidAtDestroyDevice) GetGpuInstances(info *nvml.GpuInstanceProfileInfo) ([]nvml.GpuInstance, nvml.Return) {
	gis, ret := d.Device.GetGpuInstances(info)
	for i, gi := range gis {
		gis[i] = xidAtDestroyGI{GpuInstance: gi, hook: d.hook}
	}
	return gis, ret
}

type xidAtDestroyGI struct {
	nvml.GpuInstance
	hook *func()
}

func (g xidAtDestroyGI) Destroy() nvml.Return {
	if h := *g.hook; h != nil {
		*g.hook = nil
		h()
	}
	return g.GpuInstance.Destroy()
}

// TestXidPostedDuringTheDestroy: an Xid of the GPU instance posted while
// it is being destroyed (after the pending events were read), read by the
// watch only after a GPU instance was made again at its placement (the
// same ID), names the device it happened on: the destroy reads the events
// posted meanwhile and resolves them against the devices before it. Also
// where the GPU instance's destroy fails and its compute instance is made
// again (a new UUID).
func TestXidPostedDuringTheDestroy(t *testing.T) {
	for name, giDestroyFails := range map[string]bool{"GPU instance destroyed": false, "compute instance made again": true} {
		t.Run(name, func(t *testing.T) {
			ctx := t.Context()
			hook := new(func())
			sim, m := gputest.SimulatedOver(t, nvmlsim.Config{Spec: "1xA100-SXM4-80GB", Seed: "n1"}, func(l nvml.Interface) nvml.Interface {
				return xidAtDestroy{Interface: l, hook: hook}
			})
			old := withXidDevice(t, m)
			got, hold, _ := heldWatch(t, ctx, sim, m)
			*hook = func() {
				if err := sim.InjectXid(0, 94, old.GIID, -1); err != nil {
					t.Error(err)
				}
			}
			if giDestroyFails {
				if err := sim.InjectFault(nvmlsim.Fault{Op: "GpuInstance.Destroy", Nth: 1, Return: nvml.ERROR_IN_USE}); err != nil {
					t.Fatal(err)
				}
				if err := m.DestroyMIGDevice(ctx, 0, xidDevice); err == nil {
					t.Fatal("destroy succeeded despite the fault")
				}
				now, err := m.MIGDevices(ctx, 0)
				if err != nil {
					t.Fatal(err)
				}
				if len(now) != 1 || now[0].UUID == "" || now[0].UUID == old.UUID {
					t.Fatalf("after the failed destroy: %+v, want the GPU instance with a new compute instance", now)
				}
			} else {
				if err := m.DestroyMIGDevice(ctx, 0, xidDevice); err != nil {
					t.Fatal(err)
				}
				_ = makeAgain(t, m, old)
			}
			close(hold)
			wantXid(t, got, xid94(old, old))
		})
	}
}

// TestXidOfGPUInstanceDestroyedElsewhere: an Xid of a GPU instance that
// someone else destroyed (nvidia-smi) before the watch read the event
// blames no device, not the one the manager then makes at its placement
// (the same GPU instance ID): the create reads the pending events first.
func TestXidOfGPUInstanceDestroyedElsewhere(t *testing.T) {
	ctx := t.Context()
	sim, m := gputest.Simulated(t, nvmlsim.Config{Spec: "1xA100-SXM4-80GB", Seed: "n1"})
	old := withXidDevice(t, m)
	got, hold, _ := heldWatch(t, ctx, sim, m)
	if err := sim.InjectXid(0, 94, old.GIID, -1); err != nil {
		t.Fatal(err)
	}
	dev, ret := sim.DeviceGetHandleByIndex(0)
	if ret != nvml.SUCCESS {
		t.Fatal(ret)
	}
	gi, ret := dev.GetGpuInstanceById(old.GIID)
	if ret != nvml.SUCCESS {
		t.Fatal(ret)
	}
	ci, ret := gi.GetComputeInstanceById(old.CIID)
	if ret != nvml.SUCCESS {
		t.Fatal(ret)
	}
	if ret := ci.Destroy(); ret != nvml.SUCCESS {
		t.Fatal(ret)
	}
	if ret := gi.Destroy(); ret != nvml.SUCCESS {
		t.Fatal(ret)
	}
	_ = makeAgain(t, m, old)
	close(hold)
	wantXid(t, got, xid94(old))
}

// TestSkippedXidComesWithoutDevices: an Xid of a GPU instance whose code
// the caller skips (one it ignores) comes without its devices, whose read
// costs a listing of the GPU; the others with them.
func TestSkippedXidComesWithoutDevices(t *testing.T) {
	ctx := t.Context()
	sim, m := gputest.Simulated(t, nvmlsim.Config{Spec: "1xA100-SXM4-80GB", Seed: "n1"})
	dev := withXidDevice(t, m)
	got := make(chan gpu.Xid, 64)
	go func() {
		_ = m.WatchXids(ctx, func(code uint64) bool { return code == 31 }, func(x gpu.Xid) { got <- x })
	}()
	seen := map[uint64]gpu.Xid{}
	deadline := time.After(10 * time.Second)
	for len(seen) < 2 {
		for _, code := range []uint64{31, 94} {
			if _, ok := seen[code]; !ok {
				if err := sim.InjectXid(0, code, dev.GIID, -1); err != nil {
					t.Fatal(err)
				}
			}
		}
		select {
		case x := <-got:
			seen[x.Code] = x
		case <-time.After(100 * time.Millisecond):
		case <-deadline:
			t.Fatalf("Xids delivered within 10s: %v", seen)
		}
	}
	if d := seen[31].Devices; len(d) != 0 {
		t.Errorf("skipped Xid 31 read its devices: %+v", d)
	}
	if d := seen[94].Devices; len(d) != 1 || d[0].UUID != dev.UUID {
		t.Errorf("Xid 94's devices %+v, want the 3g.40gb's", d)
	}
}
