package controller

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/event"
)

// TestAllMigLayoutsMapsToEach: an event mapped by allMigLayouts wakes
// every MigLayout, each by its name.
func TestAllMigLayoutsMapsToEach(t *testing.T) {
	a, b := migLayout("a").selects("pool", "a").build(), migLayout("b").selects("pool", "b").build()
	r := &Reconciler{Client: fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(&a, &b).Build()}
	var got []string
	for _, req := range r.allMigLayouts(context.Background(), nil) {
		got = append(got, req.Name)
	}
	if diff := cmp.Diff([]string{"a", "b"}, got); diff != "" {
		t.Errorf("MigLayouts woken (-want +got):\n%s", diff)
	}
}

// TestSelectorLabelChangedPassesWhenUnsure: a node update whose objects
// are missing, or whose labels changed while the MigLayouts cannot be
// listed, wakes the MigLayouts rather than risk missing a change; one
// whose labels did not change wakes none, listed or not.
func TestSelectorLabelChangedPassesWhenUnsure(t *testing.T) {
	byLabel := migLayout("by-label").selects("pool", "a").build()
	listFails := interceptor.NewClient(fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(&byLabel).Build(), interceptor.Funcs{
		List: func(context.Context, client.WithWatch, client.ObjectList, ...client.ListOption) error {
			return errors.New("connection refused")
		},
	})
	r := &Reconciler{Client: listFails}
	node := func(labels map[string]string) *metav1.PartialObjectMetadata {
		return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: labels}}
	}
	tests := map[string]struct {
		event event.UpdateEvent
		want  bool
	}{
		"no objects": {want: true},
		"a label no selector names, MigLayouts unlisted": {event: event.UpdateEvent{ObjectOld: node(map[string]string{"team": "x"}), ObjectNew: node(map[string]string{"team": "y"})}, want: true},
		"labels unchanged, MigLayouts unlisted":          {event: event.UpdateEvent{ObjectOld: node(map[string]string{"team": "x"}), ObjectNew: node(map[string]string{"team": "x"})}, want: false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := r.selectorLabelChanged(tc.event); got != tc.want {
				t.Errorf("selectorLabelChanged = %t, want %t", got, tc.want)
			}
		})
	}
}

// TestFailureRateLimiterDefaults: apart from its cap, the retry delays are
// controller-runtime's defaults: a MigLayout's first failed reconcile is
// retried after 5 ms, doubling with each failure, and beyond a burst of
// 100 retries the queue lets 10 a second through.
func TestFailureRateLimiterDefaults(t *testing.T) {
	req := func(i int) ctrl.Request {
		return ctrl.Request{NamespacedName: types.NamespacedName{Name: fmt.Sprint("ml", i)}}
	}
	rl := failureRateLimiter()
	var got []time.Duration
	for range 4 {
		got = append(got, rl.When(req(0)))
	}
	if diff := cmp.Diff([]time.Duration{5 * time.Millisecond, 10 * time.Millisecond, 20 * time.Millisecond, 40 * time.Millisecond}, got); diff != "" {
		t.Errorf("delays of one MigLayout failing again and again (-want +got):\n%s", diff)
	}
	rl = failureRateLimiter()
	start := time.Now()
	for i := range 100 {
		if d := rl.When(req(i)); d != 5*time.Millisecond {
			t.Fatalf("MigLayout %d of the burst: delay %s, want 5ms", i, d)
		}
	}
	// The bucket is empty: the next one waits for a token, a tenth of a
	// second less what refilled since the burst began (at most the time
	// this test has taken since, however slow the machine).
	d := rl.When(req(100))
	if elapsed := time.Since(start); d > 100*time.Millisecond || d < 100*time.Millisecond-elapsed {
		t.Errorf("MigLayout beyond the burst, %s after it began: delay %s, want 100ms less at most that", elapsed, d)
	}
}
