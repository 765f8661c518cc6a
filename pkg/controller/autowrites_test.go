package controller

import (
	"context"
	"sync"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// laggingNodeMigLayouts makes the client's reads of NodeMigLayouts return
// the copies frozen by freeze, while lagging is on: an informer that has not
// delivered the controller's own writes yet.
type laggingNodeMigLayouts struct {
	mu      sync.Mutex
	lagging bool
	frozen  map[string]*v1alpha1.NodeMigLayout
}

func (l *laggingNodeMigLayouts) funcs() interceptor.Funcs {
	return interceptor.Funcs{
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			if err := c.List(ctx, list, opts...); err != nil {
				return err
			}
			l.mu.Lock()
			defer l.mu.Unlock()
			if nmls, ok := list.(*v1alpha1.NodeMigLayoutList); ok && l.lagging {
				for i := range nmls.Items {
					if old, ok := l.frozen[nmls.Items[i].Name]; ok {
						nmls.Items[i] = *old.DeepCopy()
					}
				}
			}
			return nil
		},
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if err := c.Get(ctx, key, obj, opts...); err != nil {
				return err
			}
			l.mu.Lock()
			defer l.mu.Unlock()
			if nml, ok := obj.(*v1alpha1.NodeMigLayout); ok && l.lagging {
				if old, ok := l.frozen[key.Name]; ok {
					old.DeepCopyInto(nml)
				}
			}
			return nil
		},
	}
}

// freeze keeps the NodeMigLayouts as they are now.
func (l *laggingNodeMigLayouts) freeze(t *testing.T, c client.Client) {
	t.Helper()
	var list v1alpha1.NodeMigLayoutList
	if err := c.List(context.Background(), &list); err != nil {
		t.Fatal(err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.frozen = map[string]*v1alpha1.NodeMigLayout{}
	for i := range list.Items {
		l.frozen[list.Items[i].Name] = list.Items[i].DeepCopy()
	}
}

func (l *laggingNodeMigLayouts) lag(on bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lagging = on
}

// TestAutoWaitsForTheCacheToShowItsWrites: under maxGPUs 1, a pass
// changes n1's GPU for p1; a 7g pod arrives while the cache does not show
// that write yet. The next passes wait for the cache instead of planning
// on it (which would count n1 as not changing and give the MigLayout's one
// slot to n2: two GPUs changing at once); once the cache shows the write,
// the plan leaves n2 for after n1's change.
func TestAutoWaitsForTheCacheToShowItsWrites(t *testing.T) {
	ml := autoMigLayout("auto", &v1alpha1.AutoPolicy{MaxGPUs: 1, MaxGPUsPerNode: 1})
	cache := &laggingNodeMigLayouts{}
	h := newAutoClusterIntercepted(t, ml, cache.funcs(),
		node("n1", map[string]string{"pool": "auto"}), autoNML("n1", ml, a100(0).layout("1g.10gb@6").inUse("1g.10gb@6")),
		node("n2", map[string]string{"pool": "auto"}), autoNML("n2", ml, a100(0)))
	h.create(autoClaim("c1", profileSelector("1g.10gb")), autoPod("p1", h.now, "c1"))
	cache.freeze(t, h.c)
	h.settle()
	if len(h.specOf("n1")) == 0 {
		t.Fatalf("p1 not planned on n1 (n2: %v)", h.specOf("n2"))
	}
	n1 := h.specOf("n1")

	cache.lag(true)
	h.now = h.now.Add(h.a.max())
	h.create(autoClaim("c2", profileSelector("7g.80gb")), autoPod("p2", h.now, "c2"))
	for range 10 {
		res, err := h.a.Reconcile(context.Background(), autoKey)
		if err != nil {
			t.Fatal(err)
		}
		if res.RequeueAfter <= 0 || res.RequeueAfter > cacheCatchUpRecheck {
			t.Errorf("a pass held for the cache asks to be run again in %v, want within %v", res.RequeueAfter, cacheCatchUpRecheck)
		}
		h.now = h.now.Add(max(res.RequeueAfter, h.a.max()/4))
	}
	cache.lag(false)
	if got := h.specOf("n2"); len(got) > 0 {
		t.Errorf("n2 planned %v while the cache did not show n1's change: two GPUs changing under maxGPUs 1", got)
	}
	h.settle()
	if got := h.specOf("n2"); len(got) > 0 {
		t.Errorf("n2 planned %v while n1's change is in flight: two GPUs changing under maxGPUs 1", got)
	}
	if diff := h.specOf("n1"); len(diff) != len(n1) || diff[0] != n1[0] {
		t.Errorf("n1's change in flight became %v, want %v kept", diff, n1)
	}
}
