package gpu_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/miglayout/miglayout/pkg/mig"
	"github.com/miglayout/miglayout/pkg/mig/gpu"
	"github.com/miglayout/miglayout/pkg/mig/gpu/gputest"
	"github.com/miglayout/miglayout/pkg/mig/nvmlsim"
)

// TestWatchXids: every readable GPU is watched (a lost one is left out),
// each Xid reaches fn with its GPU's UUID, the instance it is attributable
// to and that instance's MIG device, and the watch ends nil with ctx.
func TestWatchXids(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	sim, m := gputest.Simulated(t, nvmlsim.Config{Spec: "3xA100-SXM4-80GB", Seed: "n1"})
	if _, err := m.SetMIGMode(ctx, 1, true); err != nil {
		t.Fatal(err)
	}
	dev, err := m.CreateMIGDevice(ctx, 1, mig.Device{Profile: "3g.40gb", Start: 4})
	if err != nil {
		t.Fatal(err)
	}
	if err := sim.LoseGPU(2); err != nil {
		t.Fatal(err)
	}
	uuids := map[int]string{}
	for _, g := range sim.Snapshot().GPUs {
		uuids[g.Index] = g.UUID
	}

	got := make(chan gpu.Xid, 8)
	done := make(chan error, 1)
	go func() { done <- m.WatchXids(ctx, nil, func(x gpu.Xid) { got <- x }) }()
	// The watch registers before it waits: inject until the first arrives.
	var xids []gpu.Xid
	deadline := time.After(10 * time.Second)
	for len(xids) == 0 {
		if err := sim.InjectXid(0, 48, -1, -1); err != nil {
			t.Fatal(err)
		}
		select {
		case x := <-got:
			xids = append(xids, x)
		case <-time.After(100 * time.Millisecond):
		case <-deadline:
			t.Fatal("no Xid delivered within 10s")
		}
	}
	if err := sim.InjectXid(1, 94, dev.GIID, dev.CIID); err != nil {
		t.Fatal(err)
	}
	for len(xids) < 2 {
		select {
		case x := <-got:
			if x.Code == 94 {
				xids = append(xids, x)
			}
		case <-deadline:
			t.Fatal("Xid 94 not delivered within 10s")
		}
	}
	want := []gpu.Xid{
		{GPUIndex: 0, GPUUUID: uuids[0], Code: 48, GIID: -1, CIID: -1},
		{GPUIndex: 1, GPUUUID: uuids[1], Code: 94, GIID: dev.GIID, CIID: dev.CIID, Devices: []gpu.MIGDevice{dev}},
	}
	if diff := cmp.Diff(want, xids); diff != "" {
		t.Errorf("Xids (-want +got):\n%s", diff)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("WatchXids after ctx ended: %v, want nil", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("WatchXids did not end within 5s of ctx")
	}
}

// TestWatchXidsNoGPU: with no GPU that can report Xids, the watch fails at
// once with ErrNotSupported; after Shutdown with ErrShutdown.
func TestWatchXidsNoGPU(t *testing.T) {
	sim, m := gputest.Simulated(t, nvmlsim.Config{Spec: "1xA100-SXM4-80GB", Seed: "n1"})
	if err := sim.LoseGPU(0); err != nil {
		t.Fatal(err)
	}
	err := m.WatchXids(t.Context(), nil, func(gpu.Xid) { t.Error("Xid delivered without a GPU watched") })
	if !errors.Is(err, gpu.ErrNotSupported) {
		t.Errorf("WatchXids with the only GPU lost: %v, want ErrNotSupported", err)
	}
	if err := sim.RecoverGPU(0); err != nil {
		t.Fatal(err)
	}
	if err := m.Shutdown(); err != nil {
		t.Fatal(err)
	}
	if err := m.WatchXids(t.Context(), nil, func(gpu.Xid) {}); !errors.Is(err, gpu.ErrShutdown) {
		t.Errorf("WatchXids after Shutdown: %v, want ErrShutdown", err)
	}
}

// TestWatchXidsGPULost: an Xid of a GPU that falls off the bus before it is
// read still names the GPU (by the index and the UUID it was registered
// with: a mark restored after a restart then never lands on another GPU
// NVML numbers at that index); the watch
// then fails with ErrGPULost, as NVML's wait does with a GPU of the set
// lost.
func TestWatchXidsGPULost(t *testing.T) {
	sim, m := gputest.Simulated(t, nvmlsim.Config{Spec: "2xA100-SXM4-80GB", Seed: "n1"})
	var got []gpu.Xid
	done := make(chan error, 1)
	registered := make(chan struct{})
	go func() {
		done <- m.WatchXids(t.Context(), nil, func(x gpu.Xid) {
			if x.Code == 13 {
				select {
				case <-registered:
				default:
					close(registered)
				}
				return
			}
			got = append(got, x)
		})
	}()
	// Xid 13 on GPU 0 until one is delivered: the watch is registered.
	for {
		if err := sim.InjectXid(0, 13, -1, -1); err != nil {
			t.Fatal(err)
		}
		select {
		case <-registered:
		case <-time.After(100 * time.Millisecond):
			continue
		}
		break
	}
	if err := sim.InjectXid(1, 79, -1, -1); err != nil {
		t.Fatal(err)
	}
	if err := sim.LoseGPU(1); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, gpu.ErrGPULost) {
			t.Errorf("WatchXids with GPU 1 lost: %v, want ErrGPULost", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("WatchXids did not end within 10s of GPU 1's loss")
	}
	want := []gpu.Xid{{GPUIndex: 1, GPUUUID: sim.Snapshot().GPUs[1].UUID, Code: 79, GIID: -1, CIID: -1}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Xids (-want +got):\n%s", diff)
	}
}
