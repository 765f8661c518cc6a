package main

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// TestLeaseNodeUID: a node name too long for the Lease name gives the
// Node's UID (waiting for the Node to be readable); a short one needs none.
func TestLeaseNodeUID(t *testing.T) {
	long := strings.Repeat("n", 240)
	kube := fake.NewClientset(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: long, UID: "0b7d3c1e-5a7f-4c1b-9a55-1d0e2f3a4b5c"}})
	uid, err := leaseNodeUID(t.Context(), kube, long)
	if err != nil || uid != "0b7d3c1e-5a7f-4c1b-9a55-1d0e2f3a4b5c" {
		t.Errorf("long name: %q, %v", uid, err)
	}
	if got := v1alpha1.AgentLeaseName(long, uid); got != "miglayout-agent-0b7d3c1e-5a7f-4c1b-9a55-1d0e2f3a4b5c" {
		t.Errorf("Lease name %q", got)
	}
	if uid, err := leaseNodeUID(t.Context(), fake.NewClientset(), "gpu-node-1"); err != nil || uid != "" {
		t.Errorf("short name: %q, %v; want no read", uid, err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	if _, err := leaseNodeUID(ctx, fake.NewClientset(), long); err == nil {
		t.Error("long name of a Node that cannot be read: no error once the context ended")
	}
}
