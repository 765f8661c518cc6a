package agent

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/miglayout/miglayout/api/v1alpha1"
	"github.com/miglayout/miglayout/pkg/mig/gpu"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// TestWipedPoolWakesTheNode: the deletion of a ResourceSlice of the node's
// pool starts a pass where it leaves the pool without a slice (the kubelet
// wiped it), so that the pool is published again at once; not where a slice
// of the pool is left, nor for another pool's or driver's slice, nor where
// the Node is gone (its slices were collected with it).
func TestWipedPoolWakesTheNode(t *testing.T) {
	slice := func(name, driver, pool string) *resourceapi.ResourceSlice {
		return &resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: resourceapi.ResourceSliceSpec{Driver: driver, Pool: resourceapi.ResourcePool{Name: pool, ResourceSliceCount: 1}}}
	}
	deleted := slice("n1-a", testDriver, "n1")
	pass := []reconcile.Request{{NamespacedName: types.NamespacedName{Name: "n1"}}}
	tests := map[string]struct {
		deleted client.Object
		left    []client.Object
		listErr error
		noNode  bool // the Node is gone (deleted, its slices with it)
		want    []reconcile.Request
	}{
		"the pool's last slice, with the Node": {deleted: deleted, noNode: true},
		"the pool's last slice":                {deleted: deleted, want: pass},
		"another driver's slice is left":       {deleted: deleted, left: []client.Object{slice("x", "gpu.example.com", "n1")}, want: pass},
		"another pool's slice is left":         {deleted: deleted, left: []client.Object{slice("x", testDriver, "n2")}, want: pass},
		"a slice of the pool is left":          {deleted: deleted, left: []client.Object{slice("n1-b", testDriver, "n1")}},
		"the slices cannot be listed":          {deleted: deleted, left: []client.Object{slice("n1-b", testDriver, "n1")}, listErr: errors.New("boom"), want: pass},
		"another pool's slice":                 {deleted: slice("n2-a", testDriver, "n2")},
		"another driver's slice":               {deleted: slice("n1-x", "gpu.example.com", "n1")},
		"an object that is not a slice":        {deleted: &corev1.Pod{}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			objs := tc.left
			if !tc.noNode {
				objs = append(objs, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}})
			}
			c := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(objs...).
				WithInterceptorFuncs(interceptor.Funcs{List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
					if tc.listErr != nil {
						return tc.listErr
					}
					return c.List(ctx, list, opts...)
				}}).Build()
			m := NewMetrics(prometheus.NewRegistry())
			inv := &republishingInventory{called: make(chan struct{}, 2), release: make(chan struct{}), ended: make(chan error, 2)}
			r := &NodeReconciler{Client: c, NodeName: "n1", Repartitioner: &Repartitioner{Driver: testDriver, Metrics: m, Inventory: inv}}
			go func() { _ = r.republisher(inv)(t.Context()) }()
			// The event's context ends with its handler, as controller-runtime's.
			ctx, cancel := context.WithCancel(t.Context())
			got := r.wipedToNode(ctx, tc.deleted)
			cancel()
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("passes asked (-want +got):\n%s", diff)
			}
			// The pool found deleted is published again at once beside the
			// pass, by the republisher on its own context, which outlives the
			// event's; on a failed read the pass alone does it.
			republished := false
			select {
			case <-inv.called:
				republished = true
				close(inv.release)
				if err := <-inv.ended; err != nil {
					t.Errorf("Republish's context ended with the event's: %v", err)
				}
			case <-time.After(200 * time.Millisecond):
			}
			if want := tc.want != nil && tc.listErr == nil; republished != want {
				t.Errorf("published again at once %t, want %t", republished, want)
			}
			// A pool found deleted is counted; a pass asked for on a failed read is not.
			want := 0.0
			if tc.want != nil && tc.listErr == nil {
				want = 1
			}
			if got := testutil.ToFloat64(m.poolDeleted); got != want {
				t.Errorf("miglayout_agent_pool_deletions_total = %v, want %v", got, want)
			}
		})
	}
}

// republishingInventory is an Inventory and Republisher that tells each
// Republish on called, holds it until release is closed (nil: at once),
// and then tells on ended (where not nil) whether its context had ended.
type republishingInventory struct {
	fakeInventory
	called  chan struct{}
	release chan struct{}
	ended   chan error
}

func (f *republishingInventory) Republish(ctx context.Context) (bool, error) {
	f.called <- struct{}{}
	if f.release != nil {
		<-f.release
	}
	if f.ended != nil {
		f.ended <- ctx.Err()
	}
	return true, nil
}

// TestWipedPoolRepublishedOneAtATime: a deletion found while the pool is
// being published again starts no Republish beside it, but one after it;
// deletions found during one Republish ask for one more, not one each; one
// found after they all ended starts a Republish again; the republisher ends
// with its context.
func TestWipedPoolRepublishedOneAtATime(t *testing.T) {
	deleted := &resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: "n1-a"},
		Spec: resourceapi.ResourceSliceSpec{Driver: testDriver, Pool: resourceapi.ResourcePool{Name: "n1", ResourceSliceCount: 1}}}
	c := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}).Build()
	inv := &republishingInventory{called: make(chan struct{}, 8), release: make(chan struct{})}
	r := &NodeReconciler{Client: c, NodeName: "n1", Repartitioner: &Repartitioner{Driver: testDriver, Metrics: NewMetrics(prometheus.NewRegistry()), Inventory: inv}}
	ctx, cancel := context.WithCancel(t.Context())
	stopped := make(chan error)
	go func() { stopped <- r.republisher(inv)(ctx) }()
	wait := func(want bool) {
		t.Helper()
		select {
		case <-inv.called:
			if !want {
				t.Error("a Republish started beside the one under way")
			}
		case <-time.After(200 * time.Millisecond):
			if want {
				t.Error("no Republish started")
			}
		}
	}
	let := func() { inv.release <- struct{}{} } // lets the Republish under way end
	r.wipedToNode(t.Context(), deleted)
	wait(true)
	r.wipedToNode(t.Context(), deleted)
	r.wipedToNode(t.Context(), deleted)
	wait(false)
	let()
	wait(true) // one more for the two found meanwhile
	let()
	wait(false)
	r.wipedToNode(t.Context(), deleted)
	wait(true)
	let()
	// The republisher ends with its context.
	cancel()
	select {
	case err := <-stopped:
		if err != nil {
			t.Errorf("the republisher ended with %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Error("the republisher did not end with its context")
	}
}

// TestSliceEventsPassedAreDeletions: of the ResourceSlice events, only
// deletions reach wipedToNode; the agent's own writes of the pool cause no
// pass.
func TestSliceEventsPassedAreDeletions(t *testing.T) {
	s := &resourceapi.ResourceSlice{}
	got := map[string]bool{
		"create":  sliceDeleted.Create(event.CreateEvent{Object: s}),
		"update":  sliceDeleted.Update(event.UpdateEvent{ObjectOld: s, ObjectNew: s}),
		"delete":  sliceDeleted.Delete(event.DeleteEvent{Object: s}),
		"generic": sliceDeleted.Generic(event.GenericEvent{Object: s}),
	}
	if diff := cmp.Diff(map[string]bool{"create": false, "update": false, "delete": true, "generic": false}, got); diff != "" {
		t.Errorf("events passed (-want +got):\n%s", diff)
	}
}

// TestPoolDeletedEvent: a pool published again is told in a Normal
// PoolDeleted event on the node's NodeMigLayout, with how long it took; one
// that could not be, in a Warning; nothing where there was nothing to
// publish again or no NodeMigLayout.
func TestPoolDeletedEvent(t *testing.T) {
	for name, tc := range map[string]struct {
		noNML  bool
		handed bool
		err    error
		want   string
	}{
		"published again": {handed: true,
			want: "Normal PoolDeleted The node's ResourceSlices were deleted (by the kubelet at its start, after its DRA plugin was unreachable for 30s, or by hand), so no pod could be given a device of the node; published the pool again, served by the API server within 12ms"},
		"not served in time": {handed: true, err: errors.New("timed out"),
			want: "Warning PoolDeleted The node's ResourceSlices were deleted (by the kubelet at its start, after its DRA plugin was unreachable for 30s, or by hand), so no pod could be given a device of the node; publishing the pool again failed: timed out; the next pass publishes it"},
		"nothing published yet": {},
		"no NodeMigLayout":      {noNML: true, handed: true},
	} {
		t.Run(name, func(t *testing.T) {
			rec := events.NewFakeRecorder(4)
			var c client.Client = nmlClient(t, &v1alpha1.NodeMigLayout{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}, interceptor.Funcs{})
			if tc.noNML {
				c = nmlClient(t, &v1alpha1.NodeMigLayout{ObjectMeta: metav1.ObjectMeta{Name: "other"}}, interceptor.Funcs{})
			}
			r := &NodeReconciler{Client: c, NodeName: "n1", Recorder: rec}
			r.poolDeletedEvent(t.Context(), tc.handed, tc.err, 12300*time.Microsecond)
			if got := recorded(rec); got != tc.want {
				t.Errorf("event %q, want %q", got, tc.want)
			}
		})
	}
}

// TestXidErrorEvent: an Xid records a Warning XidError on the node's
// NodeMigLayout naming the Xid, the GPU, its GPU instance and the devices
// hit, and wakes the repartitioner; without a NodeMigLayout, no event.
func TestXidErrorEvent(t *testing.T) {
	for name, tc := range map[string]struct {
		noNML bool
		x     gpu.Xid
		want  string
	}{
		"GPU instance": {x: gpu.Xid{GPUIndex: 1, GPUUUID: "GPU-b", Code: 94, GIID: 2, CIID: -1},
			want: "Warning XidError Xid 94 on GPU 1 (GPU-b), GPU instance 2: MIG-1 reported Unhealthy to the kubelet and published with the NoSchedule taint miglayout.io/xid=94 until the node reboots or kubectl miglayout clear-xids clears it; NVIDIA's XID Errors guide says what the Xid means and whether the GPU needs a reset"},
		"whole GPU": {x: gpu.Xid{GPUIndex: 0, Code: 48, GIID: -1, CIID: -1},
			want: "Warning XidError Xid 48 on GPU 0: MIG-1 reported Unhealthy to the kubelet and published with the NoSchedule taint miglayout.io/xid=48 until the node reboots or kubectl miglayout clear-xids clears it; NVIDIA's XID Errors guide says what the Xid means and whether the GPU needs a reset"},
		"no NodeMigLayout": {noNML: true, x: gpu.Xid{Code: 48, GIID: -1, CIID: -1}},
	} {
		t.Run(name, func(t *testing.T) {
			rec := events.NewFakeRecorder(4)
			nml := "n1"
			if tc.noNML {
				nml = "other"
			}
			r := &NodeReconciler{Client: nmlClient(t, &v1alpha1.NodeMigLayout{ObjectMeta: metav1.ObjectMeta{Name: nml}}, interceptor.Funcs{}), NodeName: "n1", Recorder: rec}
			r.XidError(t.Context(), tc.x, []string{"MIG-1"})
			if got := recorded(rec); got != tc.want {
				t.Errorf("event %q, want %q", got, tc.want)
			}
			select {
			case <-r.wakeChan():
			default:
				t.Error("the repartitioner was not woken")
			}
		})
	}
}

// recorded is the event rec recorded, "" for none.
func recorded(rec *events.FakeRecorder) string {
	select {
	case e := <-rec.Events:
		return e
	default:
		return ""
	}
}
