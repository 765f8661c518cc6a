package agent

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/util/sets"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// With binding conditions on, an allocation of a draining device that
// waits for a confirmation the gate will refuse never gets its pod bound
// (the Binder answers DeviceRemoved, the scheduler deallocates), however
// late the scheduler's decision landed: the live re-check leaves it out, and
// so must the cached re-check under the GPU's lock. Here the allocation
// reaches the cache only after the live re-check (a late decision, or the
// cache's lag): it must not block the GPU.
func TestSyncBindingCachedRecheckIgnoresRefusableAllocation(t *testing.T) {
	g := newRig(t, "1xA100-SXM4-80GB")
	g.setup(t, 0, "3g.40gb@0,3g.40gb@4")
	empty := fake.NewClientBuilder().WithScheme(testScheme(t)).Build()
	gate := &BindingGate{}
	gate.Publishing(sets.New(devA, devB), nil)
	alloc := &ClaimAllocations{Cached: empty, Live: empty, Driver: testDriver, Pool: "n1", Binding: gate}
	g.r.Allocations = alloc
	g.r.Sleep = func(context.Context, time.Duration) error {
		// PoolInventory.Publish of the drain: devB is draining from now.
		gate.Publishing(sets.New(devA, devB), sets.New(devB))
		return nil
	}
	g.locks.onBegin = func() {
		// The scheduler's allocation of devB, awaiting BindingConditionReady,
		// shows in the cache once the lock is taken.
		late := allocatedClaim("late").device(devB, true).obj()
		alloc.Cached = fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(late).Build()
	}
	g.syncReady(t, []v1alpha1.GPUSpec{spec(0, "3g.40gb@0,2g.20gb@4,1g.10gb@6")})
	g.wantLayouts(t, "3g.40gb@0,2g.20gb@4,1g.10gb@6")
}

// landsAfterLive is an Allocations whose cache starts to show an allocation
// of dev right after a live read found it free: a claim that tolerates the
// drain taint, allocated the device just after the live re-check, the
// cache following within moments.
type landsAfterLive struct {
	dev    string
	landed bool
}

func (l *landsAfterLive) AllocatedDevices(_ context.Context, live bool) (sets.Set[string], error) {
	if live {
		l.landed = true
		return sets.New[string](), nil
	}
	if l.landed {
		return sets.New(l.dev), nil
	}
	return sets.New[string](), nil
}

// An allocation made after the live re-check read the claims is one the
// later checks (the live read before the lock, the cache under it) exist to
// catch, also when it lands in the cache right after the live read: it is not taken for one the live read
// already judged (stale), and the device is not destroyed.
func TestSyncBlocksAllocationLandingJustAfterTheLiveRecheck(t *testing.T) {
	g := newRig(t, "1xA100-SXM4-80GB")
	g.setup(t, 0, "3g.40gb@0,3g.40gb@4")
	g.r.Allocations = &landsAfterLive{dev: devB}
	res, err := g.r.Sync(context.Background(), []v1alpha1.GPUSpec{spec(0, "3g.40gb@0,2g.20gb@4,1g.10gb@6")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r := res.Results[0]; r.Phase != v1alpha1.PhaseBlocked || r.Reason != v1alpha1.ReasonDeviceInUse {
		t.Errorf("result = %+v, want Blocked (%s is allocated; it was not in the cache before the live re-check)", r, devB)
	}
	if diff := cmp.Diff([]string{"3g.40gb@0,3g.40gb@4"}, g.layouts(t)); diff != "" {
		t.Errorf("layouts (-want +got): allocated %s destroyed\n%s", devB, diff)
	}
}
