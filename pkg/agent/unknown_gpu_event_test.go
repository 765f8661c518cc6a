package agent

import (
	"context"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/miglayout/miglayout/pkg/mig/gpu"
)

// noMIGManager is a gpu.Manager whose GPUs answer that they offer no MIG
// mode (NOT_SUPPORTED, as a catalogued model may in a virtual machine).
type noMIGManager struct{ gpu.Manager }

func (m noMIGManager) GPUs(ctx context.Context) ([]gpu.GPU, error) {
	gpus, err := m.Manager.GPUs(ctx)
	for i := range gpus {
		gpus[i].MIGCapable = false
	}
	return gpus, err
}

// TestLayoutOnAGPUWithoutMIGIsToldAsInvalidLayout: a spec asking for a
// layout on a GPU that offers no MIG mode (UnknownGPU) is told with an
// InvalidLayout warning, a fault of the spec, not one sending the
// operator to the driver (NVMLError).
func TestLayoutOnAGPUWithoutMIGIsToldAsInvalidLayout(t *testing.T) {
	g := newRig(t, "1xA100-SXM4-80GB")
	g.r.GPUs = noMIGManager{g.r.GPUs}
	r, _, rec := nodeReconcilerOn(t, g, spec(0, "7g.80gb@0"))
	if _, err := r.Reconcile(t.Context(), ctrl.Request{NamespacedName: types.NamespacedName{Name: "n1"}}); err != nil {
		t.Fatal(err)
	}
	var about0 []string
	for len(rec.Events) > 0 {
		if e := <-rec.Events; strings.Contains(e, "GPU 0:") {
			about0 = append(about0, strings.Fields(e)[1])
		}
	}
	if len(about0) != 1 || about0[0] != EventInvalidLayout {
		t.Errorf("events about GPU 0 %q, want one %s", about0, EventInvalidLayout)
	}
}
