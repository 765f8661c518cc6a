package controller

import (
	"context"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// TestAutoStatusWriteHoldsNoWatchLock: while a status.auto write hangs on
// the API server, the watches' predicates, which run in the informers'
// handlers, still answer: the write does not hold the lock they take.
func TestAutoStatusWriteHoldsNoWatchLock(t *testing.T) {
	ml := autoMigLayout("auto", nil)
	patching, release := make(chan struct{}), make(chan struct{})
	c := interceptor.NewClient(fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(ml).
		WithStatusSubresource(&v1alpha1.MigLayout{}).Build(), interceptor.Funcs{
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, o client.Object, p client.Patch, opts ...client.SubResourcePatchOption) error {
			close(patching)
			<-release
			return c.SubResource(sub).Patch(ctx, o, p, opts...)
		},
	})
	a := &AutoPlanner{Client: c, labelKeys: map[string]bool{"pool": true}}
	done := make(chan error, 1)
	go func() {
		done <- a.writeAutoStatus(context.Background(), []v1alpha1.MigLayout{*ml}, map[string]v1alpha1.AutoStatus{"auto": {PendingPods: 1}})
	}()
	<-patching
	answered := make(chan bool, 1)
	go func() {
		answered <- a.nodeChangeMatters(node("n1", map[string]string{"pool": "a"}), node("n1", map[string]string{"pool": "b"}))
	}()
	select {
	case got := <-answered:
		if !got {
			t.Error("a change of a selected label does not matter")
		}
	case <-time.After(10 * time.Second):
		t.Error("a node predicate waited for the status write")
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
