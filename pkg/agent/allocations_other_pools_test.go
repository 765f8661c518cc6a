package agent

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

// TestGuardedDevicesIgnoreOtherNodesClaims: devices are named alike on
// every node, and a cache without the pool index lists every claim of the
// cluster. A claim another node's pool (same driver) holds under the name
// of a draining device of this node does not make this node's allocation,
// which waits for a confirmation the gate refuses, count as bound: the
// device is left out of the guarded devices all the same.
func TestGuardedDevicesIgnoreOtherNodesClaims(t *testing.T) {
	waiting := allocatedClaim("here").device(devA, true).obj()
	elsewhere := allocatedClaim("elsewhere").obj()
	elsewhere.Status.Allocation.Devices.Results = []resourceapi.DeviceRequestAllocationResult{
		{Request: "gpu", Driver: testDriver, Pool: "n2", Device: devA},
	}
	c := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(waiting, elsewhere).Build()
	gate := &BindingGate{}
	gate.Publishing(sets.New(devA, devB), sets.New(devA))
	a := &ClaimAllocations{Cached: c, Live: c, Driver: testDriver, Pool: "n1", Binding: gate}
	got, err := a.GuardedDevices(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{}, sets.List(got)); diff != "" {
		t.Errorf("guarded devices of n1 (-want +got):\n%s", diff)
	}
}
