package main

import (
	"context"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2"
)

// TestHeartbeatRenewsWellBeforeTheLeaseExpires: after creating its Lease,
// the heartbeat renews it (a later renew time) well within the Lease's
// duration, so that a controller watching the Lease never sees it expire
// while the agent runs. It renews every quarter of the duration; the test
// allows three quarters, for a loaded machine.
func TestHeartbeatRenewsWellBeforeTheLeaseExpires(t *testing.T) {
	const duration = 8 * time.Second
	kube := fake.NewClientset(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "gpu-node-1", UID: "5e1f0c2a-1b3d-4e5f-8a9b-0c1d2e3f4a5b"}})
	ctx := runHeartbeat(t, kube, duration)
	get := func(ctx context.Context) (*coordinationv1.Lease, error) {
		return kube.CoordinationV1().Leases("miglayout-system").Get(ctx, "miglayout-agent-gpu-node-1", metav1.GetOptions{})
	}
	var created *coordinationv1.Lease
	if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		l, err := get(ctx)
		if err != nil || l.Spec.RenewTime == nil {
			return false, nil
		}
		created = l
		return true, nil
	}); err != nil {
		t.Fatalf("no Lease created: %v", err)
	}
	within := duration * 3 / 4
	if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, within, true, func(ctx context.Context) (bool, error) {
		l, err := get(ctx)
		if err != nil || l.Spec.RenewTime == nil {
			return false, nil
		}
		return l.Spec.RenewTime.After(created.Spec.RenewTime.Time), nil
	}); err != nil {
		t.Errorf("Lease created at %v not renewed within %v: %v", created.Spec.RenewTime, within, err)
	}
}

// runHeartbeat runs the heartbeat of gpu-node-1 (Lease in miglayout-system)
// over kube until the test ends, and returns its context; the heartbeat's
// error is checked once it is stopped.
func runHeartbeat(t *testing.T, kube kubernetes.Interface, duration time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		done <- heartbeat(kube, "gpu-node-1", "miglayout-system", duration).Start(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("heartbeat: %v", err)
		}
	})
	return ctx
}

// TestHeartbeatRenewsThroughTheStop: the heartbeat backgroundHeartbeat's
// runnable starts goes on renewing the Lease after the manager's context
// ends (the stop signal, while the manager shuts down) until run returns
// and stops it; then it renews no more. Stopped without being started
// (the manager failed first), or started where ready never held (the
// caches never synced), it writes no Lease, and stop returns at once, as
// often as it is called.
func TestHeartbeatRenewsThroughTheStop(t *testing.T) {
	const duration = 4 * time.Second
	kube := fake.NewClientset(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "gpu-node-1", UID: "5e1f0c2a-1b3d-4e5f-8a9b-0c1d2e3f4a5b"}})
	logger := klog.Background()
	_, never := backgroundHeartbeat(logger, kube, "gpu-node-1", "miglayout-system", duration, nil)
	never()
	never()
	notReady, stopNotReady := backgroundHeartbeat(logger, kube, "gpu-node-1", "miglayout-system", duration, func(context.Context) bool { return false })
	if err := notReady.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	stopNotReady()
	if _, err := kube.CoordinationV1().Leases("miglayout-system").Get(t.Context(), "miglayout-agent-gpu-node-1", metav1.GetOptions{}); err == nil {
		t.Fatal("a heartbeat whose caches never synced wrote its Lease")
	}
	ctx, signal := context.WithCancel(t.Context())
	r, stop := backgroundHeartbeat(logger, kube, "gpu-node-1", "miglayout-system", duration, func(context.Context) bool { return true })
	if err := r.Start(ctx); err != nil {
		t.Fatal(err)
	}
	renewed := func() time.Time {
		l, err := kube.CoordinationV1().Leases("miglayout-system").Get(t.Context(), "miglayout-agent-gpu-node-1", metav1.GetOptions{})
		if err != nil || l.Spec.RenewTime == nil {
			return time.Time{}
		}
		return l.Spec.RenewTime.Time
	}
	waitRenewedAfter := func(after time.Time, within time.Duration) bool {
		return wait.PollUntilContextTimeout(t.Context(), 10*time.Millisecond, within, true, func(context.Context) (bool, error) {
			return renewed().After(after), nil
		}) == nil
	}
	if !waitRenewedAfter(time.Time{}, time.Minute) {
		t.Fatal("no Lease created")
	}
	signal()
	if at := renewed(); !waitRenewedAfter(at, duration*3/4) {
		t.Errorf("Lease renewed at %v not renewed again within %v after the agent's context ended", at, duration*3/4)
	}
	stop()
	stop()
	at := renewed()
	time.Sleep(duration / 2)
	if got := renewed(); !got.Equal(at) {
		t.Errorf("Lease renewed at %v after the heartbeat stopped (last %v)", got, at)
	}
}
