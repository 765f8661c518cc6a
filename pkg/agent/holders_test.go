package agent

import (
	"strings"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// TestBlockedNamesTheHolder: a GPU Blocked on a device a ResourceClaim
// holds says which claim, and the pod it is reserved for, so that an
// operator knows what to wait for or move.
func TestBlockedNamesTheHolder(t *testing.T) {
	g := newRig(t, "1xA100-SXM4-80GB")
	g.setup(t, 0, "3g.40gb@0,3g.40gb@4")
	held := allocatedClaim("train").device("gpu-0-mig-3g40gb-9-4", false).obj()
	held.Status.ReservedFor = []resourceapi.ResourceClaimConsumerReference{{Resource: "pods", Name: "trainer-0", UID: "pod-uid"}}
	other := allocatedClaim("elsewhere").obj()
	other.Status.Allocation.Devices.Results = []resourceapi.DeviceRequestAllocationResult{{Request: "gpu", Driver: testDriver, Pool: "n2", Device: "gpu-0-mig-3g40gb-9-4"}}
	c := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(held, other).Build()
	g.r.Allocations = &ClaimAllocations{Cached: c, Live: c, Driver: testDriver, Pool: "n1"}
	res, err := g.r.Sync(t.Context(), []v1alpha1.GPUSpec{spec(0, "7g.80gb@0")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := res.Results[0]
	const want = "gpu-0-mig-3g40gb-9-4 is held by ResourceClaim default/train (pod trainer-0)"
	if got.Phase != v1alpha1.PhaseBlocked || got.Reason != v1alpha1.ReasonDeviceInUse || !strings.Contains(got.Message, want) || strings.Contains(got.Message, "elsewhere") {
		t.Errorf("GPU 0: %s/%s (%q), want Blocked/DeviceInUse saying %q", got.Phase, got.Reason, got.Message, want)
	}
}

// TestBlockedWhileDrainingNamesTheHolder: a device allocated after the
// drain's live re-check, which the cache shows once the GPU's lock is
// taken, blocks the change; the message names the claim that holds it too.
func TestBlockedWhileDrainingNamesTheHolder(t *testing.T) {
	g := newRig(t, "1xA100-SXM4-80GB")
	g.setup(t, 0, "3g.40gb@0,3g.40gb@4")
	c := fake.NewClientBuilder().WithScheme(testScheme(t)).Build()
	g.r.Allocations = &ClaimAllocations{Cached: c, Live: c, Driver: testDriver, Pool: "n1"}
	g.locks.onBegin = func() {
		late := allocatedClaim("late").device("gpu-0-mig-3g40gb-9-4", false).obj()
		late.Status.ReservedFor = []resourceapi.ResourceClaimConsumerReference{{Resource: "pods", Name: "late-0", UID: "pod-uid"}}
		if err := c.Create(t.Context(), late); err != nil {
			t.Error(err)
		}
	}
	res, err := g.r.Sync(t.Context(), []v1alpha1.GPUSpec{spec(0, "7g.80gb@0")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := res.Results[0]
	const want = "gpu-0-mig-3g40gb-9-4 is held by ResourceClaim default/late (pod late-0)"
	if got.Phase != v1alpha1.PhaseBlocked || got.Reason != v1alpha1.ReasonDeviceInUse || !strings.Contains(got.Message, want) {
		t.Errorf("GPU 0: %s/%s (%q), want Blocked/DeviceInUse saying %q", got.Phase, got.Reason, got.Message, want)
	}
}
