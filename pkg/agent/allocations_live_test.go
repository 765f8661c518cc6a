package agent

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

// The live re-check of a drain reads the claims from the API server, not
// the cache: an allocation the cache has not seen yet (made during the
// settle period) is in the live read, and the cached read still lags.
func TestClaimAllocationsLiveReadBypassesTheCache(t *testing.T) {
	claim := allocatedClaim("late").device(devB, false).obj()
	tests := map[string]struct {
		cached, live []*resourceapi.ResourceClaim
		// wantLive and wantCached: AllocatedDevices with live true and
		// false.
		wantLive, wantCached []string
	}{
		"allocation only the API server has yet: in the live read": {
			live:     []*resourceapi.ResourceClaim{claim},
			wantLive: []string{devB}, wantCached: nil,
		},
		"release only the API server has yet: gone from the live read": {
			cached:   []*resourceapi.ResourceClaim{claim},
			wantLive: nil, wantCached: []string{devB},
		},
	}
	build := func(t *testing.T, claims []*resourceapi.ResourceClaim) client.Reader {
		var objs []client.Object
		for _, c := range claims {
			objs = append(objs, c.DeepCopy())
		}
		return fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(objs...).Build()
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			a := &ClaimAllocations{Cached: build(t, tc.cached), Live: build(t, tc.live), Driver: testDriver, Pool: "n1"}
			live, err := a.AllocatedDevices(context.Background(), true)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.wantLive, sets.List(live), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("live read (-want +got):\n%s", diff)
			}
			cached, err := a.AllocatedDevices(context.Background(), false)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.wantCached, sets.List(cached), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("cached read (-want +got):\n%s", diff)
			}
		})
	}
}
