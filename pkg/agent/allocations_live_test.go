package agent

import (
	"context"
	"fmt"
	"slices"
	"strconv"
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

// pagingReader serves claims as the API server does a paged list: at most
// Limit items per call, a continue token to the next.
type pagingReader struct {
	client.Reader
	claims []resourceapi.ResourceClaim
	limits []int64
}

func (p *pagingReader) List(_ context.Context, list client.ObjectList, opts ...client.ListOption) error {
	o := (&client.ListOptions{}).ApplyOptions(opts)
	p.limits = append(p.limits, o.Limit)
	start := 0
	if o.Continue != "" {
		start, _ = strconv.Atoi(o.Continue)
	}
	end := len(p.claims)
	if o.Limit > 0 {
		end = min(end, start+int(o.Limit))
	}
	out := list.(*resourceapi.ResourceClaimList)
	out.Items = slices.Clone(p.claims[start:end])
	out.Continue = ""
	if end < len(p.claims) {
		out.Continue = strconv.Itoa(end)
	}
	return nil
}

// TestClaimAllocationsLiveReadPages: the live read lists the cluster's
// claims in pages of livePageSize (a cluster of tens of thousands of claims
// is never one response), follows every page, and finds the node's
// allocations wherever they are.
func TestClaimAllocationsLiveReadPages(t *testing.T) {
	var claims []resourceapi.ResourceClaim
	for i := range 1200 {
		c := allocatedClaim(fmt.Sprintf("other-%d", i)).obj()
		c.Status.Allocation.Devices.Results = []resourceapi.DeviceRequestAllocationResult{{Request: "gpu", Driver: testDriver, Pool: "n2", Device: devA}}
		switch i {
		case 10:
			c = allocatedClaim("first-page").device(devA, false).obj()
		case 1150:
			c = allocatedClaim("last-page").device(devB, false).obj()
		}
		claims = append(claims, *c)
	}
	r := &pagingReader{claims: claims}
	a := &ClaimAllocations{Cached: r, Live: r, Driver: testDriver, Pool: "n1"}
	got, err := a.AllocatedDevices(context.Background(), true)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{devA, devB}, sets.List(got)); diff != "" {
		t.Errorf("live read (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]int64{livePageSize, livePageSize, livePageSize}, r.limits); diff != "" {
		t.Errorf("pages asked for (-want +got):\n%s", diff)
	}
}
