package controller

import (
	"context"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// liveReads counts the reads around the cache, failing them with err
// where it is set.
type liveReads struct {
	client.Reader
	reads int
	err   error
}

func (r *liveReads) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	r.reads++
	if r.err != nil {
		return r.err
	}
	return r.Reader.Get(ctx, key, obj, opts...)
}

// statusFixture is a MigLayout selecting one Ready node, its reconciler
// reading around the cache through a liveReads.
type statusFixture struct {
	t      *testing.T
	c      client.Client
	r      *Reconciler
	reader *liveReads
	obs    Observation
}

func newStatusFixture(t *testing.T, funcs interceptor.Funcs) *statusFixture {
	ml := staticMigLayout("a", "uid-a", "a")
	ml.Generation = 1
	c := interceptor.NewClient(fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(ml).
		WithStatusSubresource(&v1alpha1.MigLayout{}).Build(), funcs)
	f := &statusFixture{t: t, c: c, reader: &liveReads{Reader: c},
		obs: Observation{Generation: 1, Selection: Selection{Nodes: []string{"n1"}}, Nodes: []NodeState{readyNode("n1")}}}
	f.r = f.newLeader()
	return f
}

// newLeader is a reconciler that has written and read nothing yet.
func (f *statusFixture) newLeader() *Reconciler {
	return &Reconciler{Client: f.c, APIReader: f.reader, Scheme: f.c.Scheme(), Recorder: events.NewFakeRecorder(100)}
}

// cached is the MigLayout as the API server holds it now.
func (f *statusFixture) cached() *v1alpha1.MigLayout {
	f.t.Helper()
	var ml v1alpha1.MigLayout
	if err := f.c.Get(context.Background(), client.ObjectKey{Name: "a"}, &ml); err != nil {
		f.t.Fatal(err)
	}
	return &ml
}

// relabel changes the MigLayout's metadata, not its spec or status: a new
// resourceVersion this reconciler did not write.
func (f *statusFixture) relabel(value string) {
	f.t.Helper()
	ml := f.cached()
	ml.Labels = map[string]string{"touched": value}
	if err := f.c.Update(context.Background(), ml); err != nil {
		f.t.Fatal(err)
	}
}

func (f *statusFixture) write(ml *v1alpha1.MigLayout) (*v1alpha1.MigLayoutStatus, error) {
	return f.r.writeStatus(context.Background(), ml, f.obs)
}

// TestWriteStatusTrustsTheCacheOfANewLeader: a reconciler that has written
// no status yet writes from the cached MigLayout without reading it around
// the cache, and keeps trusting the cache while the status it computes is
// the one there, whatever else changes on the object.
func TestWriteStatusTrustsTheCacheOfANewLeader(t *testing.T) {
	f := newStatusFixture(t, interceptor.Funcs{})
	if replaced, err := f.newLeader().writeStatus(context.Background(), f.cached(), f.obs); err != nil || replaced == nil {
		t.Fatalf("the first leader's write: replaced %v, error %v; want the status written", replaced, err)
	}
	f.reader.reads = 0
	if replaced, err := f.write(f.cached()); err != nil || replaced != nil {
		t.Fatalf("unchanged status: replaced %v, error %v; want nothing written", replaced, err)
	}
	f.relabel("1")
	if _, err := f.write(f.cached()); err != nil {
		t.Fatal(err)
	}
	if f.reader.reads != 0 {
		t.Errorf("%d reads around the cache by a new leader, want none", f.reader.reads)
	}
}

// TestWriteStatusTrustsTheCacheOnceItShowsTheLiveCopy: after a read around
// the cache finds the status unchanged, a cache that shows that live copy
// is trusted again: no further read.
func TestWriteStatusTrustsTheCacheOnceItShowsTheLiveCopy(t *testing.T) {
	f := newStatusFixture(t, interceptor.Funcs{})
	if _, err := f.write(f.cached()); err != nil {
		t.Fatal(err)
	}
	f.relabel("1") // the cache shows a version this reconciler did not write
	if _, err := f.write(f.cached()); err != nil {
		t.Fatal(err)
	}
	if f.reader.reads != 1 {
		t.Fatalf("%d reads around the cache after another write, want 1", f.reader.reads)
	}
	if _, err := f.write(f.cached()); err != nil {
		t.Fatal(err)
	}
	if f.reader.reads != 1 {
		t.Errorf("%d reads around the cache once it shows the live copy, want still 1", f.reader.reads)
	}
}

// TestWriteStatusErrors: a failed read around the cache, or a refused
// status write, is returned.
func TestWriteStatusErrors(t *testing.T) {
	forbidden := apierrors.NewForbidden(schema.GroupResource{Group: v1alpha1.GroupVersion.Group, Resource: "miglayouts"}, "a", nil)
	t.Run("the read around the cache fails", func(t *testing.T) {
		f := newStatusFixture(t, interceptor.Funcs{})
		if _, err := f.write(f.cached()); err != nil {
			t.Fatal(err)
		}
		f.relabel("1")
		f.reader.err = forbidden
		if _, err := f.write(f.cached()); !apierrors.IsForbidden(err) {
			t.Errorf("error %v, want the read's refusal", err)
		}
	})
	t.Run("the status write is refused", func(t *testing.T) {
		f := newStatusFixture(t, interceptor.Funcs{SubResourceUpdate: func(context.Context, client.Client, string, client.Object, ...client.SubResourceUpdateOption) error {
			return forbidden
		}})
		if replaced, err := f.write(f.cached()); !apierrors.IsForbidden(err) || replaced != nil {
			t.Errorf("replaced %v, error %v; want nothing replaced and the write's refusal", replaced, err)
		}
	})
}

// TestWriteStatusTrustsTheCacheOfARecreatedMigLayout: what was recorded
// of a MigLayout deleted since does not hold for the one made again under
// its name: the new one's cached copy is trusted.
func TestWriteStatusTrustsTheCacheOfARecreatedMigLayout(t *testing.T) {
	f := newStatusFixture(t, interceptor.Funcs{})
	if _, err := f.write(f.cached()); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := f.c.Delete(ctx, f.cached()); err != nil {
		t.Fatal(err)
	}
	again := staticMigLayout("a", "uid-a2", "a")
	again.Generation = 1
	if err := f.c.Create(ctx, again); err != nil {
		t.Fatal(err)
	}
	if _, err := f.write(f.cached()); err != nil {
		t.Fatal(err)
	}
	if f.reader.reads != 0 {
		t.Errorf("%d reads around the cache for the MigLayout made again, want none", f.reader.reads)
	}
}
