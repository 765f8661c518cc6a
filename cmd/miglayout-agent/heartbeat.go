package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/connrotation"
	"k8s.io/component-helpers/apimachinery/lease"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// The heartbeat: a coordination.k8s.io Lease per agent, in the namespace
// --lease-namespace names, renewed by component-helpers' lease controller
// (the one kubelets renew their node Leases with). The miglayout
// controller reports a node whose agent stops renewing it AgentLost.
// delete is never called: an API server with the
// OwnerReferencesPermissionEnforcement admission plugin (OpenShift's
// default) lets only who may delete an object set its ownerReferences, as
// the agent does to make the Node own its Lease (the chart's admission
// policy limits the agent to its own Lease, delete included).
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;create;update;delete

// heartbeatClient returns the heartbeat's own client, as kubelets have one
// for their node Leases, with connections of its own (not shared with the
// manager's): a request times out after the renew interval, a quarter of
// duration, and the connections are closed once two requests in a row
// failed (closeAfterFailures), a renewal's or the Lease's first read and
// create alike. Without them a renewal sent on a connection that died
// without a reset (a NAT or load balancer that forgot it) waits for
// HTTP/2's health check, about 45 s with client-go's defaults, longer than
// the default 40 s Lease, or forever on a connection whose peer still
// answers pings but no request: the controller would report a running
// agent AgentLost.
func heartbeatClient(cfg *rest.Config, duration time.Duration) (kubernetes.Interface, error) {
	dialer := connrotation.NewDialer((&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext)
	c := rest.CopyConfig(cfg)
	c.Timeout = duration / 4
	c.Dial = dialer.DialContext
	c.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return &closeAfterFailures{next: rt, closeAll: dialer.CloseAll}
	})
	kube, err := kubernetes.NewForConfig(c)
	if err != nil {
		return nil, fmt.Errorf("creating the heartbeat's Kubernetes client: %w", err)
	}
	return kube, nil
}

// closeAfterFailures closes the heartbeat client's connections (closeAll)
// once two of its requests in a row got no answer (timed out, or the
// connection failed). component-helpers' lease controller has a hook for
// this (onRepeatedHeartbeatFailure), but calls it only for failed
// renewals, not for the reads and the create that come before the Lease
// exists or after a conflict, nor for the heartbeat's reads of the Node.
type closeAfterFailures struct {
	next     http.RoundTripper
	closeAll func()
	failures atomic.Int32
}

func (c *closeAfterFailures) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := c.next.RoundTrip(req)
	if err != nil {
		if c.failures.Add(1) >= 2 {
			c.failures.Store(0)
			c.closeAll()
		}
		return resp, err
	}
	c.failures.Store(0)
	return resp, nil
}

// heartbeat returns the runnable that renews the agent's Lease every
// quarter of duration (as kubelets renew theirs) until its context ends
// (backgroundHeartbeat runs it from the manager's start to the agent's
// exit).
// The Lease is owned by the Node, so it goes with a deleted Node; it is
// not deleted when the agent stops: a restart within duration is no loss
// of the agent. A node whose name needs its UID in the Lease name
// (v1alpha1.AgentLeaseNameNeedsUID) is read first, every few seconds until
// it can be.
func heartbeat(kube kubernetes.Interface, node, namespace string, duration time.Duration) manager.Runnable {
	seconds := int32(duration / time.Second)
	return manager.RunnableFunc(func(ctx context.Context) error {
		uid, err := leaseNodeUID(ctx, kube, node)
		if err != nil {
			return err
		}
		name := v1alpha1.AgentLeaseName(node, uid)
		ctx = klog.NewContext(ctx, klog.FromContext(ctx).WithValues("lease", klog.KRef(namespace, name)))
		c := lease.NewController(clock.RealClock{}, kube, node, seconds, nil, duration/4,
			name, namespace, nodeOwner(ctx, kube, node))
		klog.FromContext(ctx).Info("Renewing the heartbeat Lease", "duration", duration)
		c.Run(ctx)
		return nil
	})
}

// backgroundHeartbeat returns the runnable that starts the heartbeat when
// the manager starts it and ready (nil: at once) reports true, and stop,
// which ends it and waits for it. The agent's ready waits until the caches
// of what its passes read have synced: an agent refused the list of its
// NodeMigLayout, Node, ResourceSlices or ResourceClaims does not look
// alive. The heartbeat runs on in the background past the manager's stop,
// through its graceful shutdown, until run returns and calls stop. An
// upgrade's restart, its old pod stopping and its new one starting, is
// then no loss of the agent, where a Lease of the default 40 s could
// otherwise run out while the old pod stops (its grace period is 60 s)
// and the new one starts. stop may be
// called whether or not the runnable was started, and more than once.
// logger (the manager gives its runnables no logger) names the node.
func backgroundHeartbeat(logger klog.Logger, kube kubernetes.Interface, node, namespace string, duration time.Duration, ready func(context.Context) bool) (r manager.Runnable, stop func()) {
	var mu sync.Mutex
	var cancel context.CancelFunc
	var done chan struct{}
	r = manager.RunnableFunc(func(ctx context.Context) error {
		if ready != nil && !ready(ctx) {
			return nil // the manager stopped first
		}
		mu.Lock()
		defer mu.Unlock()
		if done != nil {
			return nil // stopped already
		}
		var hbCtx context.Context
		hbCtx, cancel = context.WithCancel(klog.NewContext(context.WithoutCancel(ctx), logger))
		done = make(chan struct{})
		go func() {
			defer close(done)
			if err := heartbeat(kube, node, namespace, duration).Start(hbCtx); err != nil && hbCtx.Err() == nil {
				logger.Error(err, "Heartbeat stopped")
			}
		}()
		return nil
	})
	stop = func() {
		mu.Lock()
		defer mu.Unlock()
		if done == nil {
			done = make(chan struct{}) // started no more
			close(done)
		}
		if cancel != nil {
			cancel()
		}
		<-done
	}
	return r, stop
}

// leaseNodeUID is the UID of the Node when its name needs it in the Lease
// name, else empty. It polls until the Node can be read; it fails only
// when ctx ends.
func leaseNodeUID(ctx context.Context, kube kubernetes.Interface, node string) (types.UID, error) {
	if !v1alpha1.AgentLeaseNameNeedsUID(node) {
		return "", nil
	}
	var uid types.UID
	err := wait.PollUntilContextCancel(ctx, 5*time.Second, true, func(ctx context.Context) (bool, error) {
		n, err := kube.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			klog.FromContext(ctx).Error(err, "Reading the Node, whose UID names the heartbeat Lease of a node name over 237 characters; retrying")
			return false, nil
		}
		uid = n.UID
		return true, nil
	})
	if err != nil {
		return "", fmt.Errorf("reading Node %s for its UID: %w", node, err)
	}
	return uid, nil
}

// nodeOwner makes the Node the Lease's owner. A Lease being created waits
// until the Node can be read (the controller retries); a renewal of a
// Lease without owner never waits for it.
func nodeOwner(ctx context.Context, kube kubernetes.Interface, name string) lease.ProcessLeaseFunc {
	return func(l *coordinationv1.Lease) error {
		if len(l.OwnerReferences) > 0 {
			return nil
		}
		n, err := kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			if l.ResourceVersion == "" {
				return fmt.Errorf("reading Node %s to own the heartbeat Lease: %w", name, err)
			}
			klog.FromContext(ctx).V(2).Info("Renewing the heartbeat Lease without owner", "err", err)
			return nil
		}
		l.OwnerReferences = []metav1.OwnerReference{{
			APIVersion: corev1.SchemeGroupVersion.String(), Kind: "Node", Name: n.Name, UID: n.UID,
		}}
		return nil
	}
}
