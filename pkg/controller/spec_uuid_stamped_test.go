package controller

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2/ktesting"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// TestEntriesOfAnEarlierReleaseGetTheirGPU: entries written without a UUID
// (by an earlier release: they apply to whatever GPU is at their index)
// are given the UUID of the GPU there where it holds them, Ready on the
// spec's generation, by MigLayouts that decide no layout afresh (Auto
// mode, a pause): without it the first renumbering of the node's GPUs
// would apply them to another GPU. An entry the GPU does not hold yet (a
// change in flight) waits.
func TestEntriesOfAnEarlierReleaseGetTheirGPU(t *testing.T) {
	for name, ml := range map[string]*v1alpha1.MigLayout{
		"Auto":          autoMigLayout("a", nil),
		"Auto, paused":  func() *v1alpha1.MigLayout { m := autoMigLayout("a", nil); m.Spec.Paused = true; return m }(),
		"Static paused": func() *v1alpha1.MigLayout { m := staticMigLayout("a", "uid-a", "a"); m.Spec.Paused = true; return m }(),
	} {
		t.Run(name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			nml := ownedBy(nodeMigLayout("n1").spec(
				v1alpha1.GPUSpec{Index: 0, MIGEnabled: true, Layout: halvesLayout},
				v1alpha1.GPUSpec{Index: 1, MIGEnabled: true, Layout: wholeLayout},
			).status(
				a100(0).uuid("GPU-0").layout(halvesLayout),
				a100(1).uuid("GPU-1").layout(halvesLayout).phase(v1alpha1.PhaseRepartitioning, v1alpha1.ReasonRepartitioning, "repartitioning"),
			).build(), ml)
			writer := v1alpha1.ModeStatic
			if ml.Spec.Mode == v1alpha1.ModeAuto {
				writer = v1alpha1.ModeAuto
			}
			metav1.SetMetaDataAnnotation(&nml.ObjectMeta, v1alpha1.AnnotationSpecWrittenBy, string(writer))
			c := reconciledOnce(t, ctx, ml, node("n1", map[string]string{"pool": "a"}), nml)
			want := []specEntry{{"GPU-0", halvesLayout}, {"", wholeLayout}}
			if diff := cmp.Diff(want, specEntries(t, ctx, c, "n1")); diff != "" {
				t.Errorf("n1's spec entries (UUID, layout) (-want +got):\n%s", diff)
			}
		})
	}
}
