package controller

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

// leaseReading is one reading of kube-scheduler's Lease: when (since the
// first), its resourceVersion and holder.
type leaseReading struct {
	at     time.Duration
	rv     string
	holder string
}

// renewedEvery5s are readings every 5 s, from from to to, of a Lease the
// scheduler holder renewed before each (resourceVersions after rv).
func renewedEvery5s(holder string, from, to time.Duration, rv int) []leaseReading {
	var out []leaseReading
	for at := from; at <= to; at += 5 * time.Second {
		rv++
		out = append(out, leaseReading{at, fmt.Sprint(rv), holder})
	}
	return out
}

// TestSchedulerSteadyBoundaries: readings exactly a lease duration apart
// still follow the Lease; a Lease last renewed exactly a lease duration ago
// still counts as renewed; one unchanged for exactly a lease duration keeps
// its holder; a Lease without a duration is judged by kube-scheduler's
// default; and after readings far apart, the Lease read then is the one
// the next readings are compared with.
func TestSchedulerSteadyBoundaries(t *testing.T) {
	unchanged := func(holder string, rv string, at ...time.Duration) []leaseReading {
		var out []leaseReading
		for _, a := range at {
			out = append(out, leaseReading{a, rv, holder})
		}
		return out
	}
	join := func(parts ...[]leaseReading) []leaseReading {
		var out []leaseReading
		for _, p := range parts {
			out = append(out, p...)
		}
		return out
	}
	minute := renewedEvery5s("s1", 0, time.Minute, 0) // resourceVersions 1 to 13
	for name, tc := range map[string]struct {
		seconds  *int32 // LeaseDurationSeconds; nil: 15
		readings []leaseReading
		want     bool
		why      string
	}{
		"no duration set, renewed for a minute": {seconds: ptr.To[int32](0), readings: minute, want: true},
		"read every lease duration": {readings: []leaseReading{
			{0, "1", "s1"}, {15 * time.Second, "2", "s1"}, {30 * time.Second, "3", "s1"}, {45 * time.Second, "4", "s1"}, {60 * time.Second, "5", "s1"}}, want: true},
		"last renewed exactly a lease duration ago": {readings: join(minute, unchanged("s1", "13", 65*time.Second, 70*time.Second, 75*time.Second)), want: true},
		"unchanged a lease duration, then renewed":  {readings: join(minute, unchanged("s1", "13", 65*time.Second, 70*time.Second, 75*time.Second), []leaseReading{{80 * time.Second, "14", "s1"}}), want: true},
		"one reading between two renewals":          {readings: join(minute, unchanged("s1", "13", 65*time.Second), []leaseReading{{70 * time.Second, "14", "s1"}}), want: true},
		"read again after 2 minutes, unchanged 5 s later": {readings: join(minute, unchanged("s1", "77", 3*time.Minute, 185*time.Second)),
			why: "has not been seen renewing"},
		"read again after 2 minutes, then renewed for a minute": {readings: join(minute, unchanged("s1", "77", 3*time.Minute, 185*time.Second), renewedEvery5s("s1", 190*time.Second, 4*time.Minute, 77)),
			want: true},
	} {
		t.Run(name, func(t *testing.T) {
			start := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
			seconds := ptr.To[int32](15)
			if tc.seconds != nil {
				seconds = tc.seconds
			}
			var w schedulerWatch
			var got bool
			var why string
			for _, r := range tc.readings {
				l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{ResourceVersion: r.rv},
					Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(r.holder), LeaseDurationSeconds: seconds}}
				got, why = w.observe(l, start.Add(r.at), time.Minute)
			}
			if got != tc.want || !strings.Contains(why, tc.why) {
				t.Errorf("steady %t %q, want %t %q", got, why, tc.want, tc.why)
			}
		})
	}
}

// TestSchedulerLeaseNotConfigured: with no Lease configured, declines are
// never held back and nothing is read, by a pass or by the follower.
func TestSchedulerLeaseNotConfigured(t *testing.T) {
	var reads atomic.Int64
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	a := &AutoPlanner{APIReader: countingReader{Reader: fake.NewClientBuilder().WithScheme(testScheme(t)).Build(), gets: &reads},
		Now: func() time.Time { return now }}
	a.autoNodes = sets.New("n1")
	if steady, why := a.schedulerSteady(t.Context()); !steady || why != "" {
		t.Errorf("no Lease configured: steady %t %q, want true", steady, why)
	}
	a.followSchedulerLease(t.Context())
	if n := reads.Load(); n != 0 {
		t.Errorf("no Lease configured: read %d times, want none", n)
	}
}

// TestSchedulerLeaseReadBounded: one reading of kube-scheduler's Lease
// waits schedulerHoldRecheck at most.
func TestSchedulerLeaseReadBounded(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	var deadline time.Time
	var bounded bool
	reader := interceptor.NewClient(fake.NewClientBuilder().WithScheme(testScheme(t)).Build(), interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			deadline, bounded = ctx.Deadline()
			return c.Get(ctx, key, obj, opts...)
		},
	})
	a := &AutoPlanner{APIReader: reader, SchedulerLease: DefaultSchedulerLease, Now: func() time.Time { return now }}
	before := time.Now()
	a.readSchedulerLease(t.Context())
	if !bounded || deadline.After(time.Now().Add(schedulerHoldRecheck)) || deadline.Before(before) {
		t.Errorf("the reading's deadline %v (set: %t), want within %s", deadline, bounded, schedulerHoldRecheck)
	}
}

// TestSchedulerLeaseReadEveryBeforeReading: before the Lease was ever read
// (the first reading failed), it is read again a third of kube-scheduler's
// default lease duration on.
func TestSchedulerLeaseReadEveryBeforeReading(t *testing.T) {
	var w schedulerWatch
	if got, want := w.readEvery(), defaultSchedulerLeaseDuration/3; got != want {
		t.Errorf("read every %s, want %s", got, want)
	}
}

// TestSchedulerVerdictFresh: a verdict is used for readEvery after it was
// reached, not from then on, nor when the clock stepped back before it; a
// Lease that does not exist is looked for again a minute on.
func TestSchedulerVerdictFresh(t *testing.T) {
	at := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	read := schedulerWatch{judgedAt: at, steady: true, duration: 15 * time.Second}
	notFound := &AutoPlanner{APIReader: fake.NewClientBuilder().WithScheme(testScheme(t)).Build(), SchedulerLease: DefaultSchedulerLease,
		Now: func() time.Time { return at }}
	notFound.readSchedulerLease(t.Context())
	got := map[string]bool{}
	for name, tc := range map[string]struct {
		w   schedulerWatch
		now time.Time
	}{
		"read 4 s ago":                  {read, at.Add(4 * time.Second)},
		"read 5 s ago":                  {read, at.Add(5 * time.Second)},
		"clock stepped back":            {read, at.Add(-time.Minute)},
		"not found 30 s ago":            {notFound.scheduler, at.Add(30 * time.Second)},
		"not found a minute ago":        {notFound.scheduler, at.Add(time.Minute)},
		"never read":                    {schedulerWatch{}, at},
		"not steady, read 1 s ago":      {schedulerWatch{judgedAt: at, why: "down", duration: 15 * time.Second}, at.Add(time.Second)},
		"not found, clock stepped back": {notFound.scheduler, at.Add(-time.Second)},
	} {
		fresh, _, _ := tc.w.fresh(tc.now)
		got[name] = fresh
	}
	want := map[string]bool{
		"read 4 s ago":                  true,
		"read 5 s ago":                  false,
		"clock stepped back":            false,
		"not found 30 s ago":            true,
		"not found a minute ago":        false,
		"never read":                    false,
		"not steady, read 1 s ago":      true,
		"not found, clock stepped back": false,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("fresh (-want +got):\n%s", diff)
	}
}

// TestSchedulerLeaseReadVerdicts: a Lease that does not exist is looked for
// again a minute on; once it exists it is read every readEvery, each
// verdict used until then; a reading that fails holds declines back, even
// after a steady verdict, and is itself used for readEvery.
func TestSchedulerLeaseReadVerdicts(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	var reads atomic.Int64
	var fail error
	c := fake.NewClientBuilder().WithScheme(testScheme(t)).Build()
	reader := interceptor.NewClient(c, interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			reads.Add(1)
			if fail != nil {
				return fail
			}
			return c.Get(ctx, key, obj, opts...)
		},
	})
	a := &AutoPlanner{APIReader: reader, SchedulerLease: DefaultSchedulerLease, Now: func() time.Time { return now }}
	ctx := t.Context()
	check := func(step string, wantSteady bool, wantWhy string, wantReads int64) {
		t.Helper()
		steady, why := a.schedulerSteady(ctx)
		if steady != wantSteady || !strings.Contains(why, wantWhy) {
			t.Errorf("%s: steady %t %q, want %t %q", step, steady, why, wantSteady, wantWhy)
		}
		if n := reads.Load(); n != wantReads {
			t.Errorf("%s: read %d times in all, want %d", step, n, wantReads)
		}
	}
	check("no Lease", true, "", 1)
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "kube-scheduler"},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("s1"), LeaseDurationSeconds: ptr.To[int32](15)}}
	if err := c.Create(ctx, lease); err != nil {
		t.Fatal(err)
	}
	now = now.Add(30 * time.Second)
	check("no Lease, 30 s on", true, "", 1)
	now = now.Add(31 * time.Second)
	check("the Lease created", false, "has not been seen renewing", 2)
	now = now.Add(time.Second)
	check("a second later", false, "has not been seen renewing", 2)
	now = now.Add(5 * time.Second)
	check("5 s later", false, "", 3)
	for i := range 13 {
		now = now.Add(5 * time.Second)
		lease.Spec.RenewTime = &metav1.MicroTime{Time: now}
		if err := c.Update(ctx, lease); err != nil {
			t.Fatal(err)
		}
		a.schedulerSteady(ctx)
		if i == 12 {
			check("renewed for a minute", true, "", 16)
		}
	}
	fail = fmt.Errorf("the API server is down")
	now = now.Add(5 * time.Second)
	check("the reading fails", false, "reading kube-scheduler's Lease", 17)
	now = now.Add(time.Second)
	check("a second after the failure", false, "reading kube-scheduler's Lease", 17)
}

// TestSchedulerLeaseNotFollowedWithoutDeclines: with declines turned off
// the follower does not read the Lease, Auto mode's nodes or not.
func TestSchedulerLeaseNotFollowedWithoutDeclines(t *testing.T) {
	var reads atomic.Int64
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	a := &AutoPlanner{APIReader: countingReader{Reader: fake.NewClientBuilder().WithScheme(testScheme(t)).Build(), gets: &reads},
		SchedulerLease: DefaultSchedulerLease, UnboundAfter: -1, Now: func() time.Time { return now }}
	a.autoNodes = sets.New("n1")
	a.followSchedulerLease(t.Context())
	if n := reads.Load(); n != 0 {
		t.Errorf("declines off: the Lease read %d times, want none", n)
	}
}
