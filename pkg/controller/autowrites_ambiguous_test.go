package controller

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/google/go-cmp/cmp"
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
	h.a.APIReader = liveThrough{cache, h.c}
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

// liveThrough reads c around l's lag, as the API reader reads around the
// cache.
type liveThrough struct {
	l *laggingNodeMigLayouts
	c client.Client
}

func (r liveThrough) unlagged() func() {
	r.l.mu.Lock()
	was := r.l.lagging
	r.l.lagging = false
	r.l.mu.Unlock()
	return func() {
		r.l.mu.Lock()
		r.l.lagging = was
		r.l.mu.Unlock()
	}
}

func (r liveThrough) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	defer r.unlagged()()
	return r.c.Get(ctx, key, obj, opts...)
}

func (r liveThrough) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	defer r.unlagged()()
	return r.c.List(ctx, list, opts...)
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

// TestResolveLiveSettlesUnsureWrites: an unsure write the live read shows
// is expected at the generation read (the cache must reach it); one it
// does not show, or of a node gone, is forgotten; a failed read is
// returned and settles nothing.
func TestResolveLiveSettlesUnsureWrites(t *testing.T) {
	const ml = types.UID("ml")
	gpus := []v1alpha1.GPUSpec{{Index: 0, MIGEnabled: true, Layout: "7g.80gb@0"}}
	written := &v1alpha1.NodeMigLayout{ObjectMeta: metav1.ObjectMeta{Name: "written", Generation: 4}, Spec: v1alpha1.NodeMigLayoutSpec{GPUs: gpus}}
	unwritten := &v1alpha1.NodeMigLayout{ObjectMeta: metav1.ObjectMeta{Name: "unwritten", Generation: 3}}
	live := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(written, unwritten).Build()
	now := time.Now()
	var e rolloutExpectations
	for _, n := range []string{"written", "unwritten", "gone"} {
		e.expectUnsure(ml, n, gpus, now)
	}
	if err := e.resolveLive(context.Background(), live, ml); err != nil {
		t.Fatal(err)
	}
	if got := e.unsure(ml); len(got) != 0 {
		t.Errorf("still unsure: %v", got)
	}
	stale := written.DeepCopy()
	stale.Generation = 3
	cached := map[string]*v1alpha1.NodeMigLayout{"written": stale, "unwritten": unwritten, "gone": unwritten}
	unseen, _ := e.unseen(ml, cached, now)
	if diff := cmp.Diff(map[string]bool{"written": true}, unseen); diff != "" {
		t.Errorf("unseen (-want +got):\n%s", diff)
	}
	if unseen, _ := e.unseen(ml, map[string]*v1alpha1.NodeMigLayout{"written": written}, now); len(unseen) != 0 {
		t.Errorf("unseen %v once the cache shows generation 4", unseen)
	}

	// An earlier write (generation 4) the cache does not show yet, then
	// one answered with a timeout and not applied: the node stays unseen
	// until the cache shows generation 4.
	e.expect(ml, "written", gpus, "", 4, now)
	e.expectUnsure(ml, "written", []v1alpha1.GPUSpec{{Index: 0, MIGEnabled: true, Layout: "3g.40gb@0,3g.40gb@4"}}, now)
	if err := e.resolveLive(context.Background(), live, ml); err != nil {
		t.Fatal(err)
	}
	if unseen, _ := e.unseen(ml, map[string]*v1alpha1.NodeMigLayout{"written": stale}, now); !unseen["written"] {
		t.Error("the earlier write, not shown by the cache, was forgotten with the unsure one that was not applied")
	}

	e.expectUnsure(ml, "written", gpus, now)
	failing := interceptor.NewClient(live, interceptor.Funcs{Get: func(context.Context, client.WithWatch, client.ObjectKey, client.Object, ...client.GetOption) error {
		return errors.New("the API server is unavailable")
	}})
	if err := e.resolveLive(context.Background(), failing, ml); err == nil {
		t.Error("a failed live read gave no error")
	}
	if got := e.unsure(ml); len(got) != 1 {
		t.Errorf("unsure after a failed read: %v, want the write kept unsure", got)
	}
}
