package controller

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"syscall"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// TestAutoWriteAnsweredWithErrorCountsAsChanging: a spec patch the API
// server applies but answers with an error (its timeout filter's 504) is
// expected all the same, so the next pass, planning a larger pod on a cache
// that does not show the write yet, does not give the only maxGPUs slot to
// a second node.
func TestAutoWriteAnsweredWithErrorCountsAsChanging(t *testing.T) {
	ml := autoMigLayout("auto", &v1alpha1.AutoPolicy{MaxGPUs: 1, MaxGPUsPerNode: 1})
	cache := &laggingNodeMigLayouts{}
	var failNext atomic.Bool
	funcs := cache.funcs()
	funcs.Patch = func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
		if err := c.Patch(ctx, obj, patch, opts...); err != nil {
			return err
		}
		if _, ok := obj.(*v1alpha1.NodeMigLayout); ok && failNext.CompareAndSwap(true, false) {
			return apierrors.NewTimeoutError("request did not complete within requested timeout", 0)
		}
		return nil
	}
	h := newAutoClusterIntercepted(t, ml, funcs,
		node("n1", map[string]string{"pool": "auto"}), autoNML("n1", ml, a100(0).layout("1g.10gb@6").inUse("1g.10gb@6")),
		node("n2", map[string]string{"pool": "auto"}), autoNML("n2", ml, a100(0)))
	h.create(autoClaim("c1", profileSelector("1g.10gb")), autoPod("p1", h.now, "c1"))
	cache.freeze(t, h.c)
	cache.lag(true)
	failNext.Store(true)
	ctx := context.Background()
	sawErr := false
	for range 20 {
		res, err := h.a.Reconcile(ctx, autoKey)
		if err != nil {
			sawErr = true
			break
		}
		h.now = h.now.Add(max(res.RequeueAfter, h.a.max()/4))
	}
	if !sawErr {
		t.Fatal("no pass wrote")
	}
	var live v1alpha1.NodeMigLayout
	cache.lag(false)
	if err := h.c.Get(ctx, client.ObjectKey{Name: "n1"}, &live); err != nil {
		t.Fatal(err)
	}
	cache.lag(true)
	if len(live.Spec.GPUs) == 0 {
		t.Fatal("the write answered with an error was not applied: the test shows nothing")
	}
	h.now = h.now.Add(h.a.max())
	h.create(autoClaim("c2", profileSelector("7g.80gb")), autoPod("p2", h.now, "c2"))
	for range 20 {
		res, err := h.a.Reconcile(ctx, autoKey)
		_ = err // the passes hold for the cache, or fail on the lag
		h.now = h.now.Add(max(res.RequeueAfter, h.a.max()/4))
	}
	cache.lag(false)
	if got := h.specOf("n2"); len(got) > 0 && len(h.specOf("n1")) > 0 {
		t.Errorf("n1 %v and n2 %v both changing under maxGPUs 1", h.specOf("n1"), got)
	}
}

func TestWriteMayHaveApplied(t *testing.T) {
	gr := schema.GroupResource{Group: "miglayout.io", Resource: "nodemiglayouts"}
	tests := map[string]struct {
		err  error
		want bool
	}{
		"timeout":           {apierrors.NewTimeoutError("request did not complete within requested timeout", 0), true},
		"internal error":    {apierrors.NewInternalError(errors.New("etcd")), true},
		"connection reset":  {fmt.Errorf("patching: %w", syscall.ECONNRESET), true},
		"deadline":          {context.DeadlineExceeded, true},
		"conflict":          {apierrors.NewConflict(gr, "n1", errors.New("changed")), false},
		"invalid":           {apierrors.NewInvalid(schema.GroupKind{Group: gr.Group, Kind: "NodeMigLayout"}, "n1", nil), false},
		"forbidden":         {apierrors.NewForbidden(gr, "n1", errors.New("no")), false},
		"not found":         {apierrors.NewNotFound(gr, "n1"), false},
		"too many requests": {apierrors.NewTooManyRequests("later", 1), false},
		"wrapped conflict":  {fmt.Errorf("writing: %w", apierrors.NewConflict(gr, "n1", errors.New("changed"))), false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := writeMayHaveApplied(tc.err); got != tc.want {
				t.Errorf("writeMayHaveApplied(%v) = %v, want %v", tc.err, got, tc.want)
			}
		})
	}
}
