package agent

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// TestInFlightRowTransitionTime: a GPU shown in flight gets a row with its
// lastTransitionTime where the status had none; showing the same phase
// again keeps the time, and a new phase moves it.
func TestInFlightRowTransitionTime(t *testing.T) {
	g := newRig(t, "1xA100-SXM4-80GB")
	r, c, _ := nodeReconcilerOn(t, g, spec(0, "7g.80gb@0"))
	key := types.NamespacedName{Name: "n1"}
	row := func() v1alpha1.GPUStatus {
		t.Helper()
		var nml v1alpha1.NodeMigLayout
		if err := c.Get(t.Context(), key, &nml); err != nil {
			t.Fatal(err)
		}
		if len(nml.Status.GPUs) != 1 {
			t.Fatalf("status rows %+v, want GPU 0's", nml.Status.GPUs)
		}
		return nml.Status.GPUs[0]
	}
	show := func(phase v1alpha1.GPUPhase) {
		t.Helper()
		if err := r.patchGPUPhase(t.Context(), actedOn{generation: 1}, 0, GPUResult{Phase: phase, Reason: string(phase)}); err != nil {
			t.Fatal(err)
		}
	}
	show(v1alpha1.PhaseDraining)
	if got := row(); got.LastTransitionTime == nil {
		t.Fatalf("new row %+v has no lastTransitionTime", got)
	}
	// The row has been Draining for a while.
	long := metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	var nml v1alpha1.NodeMigLayout
	if err := c.Get(t.Context(), key, &nml); err != nil {
		t.Fatal(err)
	}
	nml.Status.GPUs[0].LastTransitionTime = &long
	if err := c.Status().Update(t.Context(), &nml); err != nil {
		t.Fatal(err)
	}
	show(v1alpha1.PhaseDraining)
	if got := row().LastTransitionTime; got == nil || !got.Equal(&long) {
		t.Errorf("Draining shown again: lastTransitionTime %v, want %v kept", got, long)
	}
	show(v1alpha1.PhaseRepartitioning)
	if got := row().LastTransitionTime; got == nil || got.Equal(&long) {
		t.Errorf("Repartitioning after Draining: lastTransitionTime %v, want it moved from %v", got, long)
	}
}
