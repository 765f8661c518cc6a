package agent

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// TestSyncVettedDeviceAllocatedAgainBeforeTheLock: a device the cache showed
// allocated during the settle period while the live re-check found it free
// (claim A, released just before the re-check; the cache had not seen the
// release) is "vetted" for this pass. When, before the GPU's lock is taken,
// another claim B that tolerates the drain taint is allocated the same
// device, the cache and the API server both show it allocated: the device is
// referenced by a ResourceClaim allocation and must not be destroyed
// (invariant 1). The GPU is Blocked (DeviceInUse) and the hardware is left
// as it was. A device merely released (nothing allocated again) is still
// repartitioned.
func TestSyncVettedDeviceAllocatedAgainBeforeTheLock(t *testing.T) {
	const drained = "gpu-0-mig-3g40gb-9-4"
	const before, after = "3g.40gb@0,3g.40gb@4", "3g.40gb@0,2g.20gb@4,1g.10gb@6"
	type want struct {
		Phase  v1alpha1.GPUPhase
		Reason string
		Layout string
	}
	tests := map[string]struct {
		// atLock is what the cache and the API server show once the
		// GPU's lock is taken (after the live re-check).
		atLockCached, atLockLive sets.Set[string]
		want                     want
	}{
		"released, nothing allocated again: repartitioned": {
			atLockCached: sets.New(drained), // the cache still lags the release
			atLockLive:   sets.New[string](),
			want:         want{v1alpha1.PhaseReady, v1alpha1.ReasonLayoutApplied, after},
		},
		"allocated again to another claim: kept": {
			atLockCached: sets.New(drained),
			atLockLive:   sets.New(drained),
			want:         want{v1alpha1.PhaseBlocked, v1alpha1.ReasonDeviceInUse, before},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			g := vettedDrainRig(t, before, drained)
			// Claim B: allocated after the live re-check, before the lock.
			g.locks.onBegin = func() {
				g.alloc.cached, g.alloc.live = tc.atLockCached, tc.atLockLive
			}
			res, err := g.r.Sync(context.Background(), []v1alpha1.GPUSpec{spec(0, after)}, nil)
			if err != nil {
				t.Fatal(err)
			}
			r := res.Results[0]
			got := want{r.Phase, r.Reason, g.layouts(t)[0]}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("GPU 0 after the pass (-want +got):\n%s\nresult: %+v", diff, r)
			}
		})
	}
}

// vettedDrainRig is a rig with one A100 holding layout whose device
// drained is allocated during the settle period and released before the
// live re-check (claim A): the live read shows no allocation, the cache
// still shows it, so the device is vetted for the pass.
func vettedDrainRig(t *testing.T, layout, drained string) *rig {
	t.Helper()
	g := newRig(t, "1xA100-SXM4-80GB")
	g.setup(t, 0, layout)
	g.alloc.live = sets.New[string]()
	g.r.Sleep = func(context.Context, time.Duration) error {
		g.alloc.cached = sets.New(drained)
		return nil
	}
	return g
}

// hangingBefore and hangingAfter are the layouts of hangingLiveReadRig's
// GPU 0 and its spec.
const hangingBefore, hangingAfter = "3g.40gb@0,3g.40gb@4", "3g.40gb@0,2g.20gb@4,1g.10gb@6"

// hangingLiveReadRig is a rig whose GPU 0 (hangingBefore) is to be
// repartitioned to hangingAfter, where the device to go was allocated and
// released during the settle period (vetted, the cache still shows it) and
// the API server stops answering live reads once the GPU's lock is taken;
// lockedReadTimeout is 50 ms for the test.
func hangingLiveReadRig(t *testing.T) *rig {
	t.Helper()
	old := lockedReadTimeout
	t.Cleanup(func() { lockedReadTimeout = old })
	lockedReadTimeout = 50 * time.Millisecond
	g := vettedDrainRig(t, hangingBefore, "gpu-0-mig-3g40gb-9-4")
	g.locks.onBegin = func() { g.alloc.hangLive = true }
	return g
}

// TestSyncLiveReadHangsUnderTheLock: where the API server does not answer
// the live read made under the GPU's lock (a vetted device the cache still
// shows), the read gives up after lockedReadTimeout, the GPU is left as it
// is and Pending (PassFailed, retried), not Failed as an NVML error, its
// journal entry ended, and the lock is released.
func TestSyncLiveReadHangsUnderTheLock(t *testing.T) {
	g := hangingLiveReadRig(t)
	done := make(chan struct{})
	var res *SyncResult
	var err error
	go func() {
		defer close(done)
		res, err = g.r.Sync(context.Background(), []v1alpha1.GPUSpec{spec(0, hangingAfter)}, nil)
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the pass still waits for the API server under the GPU's lock")
	}
	if err != nil {
		t.Fatal(err)
	}
	r := res.Results[0]
	if r.Phase != v1alpha1.PhasePending || r.Reason != ReasonPassFailed || !res.Retry {
		t.Errorf("GPU 0: %s/%s (retry %t) %q, want Pending/PassFailed, retried", r.Phase, r.Reason, res.Retry, r.Message)
	}
	if got := g.layouts(t)[0]; got != hangingBefore {
		t.Errorf("GPU 0 holds %q, want %q left as it was", got, hangingBefore)
	}
	if entries := g.r.Journal.Entries(); len(entries) != 0 {
		t.Errorf("journal left %+v; a change stopped before its NVML work ends", entries)
	}
}

// TestStoppedChangeIsTold: a GPU change that stops on an error that is not
// NVML's (here the live read under the lock times out) is told with a
// PassFailed warning naming the error, once, and not again on a retry that
// stops alike.
func TestStoppedChangeIsTold(t *testing.T) {
	g := hangingLiveReadRig(t)
	r, _, rec := nodeReconcilerOn(t, g, spec(0, hangingAfter))
	req := ctrl.Request{NamespacedName: types.NamespacedName{Name: "n1"}}
	var warnings []string
	for pass := range 2 {
		g.alloc.hangLive = false
		if _, err := r.Reconcile(t.Context(), req); err != nil {
			t.Fatalf("pass %d: %v", pass, err)
		}
		for len(rec.Events) > 0 {
			if e := <-rec.Events; strings.Contains(e, EventPassFailed) {
				warnings = append(warnings, e)
			}
		}
	}
	if len(warnings) != 1 || !strings.Contains(warnings[0], "reading ResourceClaim allocations") {
		t.Errorf("PassFailed events %q, want one naming the failed read", warnings)
	}
}
