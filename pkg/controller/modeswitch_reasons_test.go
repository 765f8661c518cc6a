package controller

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// TestSwitchToAutoSaysWhyHeldLayoutsStay: switched to Auto mode, a GPU
// that holds its Static rule's layout keeps it, and its spec says so
// (Auto mode keeps it until pending claims need a change), with the rule's
// reason after it; a change not started is dropped (and says so), and one
// under way keeps its reason.
func TestSwitchToAutoSaysWhyHeldLayoutsStay(t *testing.T) {
	const why = `rule "halves": profiles 3g.40gb:2`
	a := staticMigLayout("a", "uid-a", "a")
	a.Spec.Rules = rules(rule("halves").counts("3g.40gb", 2))
	nml := ownedBy(nodeMigLayout("n1").spec(
		specGPU(0, halvesLayout, why), specGPU(1, halvesLayout, why), specGPU(2, halvesLayout, why)).
		status(a100(0).layout(halvesLayout), a100(1).layout(wholeLayout),
			a100(2).layout(wholeLayout).phase(v1alpha1.PhaseRepartitioning, v1alpha1.ReasonRepartitioning, "")).build(), a)
	nml.Annotations = map[string]string{v1alpha1.AnnotationSpecWrittenBy: string(v1alpha1.ModeStatic)}
	c := fake.NewClientBuilder().WithScheme(testScheme(t)).
		WithObjects(a, node("n1", map[string]string{"pool": "a"}), nml).
		WithStatusSubresource(&v1alpha1.MigLayout{}, &v1alpha1.NodeMigLayout{}).Build()
	r := &Reconciler{Client: c, APIReader: c, Scheme: c.Scheme(), Recorder: events.NewFakeRecorder(100)}

	switchToAuto(t, c)
	reconcileNamed(t, r, "a")

	var got v1alpha1.NodeMigLayout
	if err := c.Get(context.Background(), types.NamespacedName{Name: "n1"}, &got); err != nil {
		t.Fatal(err)
	}
	reasons := map[int32]string{}
	for _, g := range got.Spec.GPUs {
		reasons[g.Index] = g.Reason
	}
	want := map[int32]string{
		0: "Auto mode: kept as the GPU holds it until pending claims need a change (written before as: " + why + ")",
		1: "Auto mode: the change to " + halvesLayout + " was dropped before it started",
		2: why,
	}
	if diff := cmp.Diff(want, reasons); diff != "" {
		t.Errorf("reasons after the switch (-want +got):\n%s", diff)
	}
	if by := got.Annotations[v1alpha1.AnnotationSpecWrittenBy]; by != string(v1alpha1.ModeAuto) {
		t.Errorf("written by %q, want Auto", by)
	}
}
