package chaos

import (
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/miglayout/miglayout/pkg/mig"
	"github.com/miglayout/miglayout/pkg/mig/nvmlsim"
	migslices "github.com/miglayout/miglayout/pkg/slices"
	"github.com/miglayout/miglayout/test/cluster"
)

// The monitor's oracle without a cluster: synthetic watch events replayed by
// Checkpoint, and simulator states with claim lists given to compare (poll's
// verdict).

const (
	poolA, poolB, poolOut = "node-a", "node-b", "node-z" // node-z is not monitored
	otherDriver           = "gpu.example.com"
)

var t0 = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

func newTestMonitor() *Monitor {
	return &Monitor{
		pools:  map[string]bool{poolA: true, poolB: true},
		slices: map[string]*resourceapi.ResourceSlice{}, views: map[string]map[string]published{},
		allocs: map[types.UID]claimAlloc{}, taintedAt: map[string]time.Time{}, open: map[string]int{},
		tracked: map[string]string{}, seen: map[string]bool{}, refused: map[string]Finding{},
		absent: map[string]map[string]published{}, hiddenAt: map[string]time.Time{},
	}
}

// dv is a published device: name, uuid attribute, taint key ("" none).
type dv struct{ name, uuid, taint string }

func sliceOf(name, driver, pool string, gen int64, devs ...dv) *resourceapi.ResourceSlice {
	s := &resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: name}}
	s.Spec.Driver = driver
	s.Spec.Pool = resourceapi.ResourcePool{Name: pool, Generation: gen, ResourceSliceCount: 1}
	for _, d := range devs {
		uuid := d.uuid
		dev := resourceapi.Device{Name: d.name, Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
			migslices.AttrUUID: {StringValue: &uuid}}}
		if d.taint != "" {
			dev.Taints = []resourceapi.DeviceTaint{{Key: d.taint, Effect: resourceapi.DeviceTaintEffectNoSchedule}}
		}
		s.Spec.Devices = append(s.Spec.Devices, dev)
	}
	return s
}

// part publishes slice name of poolA, one of count, at generation gen.
func part(name string, gen, count int64, devs ...dv) event {
	s := sliceOf(name, cluster.Driver, poolA, gen, devs...)
	s.Spec.Pool.ResourceSliceCount = count
	return event{typ: watch.Modified, slice: s}
}

// pub publishes pool's only slice (named after the pool) at generation gen.
func pub(pool string, gen int64, devs ...dv) event {
	return event{typ: watch.Modified, slice: sliceOf(pool+"-slice", cluster.Driver, pool, gen, devs...)}
}

// claimOf is claim uid (namespace ns) allocated devs ("pool/device"; a
// "driver:" prefix names another driver). binding: "" none, "waiting" binding
// conditions not confirmed, "ready" confirmed (DeviceReady True).
func claimOf(uid, binding string, devs ...string) *resourceapi.ResourceClaim {
	c := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: uid, UID: types.UID(uid)}}
	if len(devs) == 0 {
		return c
	}
	c.Status.Allocation = &resourceapi.AllocationResult{}
	for _, d := range devs {
		driver := cluster.Driver
		if dr, rest, ok := strings.Cut(d, ":"); ok {
			driver, d = dr, rest
		}
		pool, name, _ := strings.Cut(d, "/")
		r := resourceapi.DeviceRequestAllocationResult{Request: "gpu", Driver: driver, Pool: pool, Device: name}
		if binding != "" {
			r.BindingConditions = []string{migslices.BindingConditionReady}
			r.BindingFailureConditions = []string{migslices.BindingConditionRemoved}
			st := metav1.ConditionFalse
			if binding == "ready" {
				st = metav1.ConditionTrue
			}
			c.Status.Devices = append(c.Status.Devices, resourceapi.AllocatedDeviceStatus{Driver: driver, Pool: pool, Device: name,
				Conditions: []metav1.Condition{{Type: migslices.BindingConditionReady, Status: st}}})
		}
		c.Status.Allocation.Devices.Results = append(c.Status.Allocation.Devices.Results, r)
	}
	return c
}

func alloc(uid, binding string, devs ...string) event {
	return event{typ: watch.Modified, claim: claimOf(uid, binding, devs...)}
}

func deleted(e event) event { e.typ = watch.Deleted; return e }
func listed(e event) event  { e.typ, e.initial = watch.Added, true; return e }
func atRV(rv uint64, e event) event {
	e.rv = rv
	return e
}

// relist is a resync: a fresh list holding only the slices (or claim UIDs) named.
func relist(slices bool, names ...string) event {
	e := event{resync: map[string]bool{}, resyncSlices: slices}
	for _, n := range names {
		e.resync[n] = true
	}
	return e
}

func findingStrings(fs []Finding) []string {
	out := []string{}
	for _, f := range fs {
		out = append(out, f.String())
	}
	slices.Sort(out)
	return out
}

// replayed is a test monitor that has replayed events, the one at index i
// seen at t0+i s and, unless set, at revision 10(i+1).
func replayed(events []event) *Monitor {
	m := newTestMonitor()
	for i, e := range events {
		if e.rv == 0 {
			e.rv = uint64(10 * (i + 1))
		}
		e.at = t0.Add(time.Duration(i) * time.Second)
		m.buf = append(m.buf, e)
	}
	m.Checkpoint()
	return m
}

// TestMonitorReplay: the findings the replay of the watch events (in revision
// order, one Checkpoint) makes, with the event at index i seen at t0+i s and,
// unless set, revision 10(i+1).
func TestMonitorReplay(t *testing.T) {
	x, y := dv{"x", "MIG-1", ""}, dv{"y", "MIG-2", ""}
	xDrain := dv{"x", "MIG-1", migslices.DrainTaintKey}
	xOther := dv{"x", "MIG-1", "example.com/maintenance"}
	for name, tc := range map[string]struct {
		events []event
		want   []string
	}{
		"allocation on a published device kept": {
			events: []event{pub(poolA, 1, x, y), alloc("c1", "", "node-a/x"), pub(poolA, 2, x)},
		},
		"allocation on a tainted device, lag from the first tainted publication": {
			events: []event{pub(poolA, 1, xDrain), pub(poolA, 2, xDrain, y), alloc("c1", "", "node-a/x")},
			want:   []string{"allocated tainted device: claim ns/c1 → node-a/x 2000ms after the taint"},
		},
		"allocation on a device tainted by another key": {
			events: []event{pub(poolA, 1, xOther), alloc("c1", "", "node-a/x")},
		},
		"taint lifted, then tainted again: lag from the second taint": {
			events: []event{pub(poolA, 1, xDrain), pub(poolA, 2, x), pub(poolA, 3, xDrain), alloc("c1", "", "node-a/x")},
			want:   []string{"allocated tainted device: claim ns/c1 → node-a/x 1000ms after the taint"},
		},
		"claim updated after its device got tainted": {
			events: []event{pub(poolA, 1, x), alloc("c1", "", "node-a/x"), pub(poolA, 2, xDrain), alloc("c1", "", "node-a/x")},
		},
		"allocation on an unpublished device": {
			events: []event{pub(poolA, 1, x), alloc("c1", "", "node-a/y")},
			want:   []string{"allocated unpublished device: claim ns/c1 → node-a/y"},
		},
		"allocation on a device of an older generation only": {
			events: []event{
				{typ: watch.Added, slice: sliceOf("a-old", cluster.Driver, poolA, 1, x)},
				{typ: watch.Added, slice: sliceOf("a-new", cluster.Driver, poolA, 2, y)},
				alloc("c1", "", "node-a/x")},
			want: []string{"allocated unpublished device: claim ns/c1 → node-a/x"},
		},
		"allocation in a pool never published": {
			events: []event{pub(poolA, 1, x), alloc("c1", "", "node-b/x")},
			want:   []string{"allocated unpublished device: claim ns/c1 → node-b/x"},
		},
		"device withdrawn while allocated": {
			events: []event{pub(poolA, 1, x, y), alloc("c1", "", "node-a/x"), pub(poolA, 2, y)},
			want:   []string{"allocated device withdrawn: claim ns/c1 → node-a/x"},
		},
		"device withdrawn after the claim's deletion": {
			events: []event{pub(poolA, 1, x), alloc("c1", "", "node-a/x"), deleted(alloc("c1", "", "node-a/x")), pub(poolA, 2, y)},
		},
		"device withdrawn after deallocation": {
			events: []event{pub(poolA, 1, x), alloc("c1", "", "node-a/x"), alloc("c1", ""), pub(poolA, 2, y)},
		},
		"another driver's slice and claim in the pool": {
			events: []event{pub(poolA, 1, x), alloc("c1", "", "node-a/x"),
				{typ: watch.Added, slice: sliceOf("foreign", otherDriver, poolA, 9)},
				alloc("c2", "", otherDriver+":node-a/z")},
		},
		"claim in an unmonitored pool": {
			events: []event{pub(poolOut, 1, x), alloc("c1", "", "node-z/y"), pub(poolOut, 2)},
		},
		"claim allocated before the monitor started": {
			events: []event{pub(poolA, 1, x), listed(alloc("c1", "", "node-a/y"))},
		},
		"claim of the initial list withdrawn later": {
			events: []event{pub(poolA, 1, x), listed(alloc("c1", "", "node-a/x")), pub(poolA, 2)},
			want:   []string{"allocated device withdrawn: claim ns/c1 → node-a/x"},
		},
		"a claim event delivered late is replayed in revision order": {
			events: []event{atRV(10, pub(poolA, 1, x, y)), atRV(30, pub(poolA, 2, y)), atRV(20, alloc("c1", "", "node-a/x"))},
			want:   []string{"allocated device withdrawn: claim ns/c1 → node-a/x"},
		},
		"relist with the slice": {
			events: []event{pub(poolA, 1, x), alloc("c1", "", "node-a/x"), relist(true, "node-a-slice")},
		},
		"relist without the claim, then its device withdrawn": {
			events: []event{pub(poolA, 1, x), alloc("c1", "", "node-a/x"), relist(false), pub(poolA, 2)},
		},
		"relist with the claim, then its device withdrawn": {
			events: []event{pub(poolA, 1, x), alloc("c1", "", "node-a/x"), relist(false, "c1"), pub(poolA, 2)},
			want:   []string{"allocated device withdrawn: claim ns/c1 → node-a/x"},
		},
		"the same withdrawal twice is one finding": {
			events: []event{pub(poolA, 1, x), alloc("c1", "", "node-a/x"), pub(poolA, 2), pub(poolA, 3, x), pub(poolA, 4)},
			want:   []string{"allocated device withdrawn: claim ns/c1 → node-a/x"},
		},
		"two claims on a withdrawn device": {
			events: []event{pub(poolA, 1, x), alloc("c1", "", "node-a/x"), alloc("c2", "", "node-a/x"), pub(poolA, 2)},
			want: []string{"allocated device withdrawn: claim ns/c1 → node-a/x",
				"allocated device withdrawn: claim ns/c2 → node-a/x"},
		},
		"waiting allocation on an unpublished device": {
			events: []event{pub(poolA, 1, x), alloc("c1", "waiting", "node-a/y")},
			want:   []string{"allocation awaiting binding refused: claim ns/c1 → node-a/y (allocated unpublished device)"},
		},
		"waiting allocation withdrawn, then deallocated": {
			events: []event{pub(poolA, 1, x), alloc("c1", "waiting", "node-a/x"), pub(poolA, 2), alloc("c1", "")},
			want:   []string{"allocation awaiting binding refused: claim ns/c1 → node-a/x (allocated device withdrawn)"},
		},
		"waiting allocation withdrawn, then confirmed": {
			events: []event{pub(poolA, 1, x), alloc("c1", "waiting", "node-a/x"), pub(poolA, 2), alloc("c1", "ready", "node-a/x")},
			want: []string{"allocated device withdrawn: claim ns/c1 → node-a/x (confirmed after it was counted as refused)",
				"allocation awaiting binding refused: claim ns/c1 → node-a/x (allocated device withdrawn)"},
		},
		"waiting allocation on an unpublished device, then confirmed": {
			events: []event{pub(poolA, 1, x), alloc("c1", "waiting", "node-a/y"), alloc("c1", "ready", "node-a/y")},
			want: []string{"allocated unpublished device: claim ns/c1 → node-a/y (confirmed after it was counted as refused)",
				"allocation awaiting binding refused: claim ns/c1 → node-a/y (allocated unpublished device)"},
		},
		"refused allocation deallocated, then allocated again to the republished device and confirmed": {
			events: []event{pub(poolA, 1, x), alloc("c1", "waiting", "node-a/x"), pub(poolA, 2), alloc("c1", ""),
				pub(poolA, 3, dv{"x", "MIG-9", ""}), alloc("c1", "waiting", "node-a/x"), alloc("c1", "ready", "node-a/x")},
			want: []string{"allocation awaiting binding refused: claim ns/c1 → node-a/x (allocated device withdrawn)"},
		},
		"refused on one device, confirmed on another of the claim": {
			events: []event{pub(poolA, 1, x, y), alloc("c1", "waiting", "node-a/x", "node-a/y"), pub(poolA, 2, x),
				pub(poolA, 3, x, y), alloc("c1", "ready", "node-a/x", "node-a/y")},
			want: []string{"allocated device withdrawn: claim ns/c1 → node-a/y (confirmed after it was counted as refused)",
				"allocation awaiting binding refused: claim ns/c1 → node-a/y (allocated device withdrawn)"},
		},
		"refused allocation confirmed after another claim's update": {
			events: []event{pub(poolA, 1, x, y), alloc("c1", "waiting", "node-a/x"), pub(poolA, 2, y), alloc("c2", "", "node-a/y"),
				alloc("c1", "ready", "node-a/x")},
			want: []string{"allocated device withdrawn: claim ns/c1 → node-a/x (confirmed after it was counted as refused)",
				"allocation awaiting binding refused: claim ns/c1 → node-a/x (allocated device withdrawn)"},
		},
		"confirmed allocation withdrawn": {
			events: []event{pub(poolA, 1, x), alloc("c1", "ready", "node-a/x"), pub(poolA, 2)},
			want:   []string{"allocated device withdrawn: claim ns/c1 → node-a/x"},
		},
		// A device destroyed and created again under its name before the
		// first poll that saw its allocation: the poll only ever sees the new
		// UUID, the pool's next publication tells.
		"allocated device published again with another uuid": {
			events: []event{pub(poolA, 1, x), alloc("c1", "", "node-a/x"), pub(poolA, 2, dv{"x", "MIG-9", ""})},
			want:   []string{"allocated device destroyed: claim ns/c1 → node-a/x (published again with another uuid: MIG-1, now MIG-9)"},
		},
		"waiting allocation published again with another uuid": {
			events: []event{pub(poolA, 1, x), alloc("c1", "waiting", "node-a/x"), pub(poolA, 2, dv{"x", "MIG-9", ""})},
			want: []string{"allocation awaiting binding refused: claim ns/c1 → node-a/x (allocated device destroyed; " +
				"published again with another uuid: MIG-1, now MIG-9)"},
		},
		"free device published again with another uuid, then allocated": {
			events: []event{pub(poolA, 1, x), pub(poolA, 2, dv{"x", "MIG-9", ""}), alloc("c1", "", "node-a/x")},
		},
		"device published again with another uuid after deallocation": {
			events: []event{pub(poolA, 1, x), alloc("c1", "", "node-a/x"), alloc("c1", ""), pub(poolA, 2, dv{"x", "MIG-9", ""})},
		},
		"allocated device published again with its uuid first missing": {
			events: []event{pub(poolA, 1, dv{"x", "", ""}), alloc("c1", "", "node-a/x"), pub(poolA, 2, x)},
		},
	} {
		t.Run(name, func(t *testing.T) {
			m := replayed(tc.events)
			if got := findingStrings(m.Findings(time.Time{})); !slices.Equal(got, append([]string{}, tc.want...)) {
				t.Errorf("findings\n  %q\nwant\n  %q", got, tc.want)
			}
		})
	}
}

// TestMonitorPoolAbsence: a pool whose slices are all deleted (a kubelet's
// start) is absent, not withdrawn; allocations written meanwhile are judged
// against its view before, and that view against the pool published again.
// Events as in TestMonitorReplay; absences are given as "deleted at +Ns,
// published at +Ns" (-1: not published again).
func TestMonitorPoolAbsence(t *testing.T) {
	x, y := dv{"x", "MIG-1", ""}, dv{"y", "MIG-2", ""}
	xDrain := dv{"x", "MIG-1", migslices.DrainTaintKey}
	gone := deleted(pub(poolA, 1, x))
	type span struct{ deleted, published int }
	for name, tc := range map[string]struct {
		events   []event
		want     []string
		absences []span
		// incomplete: poolA is left incomplete since the event at that index.
		incomplete int
	}{
		"slice deleted while allocated, never published again": {
			events:   []event{pub(poolA, 1, x), alloc("c1", "", "node-a/x"), gone},
			absences: []span{{2, -1}},
		},
		"published again as it was": {
			events:   []event{pub(poolA, 1, x, y), alloc("c1", "", "node-a/x"), gone, pub(poolA, 1, x, y)},
			absences: []span{{2, 3}},
		},
		"published again without the allocated device": {
			events:   []event{pub(poolA, 1, x, y), alloc("c1", "", "node-a/x"), gone, pub(poolA, 1, y)},
			want:     []string{"allocated device withdrawn: claim ns/c1 → node-a/x"},
			absences: []span{{2, 3}},
		},
		"published again without a free device": {
			events:   []event{pub(poolA, 1, x, y), alloc("c1", "", "node-a/x"), gone, pub(poolA, 1, x)},
			absences: []span{{2, 3}},
		},
		"published again with another uuid for the allocated device": {
			events:   []event{pub(poolA, 1, x), alloc("c1", "", "node-a/x"), gone, pub(poolA, 1, dv{"x", "MIG-9", ""})},
			want:     []string{"allocated device destroyed: claim ns/c1 → node-a/x (published again with another uuid: MIG-1, now MIG-9)"},
			absences: []span{{2, 3}},
		},
		"allocated while absent, a device published before": {
			events:   []event{pub(poolA, 1, x, y), gone, alloc("c1", "", "node-a/y"), pub(poolA, 1, x, y)},
			absences: []span{{1, 3}},
		},
		"allocated while absent, a device never published": {
			events:   []event{pub(poolA, 1, x), gone, alloc("c1", "", "node-a/y"), pub(poolA, 1, x, y)},
			want:     []string{"allocated unpublished device: claim ns/c1 → node-a/y"},
			absences: []span{{1, 3}},
		},
		"allocated while absent, a device tainted before": {
			events:   []event{pub(poolA, 1, xDrain), gone, alloc("c1", "", "node-a/x"), pub(poolA, 1, x)},
			want:     []string{"allocated tainted device: claim ns/c1 → node-a/x 2000ms after the taint"},
			absences: []span{{1, 3}},
		},
		"allocated while absent, then withdrawn when published again": {
			events:   []event{pub(poolA, 1, x, y), gone, alloc("c1", "", "node-a/y"), pub(poolA, 1, x)},
			want:     []string{"allocated device withdrawn: claim ns/c1 → node-a/y"},
			absences: []span{{1, 3}},
		},
		"a relist without the slice is an absence": {
			events:   []event{pub(poolA, 1, x), alloc("c1", "", "node-a/x"), relist(true), pub(poolA, 2, x)},
			absences: []span{{2, 3}},
		},
		"an obsolete slice deleted is no absence": {
			events: []event{
				{typ: watch.Added, slice: sliceOf("a-old", cluster.Driver, poolA, 1, x)},
				{typ: watch.Added, slice: sliceOf("a-new", cluster.Driver, poolA, 2, x)},
				alloc("c1", "", "node-a/x"),
				{typ: watch.Deleted, slice: sliceOf("a-old", cluster.Driver, poolA, 1, x)}},
		},
		"twice absent": {
			events: []event{pub(poolA, 1, x), alloc("c1", "", "node-a/x"), gone, pub(poolA, 1, x), gone,
				pub(poolA, 1, dv{"x", "MIG-9", ""})},
			want:     []string{"allocated device destroyed: claim ns/c1 → node-a/x (published again with another uuid: MIG-1, now MIG-9)"},
			absences: []span{{2, 3}, {4, 5}},
		},
		"another pool's deletion": {
			events:   []event{pub(poolA, 1, x), pub(poolB, 1, y), alloc("c1", "", "node-a/x"), deleted(pub(poolB, 1, y)), pub(poolA, 2)},
			want:     []string{"allocated device withdrawn: claim ns/c1 → node-a/x"},
			absences: []span{{3, -1}},
		},
		"an unmonitored pool's deletion": {
			events: []event{pub(poolOut, 1, x), deleted(pub(poolOut, 1, x))},
		},
		// A pool of two slices: the scheduler allocates nothing from it while it
		// has fewer slices of its generation than their count.
		"a new generation written slice by slice withdraws nothing meanwhile": {
			events: []event{part("s1", 1, 2, x), part("s2", 1, 2, y), alloc("c1", "", "node-a/y"),
				part("s1", 2, 2, x), part("s2", 2, 2, y)},
		},
		"a new generation complete without the allocated device": {
			events: []event{part("s1", 1, 2, x), part("s2", 1, 2, y), alloc("c1", "", "node-a/y"),
				part("s1", 2, 2, x), part("s2", 2, 2)},
			want: []string{"allocated device withdrawn: claim ns/c1 → node-a/y"},
		},
		"slices deleted one by one, then published again": {
			events: []event{part("s1", 1, 2, x), part("s2", 1, 2, y), alloc("c1", "", "node-a/y"),
				deleted(part("s1", 1, 2, x)), deleted(part("s2", 1, 2, y)), part("s1", 1, 2, x), part("s2", 1, 2, y)},
			absences: []span{{4, 6}},
		},
		"allocated while incomplete, a device of the view before": {
			events: []event{part("s1", 1, 2, x), part("s2", 1, 2, y), part("s1", 2, 2, x),
				alloc("c1", "", "node-a/y"), part("s2", 2, 2, y)},
		},
		"a new generation never completed": {
			events:     []event{part("s1", 1, 2, x), part("s2", 1, 2, y), alloc("c1", "", "node-a/y"), part("s1", 2, 2, x)},
			incomplete: 3,
		},
		"one slice of two deleted for good": {
			events:     []event{part("s1", 1, 2, x), part("s2", 1, 2, y), alloc("c1", "", "node-a/y"), deleted(part("s2", 1, 2, y))},
			incomplete: 3,
		},
		"more slices of the generation than its count": {
			events:     []event{part("s1", 1, 2, x), part("s2", 1, 2, y), part("s3", 1, 2)},
			incomplete: 2,
		},
		"allocated while incomplete, a device neither generation has": {
			events: []event{part("s1", 1, 2, x), part("s2", 1, 2), part("s1", 2, 2, x), alloc("c1", "", "node-a/y"), part("s2", 2, 2)},
			want:   []string{"allocated unpublished device: claim ns/c1 → node-a/y"},
		},
		"allocated while incomplete, then withdrawn by the new generation": {
			events: []event{part("s1", 1, 2, x), part("s2", 1, 2), part("s1", 2, 2, x), part("s2", 2, 2, y),
				part("s1", 3, 2, x), alloc("c1", "", "node-a/y"), part("s2", 3, 2)},
			want: []string{"allocated device withdrawn: claim ns/c1 → node-a/y"},
		},
	} {
		t.Run(name, func(t *testing.T) {
			m := replayed(tc.events)
			if got := findingStrings(m.Findings(time.Time{})); !slices.Equal(got, append([]string{}, tc.want...)) {
				t.Errorf("findings\n  %q\nwant\n  %q", got, tc.want)
			}
			var got []span
			for _, a := range m.Absences(time.Time{}) {
				s := span{int(a.Deleted.Sub(t0) / time.Second), -1}
				if !a.Published.IsZero() {
					s.published = int(a.Published.Sub(t0) / time.Second)
				}
				got = append(got, s)
			}
			if !slices.Equal(got, tc.absences) {
				t.Errorf("absences %v, want %v", got, tc.absences)
			}
			want := map[string]time.Time{}
			if tc.incomplete > 0 {
				want[poolA] = t0.Add(time.Duration(tc.incomplete) * time.Second)
			}
			if inc := m.Incomplete(); !maps.Equal(inc, want) {
				t.Errorf("incomplete pools %v, want %v", inc, want)
			}
		})
	}
}

// TestAwaitingBinding: an allocation waits for the agent's confirmation while
// it carries binding conditions and its own device's status (driver, pool and
// name) lacks DeviceReady True.
func TestAwaitingBinding(t *testing.T) {
	r := resourceapi.DeviceRequestAllocationResult{Driver: cluster.Driver, Pool: poolA, Device: "x",
		BindingConditions: []string{migslices.BindingConditionReady}}
	ready := func(driver, pool, device string, st metav1.ConditionStatus) resourceapi.AllocatedDeviceStatus {
		return resourceapi.AllocatedDeviceStatus{Driver: driver, Pool: pool, Device: device,
			Conditions: []metav1.Condition{{Type: migslices.BindingConditionReady, Status: st}}}
	}
	for name, tc := range map[string]struct {
		noBinding bool
		status    []resourceapi.AllocatedDeviceStatus
		want      bool
	}{
		"no binding conditions":               {noBinding: true},
		"binding conditions, no status":       {want: true},
		"confirmed":                           {status: []resourceapi.AllocatedDeviceStatus{ready(cluster.Driver, poolA, "x", metav1.ConditionTrue)}},
		"not confirmed":                       {status: []resourceapi.AllocatedDeviceStatus{ready(cluster.Driver, poolA, "x", metav1.ConditionFalse)}, want: true},
		"confirmed: a device of another pool": {status: []resourceapi.AllocatedDeviceStatus{ready(cluster.Driver, poolB, "x", metav1.ConditionTrue)}, want: true},
		"confirmed: another device":           {status: []resourceapi.AllocatedDeviceStatus{ready(cluster.Driver, poolA, "y", metav1.ConditionTrue)}, want: true},
		"confirmed: another driver's device":  {status: []resourceapi.AllocatedDeviceStatus{ready(otherDriver, poolA, "x", metav1.ConditionTrue)}, want: true},
	} {
		t.Run(name, func(t *testing.T) {
			r := r
			if tc.noBinding {
				r.BindingConditions = nil
			}
			c := &resourceapi.ResourceClaim{}
			c.Status.Devices = tc.status
			if got := awaitingBinding(c, r); got != tc.want {
				t.Errorf("awaitingBinding = %v, want %v", got, tc.want)
			}
		})
	}
}

// migGPU0 is GPU 0 of a node in MIG mode holding a 1g.10gb device (profile ID
// 19) at each start given, with the CI UUID given; migGPU0Name names it.
func migGPU0(devs map[int]string) nvmlsim.GPU {
	g := nvmlsim.GPU{Index: 0, UUID: "GPU-0", MIGCurrent: true, MIGPending: true}
	for start, uuid := range devs {
		g.GPUInstances = append(g.GPUInstances, nvmlsim.GPUInstance{ID: start + 1, ProfileID: 19, Profile: "1g.10gb",
			Placement: mig.Placement{Start: start, Size: 1}, ComputeInstances: []nvmlsim.ComputeInstance{{UUID: uuid}}})
	}
	return g
}

func migGPU0Name(start int) string { return migslices.MIGDeviceName(0, "1g.10gb", 19, start) }

// pollStep is one poll: node-a's NVML state (one MIG GPU, plus a whole GPU 1
// outside MIG mode "GPU-1"), its processes (device UUIDs), and the claims.
type pollStep struct {
	devs   map[int]string
	procs  []string
	claims []*resourceapi.ResourceClaim
}

// TestMonitorCompare: the findings of poll's verdict (compare) over a
// sequence of polls, and each poll counted.
func TestMonitorCompare(t *testing.T) {
	x := "node-a/" + migGPU0Name(0)
	for name, tc := range map[string]struct {
		polls []pollStep
		want  []string
	}{
		"allocated device present": {
			polls: []pollStep{{devs: map[int]string{0: "MIG-1"}, claims: []*resourceapi.ResourceClaim{claimOf("c1", "", x)}},
				{devs: map[int]string{0: "MIG-1", 1: "MIG-2"}, claims: []*resourceapi.ResourceClaim{claimOf("c1", "", x)}}},
		},
		"allocated whole GPU present": {
			polls: []pollStep{{claims: []*resourceapi.ResourceClaim{claimOf("c1", "", "node-a/gpu-1")}}},
		},
		"allocated device missing, on every poll: one finding": {
			polls: []pollStep{{devs: map[int]string{1: "MIG-2"}, claims: []*resourceapi.ResourceClaim{claimOf("c1", "", x)}},
				{claims: []*resourceapi.ResourceClaim{claimOf("c1", "", x)}}},
			want: []string{"allocated device destroyed: claim ns/c1 → " + x + " (NVML lacks the allocated device)"},
		},
		"allocated device destroyed and created again between polls": {
			polls: []pollStep{{devs: map[int]string{0: "MIG-1"}, claims: []*resourceapi.ResourceClaim{claimOf("c1", "", x)}},
				{devs: map[int]string{0: "MIG-2"}, claims: []*resourceapi.ResourceClaim{claimOf("c1", "", x)}}},
			want: []string{"allocated device destroyed: claim ns/c1 → " + x + " (destroyed and created again: uuid MIG-1, now MIG-2)"},
		},
		"waiting allocation on a missing device": {
			polls: []pollStep{{claims: []*resourceapi.ResourceClaim{claimOf("c1", "waiting", x)}}},
			want:  []string{"allocation awaiting binding refused: claim ns/c1 → " + x + " (allocated device destroyed; NVML lacks the allocated device)"},
		},
		"waiting allocation on a missing device, created later and confirmed": {
			polls: []pollStep{{claims: []*resourceapi.ResourceClaim{claimOf("c1", "waiting", x)}},
				{devs: map[int]string{0: "MIG-2"}, claims: []*resourceapi.ResourceClaim{claimOf("c1", "ready", x)}}},
			want: []string{"allocated device destroyed: claim ns/c1 → " + x + " (destroyed and created again: uuid (missing), now MIG-2)",
				"allocation awaiting binding refused: claim ns/c1 → " + x + " (allocated device destroyed; NVML lacks the allocated device)"},
		},
		"claim deallocated, its device created again, the claim allocated it again": {
			polls: []pollStep{{devs: map[int]string{0: "MIG-1"}, claims: []*resourceapi.ResourceClaim{claimOf("c1", "", x)}},
				{devs: map[int]string{0: "MIG-1"}, claims: []*resourceapi.ResourceClaim{claimOf("c1", "")}},
				{devs: map[int]string{0: "MIG-2"}, claims: []*resourceapi.ResourceClaim{claimOf("c1", "", x)}}},
		},
		"process on a destroyed device": {
			polls: []pollStep{{devs: map[int]string{0: "MIG-1"}, procs: []string{"MIG-1", "MIG-gone"}}},
			want:  []string{"allocated device destroyed: claim (process 2) → node-a/MIG-gone (a process runs on a device NVML lacks)"},
		},
		"two processes on a destroyed device": {
			polls: []pollStep{{procs: []string{"MIG-gone", "MIG-gone"}}},
			want: []string{"allocated device destroyed: claim (process 1) → node-a/MIG-gone (a process runs on a device NVML lacks)",
				"allocated device destroyed: claim (process 2) → node-a/MIG-gone (a process runs on a device NVML lacks)"},
		},
		"processes on a MIG device and on a whole GPU": {
			polls: []pollStep{{devs: map[int]string{0: "MIG-1", 1: "MIG-2"}, procs: []string{"MIG-2", "GPU-1"}}},
		},
		"other drivers' and unmonitored pools' claims on missing devices": {
			polls: []pollStep{{claims: []*resourceapi.ResourceClaim{claimOf("c1", "", otherDriver+":"+x), claimOf("c2", "", "node-z/x")}}},
		},
	} {
		t.Run(name, func(t *testing.T) {
			m := newTestMonitor()
			for i, p := range tc.polls {
				st := nvmlsim.State{GPUs: []nvmlsim.GPU{migGPU0(p.devs), {Index: 1, UUID: "GPU-1"}}}
				for j, u := range p.procs {
					st.Processes = append(st.Processes, nvmlsim.Process{PID: uint32(j + 1), DeviceUUID: u})
				}
				var claims []resourceapi.ResourceClaim
				for _, c := range p.claims {
					claims = append(claims, *c)
				}
				m.compare(map[string]nvmlsim.State{poolA: st}, claims, t0.Add(time.Duration(i)*time.Second))
			}
			if got := findingStrings(m.Findings(time.Time{})); !slices.Equal(got, append([]string{}, tc.want...)) {
				t.Errorf("findings\n  %q\nwant\n  %q", got, tc.want)
			}
			if n, _ := m.PollsSince(t0); n != len(tc.polls) {
				t.Errorf("PollsSince = %d, want %d", n, len(tc.polls))
			}
			if polls, _, _ := m.Stats(); polls != len(tc.polls) {
				t.Errorf("Stats polls = %d, want %d", polls, len(tc.polls))
			}
		})
	}
}

// TestMonitorFindingsFilter: Findings keeps those at or after since, of the
// pools given (all without).
func TestMonitorFindingsFilter(t *testing.T) {
	m := newTestMonitor()
	for i, p := range []string{poolA, poolB, poolA} {
		m.findings = append(m.findings, Finding{Kind: AllocatedDestroyed, Pool: p, Device: "x", Claim: string(rune('a' + i)), At: t0.Add(time.Duration(i) * time.Second)})
	}
	for name, tc := range map[string]struct {
		since time.Time
		pools []string
		want  string
	}{
		"all":                  {want: "abc"},
		"since the second":     {since: t0.Add(time.Second), want: "bc"},
		"after the last":       {since: t0.Add(3 * time.Second), want: ""},
		"pool a":               {pools: []string{poolA}, want: "ac"},
		"pools a and b, since": {since: t0.Add(time.Second), pools: []string{poolB, poolA}, want: "bc"},
		"an unmonitored pool":  {pools: []string{poolOut}, want: ""},
	} {
		t.Run(name, func(t *testing.T) {
			got := ""
			for _, f := range m.Findings(tc.since, tc.pools...) {
				got += f.Claim
			}
			if got != tc.want {
				t.Errorf("Findings claims %q, want %q", got, tc.want)
			}
		})
	}
}
