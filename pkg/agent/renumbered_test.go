package agent

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// TestPreparedDeviceHeldAfterRenumbering: three A100s; board B (index 1)
// holds a 3g.40gb@0 the kubelet plugin prepared as gpu-1-mig-3g40gb-9-0.
// Board A (index 0) is taken off the node without a reboot and the agent
// restarts: NVML numbers B 0, and the spec, written for the old
// numbering, asks index 0 for a 7g.80gb. The prepared device, now
// published as gpu-0-mig-3g40gb-9-0, is held by its UUID: never drained
// or destroyed, the GPU Blocked on it by its new name.
func TestPreparedDeviceHeldAfterRenumbering(t *testing.T) {
	for name, whenPrepared := range map[string]string{
		"prepared before the pass":                   "before",
		"prepared between the re-check and the lock": "at the lock",
	} {
		t.Run(name, func(t *testing.T) { preparedDeviceHeldAfterRenumbering(t, whenPrepared) })
	}
}

func preparedDeviceHeldAfterRenumbering(t *testing.T, whenPrepared string) {
	ctx := context.Background()
	g := newRig(t, "3xA100-SXM4-80GB")
	specs := []v1alpha1.GPUSpec{spec(0, "7g.80gb@0"), spec(1, "3g.40gb@0,3g.40gb@4"), spec(2, "3g.40gb@0,3g.40gb@4")}
	if _, err := g.r.Sync(ctx, specs, nil); err != nil {
		t.Fatal(err)
	}
	held := g.migUUID(t, 1, "3g.40gb@0")
	prepare := func() {
		g.prep.names.Insert("gpu-1-mig-3g40gb-9-0")
		g.prep.uuids.Insert(held)
	}
	if whenPrepared == "before" {
		prepare()
	} else {
		g.locks.onBegin = prepare
	}
	g.withoutGPU(t, 0)
	if got := g.migUUID(t, 0, "3g.40gb@0"); got != held {
		t.Fatalf("index 0's 3g.40gb@0 is %s, want board B's %s", got, held)
	}
	res, err := g.r.Sync(ctx, specs, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := g.migUUID(t, 0, "3g.40gb@0"); got != held {
		t.Errorf("board B's prepared 3g.40gb@0 (%s) is gone (3g.40gb@0 is now %s)", held, got)
	}
	got := res.Results[0]
	if got.Phase != v1alpha1.PhaseBlocked || got.Reason != v1alpha1.ReasonDeviceInUse || !strings.Contains(got.Message, "gpu-0-mig-3g40gb-9-0") {
		t.Errorf("GPU 0 result %+v, want Blocked/DeviceInUse naming gpu-0-mig-3g40gb-9-0", got)
	}
	for _, pub := range g.inv.pubs {
		if whenPrepared == "before" && slices.Contains(pub.draining, "gpu-0-mig-3g40gb-9-0") {
			t.Errorf("the prepared device was published draining: %v", pub.draining)
		}
	}
}
