package agent

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/resourceslice"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// laggingHelper stands in for the kubeletplugin helper's ResourceSlice
// controller and the API server behind it. It writes each publication it is
// handed to the API server (stored), except the first stale ones: those it
// takes for already written, as the controller does while its informer has
// not yet seen the pool's deletion. As a client.Reader it serves the pool
// stored.
type laggingHelper struct {
	client.Reader
	mu     sync.Mutex
	stored *resourceslice.DriverResources
	stale  int
	handed []resourceslice.DriverResources
	reads  int
	// withhold is how many of the pool's last slices the next reads leave
	// out, one fewer at each read (slices written one by one).
	withhold int
}

func (h *laggingHelper) PublishResources(_ context.Context, res resourceslice.DriverResources) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.handed = append(h.handed, res)
	if h.stale > 0 {
		h.stale--
		return nil
	}
	h.stored = &res
	return nil
}

// deleteAll deletes the pool's slices; the next stale publications are
// taken for written.
func (h *laggingHelper) deleteAll(stale int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.stored, h.stale, h.handed = nil, stale, nil
}

func (h *laggingHelper) List(_ context.Context, list client.ObjectList, _ ...client.ListOption) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.reads++
	out := list.(*resourceapi.ResourceSliceList)
	out.Items = nil
	if h.stored == nil {
		return nil
	}
	for name, pool := range h.stored.Pools {
		for _, sl := range pool.Slices[:max(len(pool.Slices)-h.withhold, 0)] {
			out.Items = append(out.Items, resourceapi.ResourceSlice{Spec: resourceapi.ResourceSliceSpec{
				Driver: "mig.miglayout.io", NodeName: ptr.To("n1"), Devices: sl.Devices,
				Pool: resourceapi.ResourcePool{Name: name, Generation: 1, ResourceSliceCount: int64(len(pool.Slices))}}})
		}
	}
	h.withhold = max(h.withhold-1, 0)
	return nil
}

func (h *laggingHelper) state() (handed []resourceslice.DriverResources, served bool, reads int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.handed, h.stored != nil, h.reads
}

// TestRepublish: after the pool's slices are deleted, Republish hands the
// last publication (drain taints included) again until the API server
// serves the pool: a hand made before the helper's cache saw the deletion
// writes nothing. Nothing is handed before a first publication; without a
// Live reader it hands once; where the pool is never served it fails at
// the timeout; and the pass's next Publish reads its pool back.
func TestRepublish(t *testing.T) {
	gpus := wholeGPU(t, "MIG-1")
	draining := sets.New("gpu-0-mig-7g80gb-0-0")
	for name, tc := range map[string]struct {
		noPublication bool
		noLive        bool
		stale         int
		timeout       time.Duration
		wantHanded    bool
		wantErr       string
		wantHands     int
		wantServed    bool
	}{
		"before the first publication":      {noPublication: true},
		"written at the first hand":         {wantHanded: true, wantHands: 1, wantServed: true},
		"the helper's cache lags two hands": {stale: 2, wantHanded: true, wantHands: 3, wantServed: true},
		"without a live reader, one hand":   {noLive: true, stale: 2, wantHanded: true, wantHands: 1},
		"never served": {stale: 1000, timeout: 600 * time.Millisecond, wantHanded: true,
			wantErr: "waiting for the API server to serve pool n1 again"},
	} {
		t.Run(name, func(t *testing.T) {
			h := &laggingHelper{}
			inv := &PoolInventory{NodeName: "n1", Driver: "mig.miglayout.io", Publisher: h, Live: h, Timeout: tc.timeout}
			if inv.Timeout == 0 {
				inv.Timeout = 10 * time.Second
			}
			ctx := t.Context()
			if !tc.noPublication {
				if err := inv.Publish(ctx, gpus, draining); err != nil {
					t.Fatal(err)
				}
			}
			last, _, _ := h.state()
			h.deleteAll(tc.stale)
			if tc.noLive {
				inv.Live = nil
			}
			handed, err := inv.Republish(ctx)
			if handed != tc.wantHanded {
				t.Errorf("handed %t, want %t", handed, tc.wantHanded)
			}
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Errorf("error %v, want one containing %q", err, tc.wantErr)
			}
			hands, served, _ := h.state()
			if tc.wantHands > 0 && len(hands) != tc.wantHands {
				t.Errorf("handed %d times, want %d", len(hands), tc.wantHands)
			}
			if tc.wantErr != "" && len(hands) < 2 {
				t.Errorf("handed %d times before giving up, want it handed again while not served", len(hands))
			}
			for i, res := range hands {
				if diff := cmp.Diff(last[len(last)-1], res); diff != "" {
					t.Errorf("hand %d is not the last publication (-want +got):\n%s", i, diff)
				}
			}
			if served != tc.wantServed {
				t.Errorf("pool served %t, want %t", served, tc.wantServed)
			}
			if !tc.wantServed || tc.noPublication {
				return
			}
			// Published undrained (read back, found served), deleted and
			// published again: the pass's next Publish of the same reads
			// the pool back, the publication found served before the
			// deletion is forgotten.
			inv.Live = h
			if err := inv.Publish(ctx, gpus, nil); err != nil {
				t.Fatal(err)
			}
			h.deleteAll(0)
			if _, err := inv.Republish(ctx); err != nil {
				t.Fatal(err)
			}
			_, _, before := h.state()
			if err := inv.Publish(ctx, gpus, nil); err != nil {
				t.Fatal(err)
			}
			if _, _, after := h.state(); after == before {
				t.Error("the next Publish of the same pool did not read it back")
			}
		})
	}
}

// TestRepublishWaitsForEverySlice: a pool of two slices is served again
// slice by slice; Republish waits until both are, as the scheduler does
// before it allocates from the pool.
func TestRepublishWaitsForEverySlice(t *testing.T) {
	h := &laggingHelper{}
	inv := &PoolInventory{NodeName: "n1", Driver: "mig.miglayout.io", Publisher: h, Live: h, Timeout: 10 * time.Second}
	two := resourceslice.DriverResources{Pools: map[string]resourceslice.Pool{"n1": {Slices: []resourceslice.Slice{
		{Devices: []resourceapi.Device{{Name: "gpu-0"}}}, {Devices: []resourceapi.Device{{Name: "gpu-1"}}}}}}}
	if err := inv.hand(t.Context(), two); err != nil {
		t.Fatal(err)
	}
	h.deleteAll(0)
	h.withhold = 2 // the first read sees none, the second one slice
	if _, err := inv.Republish(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, _, reads := h.state(); reads != 3 {
		t.Errorf("Republish returned after %d reads, want 3: the pool is whole at the third", reads)
	}
}

func TestPoolComplete(t *testing.T) {
	sl := func(pool string, gen, count int64) resourceapi.ResourceSlice {
		return resourceapi.ResourceSlice{Spec: resourceapi.ResourceSliceSpec{Pool: resourceapi.ResourcePool{Name: pool, Generation: gen, ResourceSliceCount: count}}}
	}
	for name, tc := range map[string]struct {
		slices []resourceapi.ResourceSlice
		want   bool
	}{
		"none":                            {nil, false},
		"another pool only":               {[]resourceapi.ResourceSlice{sl("n2", 1, 1)}, false},
		"one of one":                      {[]resourceapi.ResourceSlice{sl("n1", 1, 1)}, true},
		"one of two":                      {[]resourceapi.ResourceSlice{sl("n1", 1, 2)}, false},
		"two of two":                      {[]resourceapi.ResourceSlice{sl("n1", 1, 2), sl("n1", 1, 2)}, true},
		"old generation whole, new not":   {[]resourceapi.ResourceSlice{sl("n1", 1, 1), sl("n1", 2, 2)}, false},
		"new generation whole, old stays": {[]resourceapi.ResourceSlice{sl("n1", 1, 2), sl("n1", 2, 1)}, true},
	} {
		if got := poolComplete(tc.slices, "n1"); got != tc.want {
			t.Errorf("%s: poolComplete = %t, want %t", name, got, tc.want)
		}
	}
}

// hookedReader serves h, running hook (once) after the first read.
type hookedReader struct {
	*laggingHelper
	hook func()
}

func (r *hookedReader) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	err := r.laggingHelper.List(ctx, list, opts...)
	if hook := r.hook; hook != nil {
		r.hook = nil
		hook()
	}
	return err
}

// TestRepublishDuringPublishWait: the pool is deleted, and Republish fails,
// while a Publish waits for its pool to be served, after the Publish's read
// found it served. That Publish does not record its pool as served: the
// next Publish of the same pool reads it back (and so finds it absent).
func TestRepublishDuringPublishWait(t *testing.T) {
	gpus := wholeGPU(t, "MIG-1")
	h := &laggingHelper{}
	live := &hookedReader{laggingHelper: h}
	inv := &PoolInventory{NodeName: "n1", Driver: "mig.miglayout.io", Publisher: h, Live: live, Timeout: 300 * time.Millisecond}
	ctx := t.Context()
	if err := inv.Publish(ctx, gpus, nil); err != nil {
		t.Fatal(err)
	}
	gpus[0].Devices[0].UUID = "MIG-2" // another publication, read back
	live.hook = func() {
		h.deleteAll(1000) // never written again
		if _, err := inv.Republish(ctx); err == nil {
			t.Error("Republish succeeded on a pool never served again")
		}
	}
	if err := inv.Publish(ctx, gpus, nil); err != nil {
		t.Fatalf("the publication read served before the deletion: %v", err)
	}
	if err := inv.Publish(ctx, gpus, nil); err == nil {
		t.Error("the next Publish of the same pool succeeded while the pool is absent: it was taken for served without a read")
	}
}
