package agent

import (
	"net/http"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// TestReadyzWaitsForFirstPublication: the agent is Ready (its /readyz)
// only once a pass has published the node's pool, so a DaemonSet rollout or
// `helm --wait` stops at an agent that cannot publish.
func TestReadyzWaitsForFirstPublication(t *testing.T) {
	g := newRig(t, "1xA100-SXM4-80GB")
	scheme := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := corev1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	c := fake.NewClientBuilder().WithScheme(scheme).Build()
	var r any = &NodeReconciler{Client: c, NodeName: "n1", Repartitioner: g.r, Recorder: events.NewFakeRecorder(10)}
	ready, ok := r.(interface{ Readyz(*http.Request) error })
	if !ok {
		t.Fatal("NodeReconciler has no readiness check")
	}
	if err := ready.Readyz(nil); err == nil {
		t.Error("Ready before any pass published the pool")
	}
	if _, err := r.(*NodeReconciler).Reconcile(t.Context(), ctrl.Request{NamespacedName: types.NamespacedName{Name: "n1"}}); err != nil {
		t.Fatal(err)
	}
	if len(g.inv.pubs) == 0 {
		t.Fatal("the pass published nothing")
	}
	if err := ready.Readyz(nil); err != nil {
		t.Errorf("not Ready after the pool was published: %v", err)
	}
}
