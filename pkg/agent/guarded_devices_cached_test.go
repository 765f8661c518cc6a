package agent

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/util/sets"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

// TestGuardedDevicesReadTheCache: the guard read under a GPU's lock lists
// the claims from the cache, never from the API server (an unbounded read
// of every claim of the cluster while the GPU's prepares wait): an
// allocation only the cache holds is guarded, and the API server is not
// asked.
func TestGuardedDevicesReadTheCache(t *testing.T) {
	cached := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(allocatedClaim("here").device(devA, false).obj()).Build()
	liveLists := 0
	live := interceptor.NewClient(fake.NewClientBuilder().WithScheme(testScheme(t)).Build(), interceptor.Funcs{
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			liveLists++
			return c.List(ctx, list, opts...)
		},
	})
	a := &ClaimAllocations{Cached: cached, Live: live, Driver: testDriver, Pool: "n1"}
	got, err := a.GuardedDevices(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{devA}, sets.List(got)); diff != "" {
		t.Errorf("guarded devices (-want +got):\n%s", diff)
	}
	if liveLists != 0 {
		t.Errorf("the API server was listed %d times, want none", liveLists)
	}
}
