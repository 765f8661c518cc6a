package controller

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// TestReadsSpacedByReadEvery: passes woken closer together than ReadEvery
// read the inputs once; the others wait for the rest of ReadEvery, or of
// the backoff of the failed passes in a row. ReadEvery is capped at a
// quarter of Idle, and 0 reads on every pass. The pod is still planned.
func TestReadsSpacedByReadEvery(t *testing.T) {
	type pass struct {
		after     time.Duration // since the previous pass
		failRead  bool
		wantReads int // in all, after the pass
		wantWait  time.Duration
	}
	const every = 200 * time.Millisecond
	tests := map[string]struct {
		readEvery, idle, max time.Duration // max 0: 5 s
		passes               []pass
	}{
		"changes closer than ReadEvery": {readEvery: every, idle: 2 * time.Second, passes: []pass{
			{wantReads: 1},
			{after: 0, wantReads: 1, wantWait: every},
			{after: 50 * time.Millisecond, wantReads: 1, wantWait: 150 * time.Millisecond},
			{after: 150 * time.Millisecond, wantReads: 2},
			{after: 199 * time.Millisecond, wantReads: 2, wantWait: time.Millisecond},
		}},
		"a failed read waits ReadEvery too": {readEvery: every, idle: 2 * time.Second, passes: []pass{
			{wantReads: 1},
			{after: 200 * time.Millisecond, failRead: true, wantReads: 2},
			{after: time.Millisecond, wantReads: 2, wantWait: every - time.Millisecond},
			{after: every - time.Millisecond, wantReads: 3},
		}},
		// The queue's failure backoff cannot space passes a change
		// enqueues: the planner's own does, 5 ms doubled per failure.
		"failures in a row back off": {readEvery: time.Millisecond, idle: 2 * time.Second, passes: []pass{
			{failRead: true, wantReads: 1},
			{after: time.Millisecond, wantReads: 1, wantWait: 4 * time.Millisecond},
			{after: 4 * time.Millisecond, failRead: true, wantReads: 2},
			{after: 9 * time.Millisecond, wantReads: 2, wantWait: time.Millisecond},
			{after: time.Millisecond, wantReads: 3},
			{after: time.Millisecond, wantReads: 4},
		}},
		"capped at a quarter of Idle": {readEvery: time.Hour, idle: time.Second, passes: []pass{
			{wantReads: 1},
			{after: 100 * time.Millisecond, wantReads: 1, wantWait: 150 * time.Millisecond},
			{after: 150 * time.Millisecond, wantReads: 2},
		}},
		"capped at a quarter of Max": {readEvery: time.Hour, idle: 2 * time.Second, max: 200 * time.Millisecond, passes: []pass{
			{wantReads: 1},
			{after: 10 * time.Millisecond, wantReads: 1, wantWait: 40 * time.Millisecond},
			{after: 40 * time.Millisecond, wantReads: 2},
		}},
		"off": {readEvery: -1, idle: 2 * time.Second, passes: []pass{
			{wantReads: 1}, {wantReads: 2}, {wantReads: 3},
		}},
		"off, failures still back off": {readEvery: -1, idle: 2 * time.Second, passes: []pass{
			{failRead: true, wantReads: 1},
			{wantReads: 1, wantWait: 5 * time.Millisecond},
			{after: 5 * time.Millisecond, wantReads: 2},
			{wantReads: 3},
		}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			ml := autoMigLayout("auto", nil)
			h := newAutoCluster(t, ml, node("n1", map[string]string{"pool": "auto"}), autoNML("n1", ml, a100(0).layout("7g.80gb@0")))
			h.create(autoClaim("c1", profileSelector("1g.10gb")), autoPod("p", h.now, "c1"))
			reads, fail := 0, false
			h.a.Client = interceptor.NewClient(h.c.(client.WithWatch), interceptor.Funcs{
				List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
					if _, ok := list.(*v1alpha1.MigLayoutList); ok { // read's first list
						reads++
						if fail {
							return errors.New("injected")
						}
					}
					return c.List(ctx, list, opts...)
				},
			})
			h.a.ReadEvery, h.a.Idle = tc.readEvery, tc.idle
			if tc.max != 0 {
				h.a.Max = tc.max
			}
			for i, p := range tc.passes {
				h.now = h.now.Add(p.after)
				fail = p.failRead
				res, err := h.a.Reconcile(context.Background(), autoKey)
				if (err != nil) != p.failRead {
					t.Fatalf("pass %d: error %v, want one: %t", i, err, p.failRead)
				}
				if reads != p.wantReads {
					t.Errorf("pass %d: %d reads in all, want %d", i, reads, p.wantReads)
				}
				if p.wantWait != 0 && res.RequeueAfter != p.wantWait {
					t.Errorf("pass %d: requeued after %v, want %v (the rest of ReadEvery)", i, res.RequeueAfter, p.wantWait)
				}
			}
			h.now = h.now.Add(time.Second)
			h.settle()
			if got := h.specOf("n1")[0]; !strings.Contains(got, "1g.10gb") {
				t.Errorf("n1's desired layout %q: the pending 1g.10gb pod was not planned", got)
			}
		})
	}
}
