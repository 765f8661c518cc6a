package controller

import (
	"context"
	"testing"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

// TestDeclinesNotReadBackWhereEventsAreNotServed: where the API server
// does not serve events.k8s.io Events (not found, method not supported),
// or the controller may not list them, reading back the declines is given
// up after the first try: later passes do not list them again.
func TestDeclinesNotReadBackWhereEventsAreNotServed(t *testing.T) {
	for name, err := range map[string]error{
		"not found":            apierrors.NewNotFound(eventsv1.Resource("events"), ""),
		"method not supported": apierrors.NewMethodNotSupported(eventsv1.Resource("events"), "list"),
		"forbidden":            apierrors.NewForbidden(eventsv1.Resource("events"), "", nil),
	} {
		t.Run(name, func(t *testing.T) {
			lists := 0
			reader := interceptor.NewClient(eventsReader(t), interceptor.Funcs{
				List: func(context.Context, client.WithWatch, client.ObjectList, ...client.ListOption) error {
					lists++
					return err
				}})
			now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			a := &AutoPlanner{APIReader: reader, Now: func() time.Time { return now }}
			for range 3 {
				a.readDeclines(t.Context(), nil, now)
			}
			if lists != 1 {
				t.Errorf("the events listed %d times, want 1", lists)
			}
		})
	}
}
