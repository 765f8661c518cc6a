package agent

import (
	"errors"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// TestUnmanagedNodeFailedPassResetsTheBackoff: on a node without
// NodeMigLayout, passes that leave an unreadable GPU to retry back off
// further each time; a pass that fails as a whole (its publication
// refused) starts the backoff again, so the retry after it comes within
// about a second, not after the grown delay.
func TestUnmanagedNodeFailedPassResetsTheBackoff(t *testing.T) {
	g := newRig(t, "1xA100-SXM4-80GB")
	r, c, _ := nodeReconcilerOn(t, g)
	if err := c.Delete(t.Context(), &v1alpha1.NodeMigLayout{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}); err != nil {
		t.Fatal(err)
	}
	if err := g.sim.LoseGPU(0); err != nil {
		t.Fatal(err)
	}
	req := ctrl.Request{NamespacedName: types.NamespacedName{Name: "n1"}}
	var res ctrl.Result
	for range 10 {
		var err error
		if res, err = r.Reconcile(t.Context(), req); err != nil {
			t.Fatal(err)
		}
	}
	if res.RequeueAfter < 5*time.Second {
		t.Fatalf("after 10 passes with GPU 0 unreadable the retry comes after %s, want the backoff grown past 5s", res.RequeueAfter)
	}
	g.inv.failRepublish = errors.New("the API server is unavailable")
	if _, err := r.Reconcile(t.Context(), req); err == nil {
		t.Fatal("the pass succeeded, though its publication failed")
	}
	g.inv.failRepublish = nil
	res, err := r.Reconcile(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	if res.RequeueAfter <= 0 || res.RequeueAfter > 1500*time.Millisecond {
		t.Errorf("retry after a pass that failed as a whole: after %s, want the backoff started again (at most 1.5s)", res.RequeueAfter)
	}
}
