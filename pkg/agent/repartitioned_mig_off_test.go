package agent

import (
	"testing"

	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// TestNoRepartitionedEventForAGPULeftMIGOff: a GPU whose spec asks for MIG
// mode off, and that stays off pass after pass, is never told of as
// Repartitioned.
func TestNoRepartitionedEventForAGPULeftMIGOff(t *testing.T) {
	g := newRig(t, "1xA100-SXM4-80GB")
	r, _, rec := nodeReconcilerOn(t, g, v1alpha1.GPUSpec{Index: 0, MIGEnabled: false})
	req := ctrl.Request{NamespacedName: types.NamespacedName{Name: "n1"}}
	for range 3 {
		if _, err := r.Reconcile(t.Context(), req); err != nil {
			t.Fatal(err)
		}
	}
	var evs []string
	for len(rec.Events) > 0 {
		evs = append(evs, <-rec.Events)
	}
	if len(evs) != 0 {
		t.Errorf("events %q over passes of a GPU left MIG off, want none", evs)
	}
}
