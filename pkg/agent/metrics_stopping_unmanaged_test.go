package agent

import (
	"context"
	"errors"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// TestFailedPassesMetricOfANodeWithoutNodeMigLayout: on a node no
// MigLayout manages, a pass whose publication fails is counted in
// miglayout_agent_failed_passes_total, but not one that fails because the
// agent is stopping.
func TestFailedPassesMetricOfANodeWithoutNodeMigLayout(t *testing.T) {
	g, _ := metricsRig(t, "1xA100-SXM4-80GB")
	rec, c, _ := nodeReconcilerOn(t, g)
	req := ctrl.Request{NamespacedName: types.NamespacedName{Name: "n1"}}
	nml := &v1alpha1.NodeMigLayout{}
	if err := c.Get(t.Context(), req.NamespacedName, nml); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(t.Context(), nml); err != nil {
		t.Fatal(err)
	}
	g.inv.failRepublish = errors.New("the API server is unavailable")
	stopping, stop := context.WithCancel(t.Context())
	stop()
	if _, err := rec.Reconcile(stopping, req); err == nil {
		t.Fatal("the pass succeeded, though its publication failed")
	}
	if got := testutil.ToFloat64(g.r.Metrics.failedPasses); got != 0 {
		t.Errorf("miglayout_agent_failed_passes_total = %v after a pass failed while the agent stops, want 0", got)
	}
	if _, err := rec.Reconcile(t.Context(), req); err == nil {
		t.Fatal("the pass succeeded, though its publication failed")
	}
	if got := testutil.ToFloat64(g.r.Metrics.failedPasses); got != 1 {
		t.Errorf("miglayout_agent_failed_passes_total = %v after a pass whose publication failed, want 1", got)
	}
}
