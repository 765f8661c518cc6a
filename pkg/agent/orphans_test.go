package agent

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/klog/v2/ktesting"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// fakePreparedClaims is the kubelet plugin's record of prepared claims.
type fakePreparedClaims struct {
	claims     map[types.UID]kubeletplugin.NamespacedObject
	failUnprep error
	released   []string // names, in order
}

func (f *fakePreparedClaims) PreparedClaimRefs() []kubeletplugin.NamespacedObject {
	var out []kubeletplugin.NamespacedObject
	for _, c := range f.claims {
		out = append(out, c)
	}
	return out
}

func (f *fakePreparedClaims) ReleaseOrphan(ctx context.Context, uid types.UID, stillGone func(context.Context) (bool, error)) ([]string, bool, error) {
	if f.failUnprep != nil {
		return nil, false, f.failUnprep
	}
	c, ok := f.claims[uid]
	if !ok {
		return nil, false, nil
	}
	if gone, err := stillGone(ctx); err != nil || !gone {
		return nil, false, err
	}
	delete(f.claims, uid)
	f.released = append(f.released, c.Name)
	return []string{"gpu-0-mig-3g40gb-9-0"}, true, nil
}

// orphanRig is an OrphanedClaims over a cache and an API server of their
// own (fake clients), with a clock the test moves.
type orphanRig struct {
	o            *OrphanedClaims
	prepared     *fakePreparedClaims
	cached, live client.Client
	rec          *events.FakeRecorder
	reg          *prometheus.Registry
	now          time.Time
	failCached   error
	failLive     error
	ctx          context.Context
	grace        time.Duration
}

func newOrphanRig(t *testing.T) *orphanRig {
	_, ctx := ktesting.NewTestContext(t)
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	if err := v1alpha1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	r := &orphanRig{ctx: ctx, now: time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC),
		prepared: &fakePreparedClaims{claims: map[types.UID]kubeletplugin.NamespacedObject{}},
		rec:      events.NewFakeRecorder(10), reg: prometheus.NewRegistry(), grace: 10 * time.Minute}
	nml := &v1alpha1.NodeMigLayout{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}
	failing := func(fail *error) interceptor.Funcs {
		return interceptor.Funcs{Get: func(ctx context.Context, c client.WithWatch, k client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if _, ok := obj.(*resourceapi.ResourceClaim); ok && *fail != nil {
				return *fail
			}
			return c.Get(ctx, k, obj, opts...)
		}}
	}
	r.cached = fake.NewClientBuilder().WithScheme(s).WithObjects(nml).WithInterceptorFuncs(failing(&r.failCached)).Build()
	r.live = fake.NewClientBuilder().WithScheme(s).WithInterceptorFuncs(failing(&r.failLive)).Build()
	r.o = &OrphanedClaims{Claims: r.prepared, Cached: r.cached, Live: r.live, NodeName: "n1", Driver: testDriver, Recorder: r.rec,
		Metrics: NewMetrics(r.reg), Grace: r.grace, Now: func() time.Time { return r.now }}
	return r
}

// claim adds a prepared claim of uid named name, which exists as uid in the
// cache and the API server where inCache and inLive say so ("": absent),
// allocated a device of pool n1.
func (r *orphanRig) claim(t *testing.T, name string, uid, inCache, inLive types.UID) {
	t.Helper()
	r.claimIn(t, name, "n1", uid, inCache, inLive)
}

// claimIn is claim with the claim allocated a device of pool ("": not
// allocated).
func (r *orphanRig) claimIn(t *testing.T, name, pool string, uid, inCache, inLive types.UID) {
	t.Helper()
	ref := types.NamespacedName{Namespace: "team-a", Name: name}
	r.prepared.claims[uid] = kubeletplugin.NamespacedObject{NamespacedName: ref, UID: uid}
	for _, in := range []struct {
		c client.Client
		u types.UID
	}{{r.cached, inCache}, {r.live, inLive}} {
		c, u := in.c, in.u
		if u == "" {
			continue
		}
		if err := c.Create(r.ctx, orphanClaim(ref, u, pool)); err != nil {
			t.Fatal(err)
		}
	}
}

// orphanClaim is claim ref of uid allocated gpu-0-mig-3g40gb-9-0 of the
// test driver's pool ("": not allocated).
func orphanClaim(ref types.NamespacedName, uid types.UID, pool string) *resourceapi.ResourceClaim {
	c := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ref.Namespace, Name: ref.Name, UID: uid}}
	if pool != "" {
		c.Status.Allocation = &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{
			{Request: "gpu", Driver: testDriver, Pool: pool, Device: "gpu-0-mig-3g40gb-9-0"}}}}
	}
	return c
}

// delete removes claim name from c.
func (r *orphanRig) delete(t *testing.T, c client.Client, name string) {
	t.Helper()
	if err := c.Delete(r.ctx, &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: name}}); err != nil {
		t.Fatal(err)
	}
}

// sweepAt sweeps at r's start plus d and returns the claims released then.
func (r *orphanRig) sweepAt(t *testing.T, start time.Time, d time.Duration) ([]string, error) {
	t.Helper()
	r.now = start.Add(d)
	before := len(r.prepared.released)
	err := r.o.Sweep(r.ctx)
	if len(r.prepared.released) == before {
		return nil, err
	}
	return r.prepared.released[before:], err
}

// TestOrphanedClaimsReleasedAfterGrace: a prepared claim is released once
// the cache has shown it gone (deleted, or its name taken by another
// object) for the grace period and the API server shows it gone too; a
// claim that exists, or that only the lagging cache lacks, is kept. Each
// release is counted and told on the node's NodeMigLayout.
func TestOrphanedClaimsReleasedAfterGrace(t *testing.T) {
	r := newOrphanRig(t)
	r.claim(t, "running", "uid-running", "uid-running", "uid-running")
	r.claim(t, "deleted", "uid-deleted", "", "")
	r.claim(t, "renamed", "uid-renamed", "uid-new", "uid-new")
	r.claim(t, "lagging", "uid-lagging", "", "uid-lagging")
	start := r.now
	steps := []struct {
		at   time.Duration
		want []string
	}{
		{0, nil},
		{r.grace - time.Second, nil},
		{r.grace, []string{"deleted", "renamed"}},
		{r.grace + time.Minute, nil},
		{3 * r.grace, nil},
	}
	for _, s := range steps {
		got, err := r.sweepAt(t, start, s.at)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(s.want, got, cmpopts.SortSlices(func(a, b string) bool { return a < b })); diff != "" {
			t.Errorf("released at +%v (-want +got):\n%s", s.at, diff)
		}
	}
	if got := testutil.ToFloat64(r.o.Metrics.orphans); got != 2 {
		t.Errorf("released count %v, want 2", got)
	}
	for range 2 {
		select {
		case e := <-r.rec.Events:
			if !strings.Contains(e, "Warning "+EventOrphanedClaimReleased) || !strings.Contains(e, "team-a/") || !strings.Contains(e, "gpu-0-mig-3g40gb-9-0") {
				t.Errorf("event %q, want a Warning %s naming the claim and its devices", e, EventOrphanedClaimReleased)
			}
		default:
			t.Error("a release recorded no event")
		}
	}
	if _, ok := r.prepared.claims["uid-running"]; !ok {
		t.Error("a claim that exists was released")
	}
	// The lagging cache's claim is gone in the API server too now: the
	// grace counts from the next sweep that sees it gone.
	r.delete(t, r.live, "lagging")
	restart := start.Add(3 * r.grace)
	for _, s := range steps[:3] {
		got, err := r.sweepAt(t, restart, time.Minute+s.at)
		if err != nil {
			t.Fatal(err)
		}
		want := []string(nil)
		if s.want != nil {
			want = []string{"lagging"}
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("lagging claim released at +%v (-want +got):\n%s", s.at, diff)
		}
	}
}

// TestOrphanedClaimsNoLongerAllocatedHere: a prepared claim that still
// exists but is allocated nothing (deallocated once its pods ended, the
// kubelet having lost its record of the claim) or devices of another
// node's pool is released after the grace, as a deleted one is; one the
// API server shows allocated here again is kept.
func TestOrphanedClaimsNoLongerAllocatedHere(t *testing.T) {
	r := newOrphanRig(t)
	r.claimIn(t, "deallocated", "", "uid-d", "uid-d", "uid-d")
	r.claimIn(t, "elsewhere", "n2", "uid-e", "uid-e", "uid-e")
	r.claimIn(t, "reallocated", "", "uid-r", "uid-r", "")
	if err := r.live.Create(r.ctx, orphanClaim(types.NamespacedName{Namespace: "team-a", Name: "reallocated"}, "uid-r", "n1")); err != nil {
		t.Fatal(err)
	}
	r.claim(t, "running", "uid-running", "uid-running", "uid-running")
	start := r.now
	for _, s := range []struct {
		at   time.Duration
		want []string
	}{{0, nil}, {r.grace - time.Second, nil}, {r.grace, []string{"deallocated", "elsewhere"}}, {3 * r.grace, nil}} {
		got, err := r.sweepAt(t, start, s.at)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(s.want, got, cmpopts.SortSlices(func(a, b string) bool { return a < b })); diff != "" {
			t.Errorf("released at +%v (-want +got):\n%s", s.at, diff)
		}
	}
}

// TestOrphanedClaimsNeedsDriver: without the driver's name (or the node's)
// every claim would look allocated elsewhere; the sweep refuses to run.
func TestOrphanedClaimsNeedsDriver(t *testing.T) {
	r := newOrphanRig(t)
	r.claim(t, "running", "uid-running", "uid-running", "uid-running")
	r.o.Driver = ""
	if _, err := r.sweepAt(t, r.now, 0); err == nil || !strings.Contains(err.Error(), "driver") {
		t.Errorf("sweep without a driver name: %v, want an error naming it", err)
	}
	if got, _ := r.sweepAt(t, r.now, 3*r.grace); got != nil {
		t.Errorf("released %v without a driver name", got)
	}
}

// TestOrphanedClaimsSeenBackStartsAfresh: a claim the cache shows again
// between two sweeps (a lagging watch) is judged from the next time it is
// seen gone.
func TestOrphanedClaimsSeenBackStartsAfresh(t *testing.T) {
	r := newOrphanRig(t)
	r.claim(t, "flapping", "uid-f", "", "")
	start := r.now
	if got, err := r.sweepAt(t, start, 0); err != nil || got != nil {
		t.Fatalf("first sweep: released %v, %v", got, err)
	}
	if err := r.cached.Create(r.ctx, orphanClaim(types.NamespacedName{Namespace: "team-a", Name: "flapping"}, "uid-f", "n1")); err != nil {
		t.Fatal(err)
	}
	if got, err := r.sweepAt(t, start, 5*time.Minute); err != nil || got != nil {
		t.Fatalf("seen back: released %v, %v", got, err)
	}
	r.delete(t, r.cached, "flapping")
	steps := []struct {
		at   time.Duration
		want []string
	}{{6 * time.Minute, nil}, {r.grace + time.Minute, nil}, {r.grace + 6*time.Minute, []string{"flapping"}}}
	for _, s := range steps {
		got, err := r.sweepAt(t, start, s.at)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(s.want, got); diff != "" {
			t.Errorf("released at +%v (-want +got):\n%s", s.at, diff)
		}
	}
}

// TestOrphanedClaimsErrorsKeepTheClaim: a lookup that fails (cache or API
// server) or a release that fails releases nothing, is returned, and
// leaves the claim's time seen gone as it was, so the next sweep that
// works releases it.
func TestOrphanedClaimsErrorsKeepTheClaim(t *testing.T) {
	boom := errors.New("boom")
	tests := map[string]func(r *orphanRig, fail bool){
		"cache":   func(r *orphanRig, fail bool) { r.failCached = map[bool]error{true: boom}[fail] },
		"live":    func(r *orphanRig, fail bool) { r.failLive = map[bool]error{true: boom}[fail] },
		"release": func(r *orphanRig, fail bool) { r.prepared.failUnprep = map[bool]error{true: boom}[fail] },
	}
	for name, breakIt := range tests {
		t.Run(name, func(t *testing.T) {
			r := newOrphanRig(t)
			r.claim(t, "deleted", "uid-d", "", "")
			start := r.now
			if got, err := r.sweepAt(t, start, 0); err != nil || got != nil {
				t.Fatalf("first sweep: released %v, %v", got, err)
			}
			breakIt(r, true)
			got, err := r.sweepAt(t, start, r.grace)
			if !errors.Is(err, boom) || got != nil {
				t.Fatalf("with the %s failing: released %v, error %v; want nothing released and the error", name, got, err)
			}
			breakIt(r, false)
			got, err = r.sweepAt(t, start, r.grace+time.Second)
			if err != nil || len(got) != 1 {
				t.Errorf("with the %s back: released %v, error %v; want the claim released at once", name, got, err)
			}
		})
	}
}

// TestOrphanedClaimsInterval: the sweeps come a tenth of the grace apart,
// between a second and a minute, unless set.
func TestOrphanedClaimsInterval(t *testing.T) {
	tests := map[string]struct {
		o    OrphanedClaims
		want time.Duration
	}{
		"defaults":        {OrphanedClaims{}, time.Minute},
		"a short grace":   {OrphanedClaims{Grace: 5 * time.Second}, time.Second},
		"a middling one":  {OrphanedClaims{Grace: 3 * time.Minute}, 18 * time.Second},
		"an interval set": {OrphanedClaims{Grace: time.Hour, Interval: 7 * time.Second}, 7 * time.Second},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := tc.o.interval(); got != tc.want {
				t.Errorf("interval %v, want %v", got, tc.want)
			}
		})
	}
}
