package agent

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// TestDeviceHeldByAnotherClient: a monitoring agent (DCGM) holds a MIG
// device that must go, and no compute process runs on it, so the agent's
// own process check passes but NVML refuses the destroy. The GPU is Blocked
// (DeviceInUse) with a message that names such a client; the device is kept
// whole (its compute instance too) and published untainted, and the change
// is made once the client lets go.
func TestDeviceHeldByAnotherClient(t *testing.T) {
	g := newRig(t, "1xA100-SXM4-80GB")
	g.setup(t, 0, "3g.40gb@0,3g.40gb@4")
	id, err := g.sim.OpenClient(g.migUUID(t, 0, "3g.40gb@4"))
	if err != nil {
		t.Fatal(err)
	}
	desired := []v1alpha1.GPUSpec{spec(0, "7g.80gb@0")}
	res, err := g.r.Sync(t.Context(), desired, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := res.Results[0]
	if got.Phase != v1alpha1.PhaseBlocked || got.Reason != v1alpha1.ReasonDeviceInUse || !strings.Contains(got.Message, "another NVML client holds it") || !res.Retry {
		t.Errorf("GPU 0: %s/%s (%q), retry %t; want Blocked/DeviceInUse naming another client, retried", got.Phase, got.Reason, got.Message, res.Retry)
	}
	if l := g.layouts(t)[0]; !strings.Contains(l, "3g.40gb@4") {
		t.Errorf("GPU 0 holds %q, want the held 3g.40gb@4 kept", l)
	}
	last := g.inv.last()
	if !cmp.Equal(last.draining, []string(nil)) || !strings.Contains(strings.Join(last.devices, ","), "gpu-0-mig-3g40gb-9-4") {
		t.Errorf("last publication %+v, want the held device published, nothing draining", last)
	}
	if err := g.sim.CloseClient(id); err != nil {
		t.Fatal(err)
	}
	if res, err = g.r.Sync(t.Context(), desired, nil); err != nil {
		t.Fatal(err)
	}
	if got := res.Results[0].Phase; got != v1alpha1.PhaseReady {
		t.Errorf("GPU 0 once the client let go: %s (%q), want Ready", got, res.Results[0].Message)
	}
	g.wantLayouts(t, "7g.80gb@0")
}

// TestGPUInstanceHeldByAnotherClient: a client holds the GPU instance of a
// device that must go, not its compute instance: NVML destroys the compute
// instance and refuses the GPU instance, whose compute instance is then
// made again, so the device stays published (and usable) between tries.
// The GPU stays Blocked, naming the client, pass after pass, and the change
// is made once the client lets go.
func TestGPUInstanceHeldByAnotherClient(t *testing.T) {
	g := newRig(t, "1xA100-SXM4-80GB")
	g.setup(t, 0, "3g.40gb@0,3g.40gb@4")
	var giID int
	for _, gi := range g.sim.Snapshot().GPUs[0].GPUInstances {
		if gi.Placement.Start == 4 {
			giID = gi.ID
		}
	}
	id, err := g.sim.OpenGPUInstanceClient(0, giID)
	if err != nil {
		t.Fatal(err)
	}
	desired := []v1alpha1.GPUSpec{spec(0, "7g.80gb@0")}
	for pass := 1; pass <= 2; pass++ {
		res, err := g.r.Sync(t.Context(), desired, nil)
		if err != nil {
			t.Fatal(err)
		}
		got := res.Results[0]
		if got.Phase != v1alpha1.PhaseBlocked || got.Reason != v1alpha1.ReasonDeviceInUse || !strings.Contains(got.Message, "another NVML client holds it") || !res.Retry {
			t.Errorf("pass %d: GPU 0 %s/%s (%q), retry %t; want Blocked/DeviceInUse naming another client, retried", pass, got.Phase, got.Reason, got.Message, res.Retry)
		}
		if devs := strings.Join(g.inv.last().devices, ","); !strings.Contains(devs, "3g40gb-9-4") {
			t.Errorf("pass %d: published %s, want the device kept, with its compute instance made again", pass, devs)
		}
	}
	if err := g.sim.CloseClient(id); err != nil {
		t.Fatal(err)
	}
	res, err := g.r.Sync(t.Context(), desired, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Results[0].Phase; got != v1alpha1.PhaseReady {
		t.Errorf("GPU 0 once the client let go: %s (%q), want Ready", got, res.Results[0].Message)
	}
	g.wantLayouts(t, "7g.80gb@0")
}
