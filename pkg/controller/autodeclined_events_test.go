package controller

import (
	"cmp"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// TestDeclinesReadBack: a controller that starts reads back from its own
// SchedulerDeclinedNode events the nodes left out of pending pods' plans.
// n1 has a free 1g.10gb, n2 a whole GPU, and pod p asks for a 1g.10gb.
// Left out of p's plans a minute ago for ten minutes, n1 stays out: p's
// 1g.10gb is made on n2 in the first pass, not after another wait on n1.
// An ended decline, or another pod's, leaves n1 in; an ended decline still
// counts for the doubling, so the next decline of n1 for p is twice as
// long as that one was.
func TestDeclinesReadBack(t *testing.T) {
	for name, tc := range map[string]struct {
		uid     types.UID
		ago     time.Duration
		length  time.Duration
		n2      string // n2's desired layout after the first pass
		nextFor string // how long the next decline of n1 leaves it out
	}{
		"left out a minute ago": {uid: "uid-p", ago: time.Minute, length: 10 * time.Minute, n2: "1g.10gb@6"},
		"no event":              {n2: "7g.80gb@0", nextFor: "10m0s"},
		"ended":                 {uid: "uid-p", ago: 30 * time.Minute, length: 20 * time.Minute, n2: "7g.80gb@0", nextFor: "40m0s"},
		"another pod left out":  {uid: "uid-other", ago: time.Minute, length: 10 * time.Minute, n2: "7g.80gb@0", nextFor: "10m0s"},
	} {
		t.Run(name, func(t *testing.T) {
			ml := autoMigLayout("auto", &v1alpha1.AutoPolicy{ReclaimIdleGPUsAfterSeconds: ptr.To[int32](0)})
			h := newAutoCluster(t, ml,
				node("n1", map[string]string{"pool": "auto"}), autoNML("n1", ml, a100(0).layout("4g.40gb@0,1g.10gb@6")),
				node("n2", map[string]string{"pool": "auto"}), autoNML("n2", ml, a100(0).layout("7g.80gb@0")))
			var events []client.Object
			if tc.uid != "" {
				events = append(events, declinedN1(tc.uid, h.now.Add(-tc.ago), tc.length))
			}
			h.a.APIReader = migLayoutsFrom{Reader: eventsReader(t, events...), live: h.c}
			h.create(autoClaim("c1", profileSelector("1g.10gb")), autoPod("p", h.now, "c1"))
			h.settle()
			if got := h.specOf("n2")[0]; got != tc.n2 && (tc.n2 != "7g.80gb@0" || got != "") {
				t.Fatalf("n2's desired layout %q after the first pass, want %s", got, tc.n2)
			}
			if tc.nextFor == "" {
				return
			}
			h.events()
			h.now = h.now.Add(DefaultUnboundAfter)
			h.settle()
			if evs := strings.Join(h.events(), "\n"); !strings.Contains(evs, "node n1 is left out of the pod's plans for "+tc.nextFor) {
				t.Errorf("once p's device waited on n1, want n1 left out for %s; events:\n%s", tc.nextFor, evs)
			}
		})
	}
}

// TestDeclinesReadBackFailures: a list of the events that fails is tried
// again on the next pass, and the declines it reads back then apply; one
// the controller may not make (an older chart's RBAC) is not tried again.
func TestDeclinesReadBackFailures(t *testing.T) {
	for name, tc := range map[string]struct {
		err     error
		failAll bool   // every list fails, not only the first
		passes  int    // passes made (0: three)
		lists   int    // lists made in them
		n2      string // n2's desired layout after them
	}{
		"unavailable once": {err: apierrors.NewServiceUnavailable("etcd is down"), lists: 2, n2: "1g.10gb@6"},
		// Tried on declineReadTries passes, then planned without them.
		"unavailable": {err: apierrors.NewServiceUnavailable("etcd is down"), failAll: true, lists: declineReadTries, passes: declineReadTries + 2, n2: "7g.80gb@0"},
		"forbidden":   {err: apierrors.NewForbidden(eventsv1.Resource("events"), "", errors.New("no grant")), lists: 1, n2: "7g.80gb@0"},
	} {
		t.Run(name, func(t *testing.T) {
			ml := autoMigLayout("auto", &v1alpha1.AutoPolicy{ReclaimIdleGPUsAfterSeconds: ptr.To[int32](0)})
			h := newAutoCluster(t, ml,
				node("n1", map[string]string{"pool": "auto"}), autoNML("n1", ml, a100(0).layout("4g.40gb@0,1g.10gb@6")),
				node("n2", map[string]string{"pool": "auto"}), autoNML("n2", ml, a100(0).layout("7g.80gb@0")))
			lists := 0
			h.a.APIReader = migLayoutsFrom{live: h.c, Reader: interceptor.NewClient(eventsReader(t, declinedN1("uid-p", h.now.Add(-time.Minute), 10*time.Minute)),
				interceptor.Funcs{List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
					lists++
					if tc.err != nil && (lists == 1 || tc.failAll || apierrors.IsForbidden(tc.err)) {
						return tc.err
					}
					return c.List(ctx, list, opts...)
				}})}
			h.create(autoClaim("c1", profileSelector("1g.10gb")), autoPod("p", h.now, "c1"))
			for range cmp.Or(tc.passes, 3) {
				h.settle()
				h.now = h.now.Add(time.Second)
			}
			if lists != tc.lists {
				t.Errorf("the events listed %d times, want %d", lists, tc.lists)
			}
			if got := h.specOf("n2")[0]; got != tc.n2 && (tc.n2 != "7g.80gb@0" || got != "") {
				t.Errorf("n2's desired layout %q, want %s", got, tc.n2)
			}
		})
	}
}

// declinedN1 is the controller's event leaving n1 out of pod ns/p's plans
// (pod UID uid) for length from at.
func declinedN1(uid types.UID, at time.Time, length time.Duration) *eventsv1.Event {
	return &eventsv1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p.declined-" + string(uid)},
		Regarding:           corev1.ObjectReference{Kind: "Pod", Namespace: "ns", Name: "p", UID: uid},
		ReportingController: Name, Reason: EventSchedulerDeclinedNode, Type: corev1.EventTypeWarning, EventTime: metav1.NewMicroTime(at),
		Note: declinedNote(declination{node: "n1", devices: []string{"gpu-0-mig-1g10gb-19-6"}, waited: time.Minute, keptFor: length})}
}

// eventsReader is an API reader holding events, listed by reason as the
// API server lists them.
func eventsReader(t *testing.T, events ...client.Object) client.WithWatch {
	return fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(events...).
		WithIndex(&eventsv1.Event{}, "reason", func(o client.Object) []string { return []string{o.(*eventsv1.Event).Reason} }).Build()
}

// migLayoutsFrom is a reader of what the API server has for the AutoPlanner
// (APIReader) whose MigLayouts are live's: the planner reads them before
// it writes a plan (stillAuto).
type migLayoutsFrom struct {
	client.Reader
	live client.Reader
}

func (r migLayoutsFrom) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if _, ok := obj.(*v1alpha1.MigLayout); ok {
		return r.live.Get(ctx, key, obj, opts...)
	}
	return r.Reader.Get(ctx, key, obj, opts...)
}
