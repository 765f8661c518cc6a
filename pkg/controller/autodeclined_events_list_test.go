package controller

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

// TestListDeclinedEventsPages: the controller's SchedulerDeclinedNode
// events are listed by reason, a page of declineEventsPage at a time,
// following the API server's continue token to the last page, within
// declineEventsTimeout.
func TestListDeclinedEventsPages(t *testing.T) {
	type request struct {
		Continue string
		Limit    int64
		Fields   string
		Bounded  bool
	}
	var requests []request
	page := func(name string) eventsv1.Event {
		return eventsv1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}, Reason: EventSchedulerDeclinedNode}
	}
	start := time.Now()
	reader := interceptor.NewClient(eventsReader(t), interceptor.Funcs{
		List: func(ctx context.Context, _ client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			o := (&client.ListOptions{}).ApplyOptions(opts)
			deadline, ok := ctx.Deadline()
			r := request{Continue: o.Continue, Limit: o.Limit, Bounded: ok && !deadline.After(time.Now().Add(declineEventsTimeout)) && deadline.After(start)}
			if o.FieldSelector != nil {
				r.Fields = o.FieldSelector.String()
			}
			requests = append(requests, r)
			if len(requests) > 3 {
				return errors.New("listed too often")
			}
			events := list.(*eventsv1.EventList)
			switch o.Continue {
			case "":
				events.Items, events.Continue = []eventsv1.Event{page("first")}, "page-2"
			case "page-2":
				events.Items, events.Continue = []eventsv1.Event{page("second")}, ""
			default:
				return errors.New("unknown continue token")
			}
			return nil
		},
	})
	got, err := ListDeclinedEvents(t.Context(), reader)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range got {
		names = append(names, e.Name)
	}
	if diff := cmp.Diff([]string{"first", "second"}, names); diff != "" {
		t.Errorf("events listed (-want +got):\n%s", diff)
	}
	reason := "reason=" + EventSchedulerDeclinedNode
	want := []request{{Limit: declineEventsPage, Fields: reason, Bounded: true}, {Continue: "page-2", Limit: declineEventsPage, Fields: reason, Bounded: true}}
	if diff := cmp.Diff(want, requests); diff != "" {
		t.Errorf("list requests (-want +got):\n%s", diff)
	}
}

// TestDeclinesNotReadBackWhenOff: with declines turned off the events are
// not listed.
func TestDeclinesNotReadBackWhenOff(t *testing.T) {
	lists := 0
	reader := interceptor.NewClient(eventsReader(t), interceptor.Funcs{
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			lists++
			return c.List(ctx, list, opts...)
		},
	})
	a := &AutoPlanner{APIReader: reader, UnboundAfter: -1}
	a.readDeclines(t.Context(), nil, time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC))
	if lists != 0 {
		t.Errorf("declines off: the events listed %d times, want none", lists)
	}
}
