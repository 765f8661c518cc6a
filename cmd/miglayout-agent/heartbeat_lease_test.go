package main

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"
)

// TestHeartbeatRenewsALeaseOwnedByTheNode: the heartbeat creates the
// agent's Lease in its namespace, held by the node for the duration given
// (in seconds) and owned by the Node; a node name too long for the Lease
// name gets a Lease named after the Node's UID. It stops with the manager.
func TestHeartbeatRenewsALeaseOwnedByTheNode(t *testing.T) {
	tests := map[string]struct {
		node  string
		uid   types.UID
		lease string
	}{
		"short name": {"gpu-node-1", "5e1f0c2a-1b3d-4e5f-8a9b-0c1d2e3f4a5b", "miglayout-agent-gpu-node-1"},
		"long name":  {strings.Repeat("n", 240), "0b7d3c1e-5a7f-4c1b-9a55-1d0e2f3a4b5c", "miglayout-agent-0b7d3c1e-5a7f-4c1b-9a55-1d0e2f3a4b5c"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			kube := fake.NewClientset(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: tc.node, UID: tc.uid}})
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			done := make(chan error, 1)
			go func() { done <- heartbeat(kube, tc.node, "miglayout-system", 40*time.Second).Start(ctx) }()
			var l *coordinationv1.Lease
			err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
				var err error
				l, err = kube.CoordinationV1().Leases("miglayout-system").Get(ctx, tc.lease, metav1.GetOptions{})
				return err == nil, nil
			})
			cancel()
			if runErr := <-done; runErr != nil {
				t.Errorf("heartbeat: %v", runErr)
			}
			if err != nil {
				t.Fatalf("no Lease %s: %v", tc.lease, err)
			}
			type lease struct {
				Holder  string
				Seconds int32
				Owners  []metav1.OwnerReference
			}
			got := lease{ptr.Deref(l.Spec.HolderIdentity, ""), ptr.Deref(l.Spec.LeaseDurationSeconds, 0), l.OwnerReferences}
			want := lease{tc.node, 40, []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: tc.node, UID: tc.uid}}}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("Lease %s (-want +got):\n%s", tc.lease, diff)
			}
		})
	}
}

// TestLeaseNodeUIDReadsTheNodeAtOnce: the Node is read as the heartbeat
// starts, not first after the retry interval of 5 s.
func TestLeaseNodeUIDReadsTheNodeAtOnce(t *testing.T) {
	long := strings.Repeat("n", 240)
	kube := fake.NewClientset(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: long, UID: "0b7d3c1e-5a7f-4c1b-9a55-1d0e2f3a4b5c"}})
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	if uid, err := leaseNodeUID(ctx, kube, long); err != nil || uid != "0b7d3c1e-5a7f-4c1b-9a55-1d0e2f3a4b5c" {
		t.Errorf("leaseNodeUID: %q, %v; want the Node's UID within 2s", uid, err)
	}
}

// TestNodeOwner: a Lease being created is owned by the Node, and waits
// (fails) while the Node cannot be read; a renewal of a Lease without
// owner goes on without one; a Lease already owned is left as it is,
// without reading the Node.
func TestNodeOwner(t *testing.T) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "gpu-node-1", UID: "5e1f0c2a-1b3d-4e5f-8a9b-0c1d2e3f4a5b"}}
	owner := []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: "gpu-node-1", UID: "5e1f0c2a-1b3d-4e5f-8a9b-0c1d2e3f4a5b"}}
	earlier := []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: "gpu-node-1", UID: "00000000-0000-4000-8000-000000000001"}}
	tests := map[string]struct {
		nodes           []*corev1.Node
		resourceVersion string
		owners          []metav1.OwnerReference
		wantOwners      []metav1.OwnerReference
		wantErr         bool
		wantReads       int
	}{
		"created":                        {nodes: []*corev1.Node{node}, wantOwners: owner, wantReads: 1},
		"created, Node not readable":     {wantErr: true, wantReads: 1},
		"renewed without owner":          {nodes: []*corev1.Node{node}, resourceVersion: "7", wantOwners: owner, wantReads: 1},
		"renewed, Node not readable":     {resourceVersion: "7", wantReads: 1},
		"renewed with an owner already":  {nodes: []*corev1.Node{node}, resourceVersion: "7", owners: earlier, wantOwners: earlier},
		"created with an owner already":  {owners: earlier, wantOwners: earlier},
		"renewed, owned, Node not there": {resourceVersion: "7", owners: earlier, wantOwners: earlier},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			kube := fake.NewClientset()
			for _, n := range tc.nodes {
				if err := kube.Tracker().Add(n); err != nil {
					t.Fatal(err)
				}
			}
			l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "miglayout-agent-gpu-node-1", ResourceVersion: tc.resourceVersion, OwnerReferences: tc.owners}}
			err := nodeOwner(t.Context(), kube, "gpu-node-1")(l)
			if (err != nil) != tc.wantErr {
				t.Errorf("error %v, want one: %t", err, tc.wantErr)
			}
			if err != nil && !strings.Contains(err.Error(), "gpu-node-1") {
				t.Errorf("error %v does not name the Node", err)
			}
			if diff := cmp.Diff(tc.wantOwners, l.OwnerReferences); diff != "" {
				t.Errorf("owners (-want +got):\n%s", diff)
			}
			if got := len(kube.Actions()); got != tc.wantReads {
				t.Errorf("%d API requests, want %d: %v", got, tc.wantReads, kube.Actions())
			}
		})
	}
}

// TestHeartbeatStoppedBeforeTheNodeIsRead: a heartbeat whose Lease name
// needs the Node's UID fails, renewing nothing, when the manager stops
// before the Node could be read.
func TestHeartbeatStoppedBeforeTheNodeIsRead(t *testing.T) {
	kube := fake.NewClientset()
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := heartbeat(kube, strings.Repeat("n", 240), "miglayout-system", 40*time.Second).Start(ctx); err == nil {
		t.Error("heartbeat: no error, want the Node's read failing")
	}
	leases, err := kube.CoordinationV1().Leases("miglayout-system").List(t.Context(), metav1.ListOptions{})
	if err != nil || len(leases.Items) != 0 {
		t.Errorf("Leases %v (%v), want none", leases, err)
	}
}

// TestLeaseNodeUIDKeepsTryingAnUnreadableNode: a Node that cannot be read
// is read again until the heartbeat stops; the error is then the stop's,
// not the read's.
func TestLeaseNodeUIDKeepsTryingAnUnreadableNode(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	_, err := leaseNodeUID(ctx, fake.NewClientset(), strings.Repeat("n", 240))
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("leaseNodeUID: %v, want it to end with the context", err)
	}
}
