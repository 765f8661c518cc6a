package agent

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
)

// TestGPUMissingIsToldAsGPUMissing: a spec naming a GPU the node lacks (a
// wrong index, or a GPU NVML no longer counts) gets a GPUMissing warning,
// not one sending the operator to the driver (NVMLError).
func TestGPUMissingIsToldAsGPUMissing(t *testing.T) {
	g := newRig(t, "1xA100-SXM4-80GB")
	r, _, rec := nodeReconcilerOn(t, g, spec(0, "7g.80gb@0"), spec(1, "7g.80gb@0"))
	if _, err := r.Reconcile(t.Context(), ctrl.Request{NamespacedName: types.NamespacedName{Name: "n1"}}); err != nil {
		t.Fatal(err)
	}
	var about1 []string
	for len(rec.Events) > 0 {
		if e := <-rec.Events; strings.Contains(e, "GPU 1:") {
			about1 = append(about1, strings.Fields(e)[1])
		}
	}
	if len(about1) != 1 || about1[0] != EventGPUMissing {
		t.Errorf("events about GPU 1 %q, want one %s", about1, EventGPUMissing)
	}
}
