package agent

import (
	"strings"
	"testing"

	"github.com/miglayout/miglayout/api/v1alpha1"
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

// TestGPUMissingOverTheStatusRowsToldOnce: a spec naming more GPUs than the
// status lists (edited by hand: indexes 1 to 17 on a one-GPU node) gets a
// GPUMissing warning for each once, also for those the status cannot list,
// not on every pass.
func TestGPUMissingOverTheStatusRowsToldOnce(t *testing.T) {
	g := newRig(t, "1xA100-SXM4-80GB")
	specs := []v1alpha1.GPUSpec{spec(0, "7g.80gb@0")}
	for i := range int32(17) {
		specs = append(specs, spec(i+1, "7g.80gb@0"))
	}
	r, _, rec := nodeReconcilerOn(t, g, specs...)
	told := map[string]int{}
	for range 3 {
		if _, err := r.Reconcile(t.Context(), ctrl.Request{NamespacedName: types.NamespacedName{Name: "n1"}}); err != nil {
			t.Fatal(err)
		}
		for len(rec.Events) > 0 {
			if e := <-rec.Events; strings.Contains(e, EventGPUMissing) {
				told[strings.SplitN(e, ":", 2)[0]]++
			}
		}
	}
	if len(told) != 17 {
		t.Errorf("GPUMissing told of %d GPUs, want 17: %v", len(told), told)
	}
	for gpu, n := range told {
		if n != 1 {
			t.Errorf("%s: GPUMissing told %d times in 3 passes, want once", gpu, n)
		}
	}
}
