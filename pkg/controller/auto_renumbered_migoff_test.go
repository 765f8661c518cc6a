package controller

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2/ktesting"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// TestAutoReconcileFreesRenumberedMIGOffGPU: an Auto plan's entry (MIG on)
// written for a GPU NVML no longer numbers at its index, where the GPU
// there has MIG off and is Blocked under it: the Auto planner leaves it
// (it never turns MIG on, so it plans no cancel), and one reconcile of the
// MigLayout writes the entry MIG off, for the GPU there. Working out the
// entry changes nothing in the NodeMigLayout it reads.
func TestAutoReconcileFreesRenumberedMIGOffGPU(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ml := autoMigLayout("a", nil)
	nml := ownedBy(nodeMigLayout("n1").spec(withSpecUUID(specGPU(0, halvesLayout, "serves ns/p1"), "GPU-old")).status(
		a100(0).uuid("GPU-new").migOff().phase(v1alpha1.PhaseBlocked, v1alpha1.ReasonSpecForAnotherGPU, "written for GPU-old"),
	).build(), ml)
	metav1.SetMetaDataAnnotation(&nml.ObjectMeta, v1alpha1.AnnotationSpecWrittenBy, string(v1alpha1.ModeAuto))

	if x, ok := cancelOf(nml, 0); ok {
		t.Errorf("the Auto planner cancels GPU 0's entry to %s: it would turn MIG on", x.To.String())
	}
	before := nml.DeepCopy()
	_ = asItIsForRenumbered(nml, nml.Spec.GPUs)
	if !equality.Semantic.DeepEqual(before.Spec, nml.Spec) {
		t.Errorf("asItIsForRenumbered changed the spec it read:\n%s", cmp.Diff(before.Spec, nml.Spec))
	}

	c := reconciledOnce(t, ctx, ml, node("n1", map[string]string{"pool": "a"}), nml)
	var got v1alpha1.NodeMigLayout
	if err := c.Get(ctx, types.NamespacedName{Name: "n1"}, &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Spec.GPUs) != 1 || got.Spec.GPUs[0].UUID != "GPU-new" || got.Spec.GPUs[0].MIGEnabled {
		t.Errorf("n1's spec %+v, want GPU 0 MIG off for GPU-new", got.Spec.GPUs)
	}
}
