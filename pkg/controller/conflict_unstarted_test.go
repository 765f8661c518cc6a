package controller

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2/ktesting"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// TestConflictDropsChangeNotStarted: MigLayout a wrote halves to n1's GPU
// 0; then b selects n1 too. Both say n1 is left as it is: a change the
// agent has not started (GPU Ready on its old layout, or Draining: nothing
// destroyed) is dropped from the spec, with the reason why; one it has
// begun (Repartitioning) is carried out, and a's row says so. The change went ahead while both
// MigLayouts said the node was left alone.
func TestConflictDropsChangeNotStarted(t *testing.T) {
	for name, tc := range map[string]struct {
		gpu  *gpuBuilder
		want string
	}{
		"not started":    {gpu: a100(0).layout(wholeLayout).inUse(wholeLayout), want: wholeLayout},
		"draining":       {gpu: a100(0).layout(wholeLayout).phase(v1alpha1.PhaseDraining, v1alpha1.ReasonDraining, "settle period"), want: wholeLayout},
		"repartitioning": {gpu: a100(0).layout(wholeLayout).phase(v1alpha1.PhaseRepartitioning, "", ""), want: halvesLayout},
	} {
		t.Run(name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			a, b := staticMigLayout("a", "uid-a", "a"), staticMigLayout("b", "uid-b", "a")
			b.Spec.Rules = rules(rule("whole").counts("7g.80gb", 1))
			c := fake.NewClientBuilder().WithScheme(testScheme(t)).
				WithObjects(a, b, node("n1", map[string]string{"pool": "a"}),
					ownedBy(nodeMigLayout("n1").spec(specGPU(0, halvesLayout, `rule "halves"`)).status(tc.gpu).build(), a)).
				WithStatusSubresource(&v1alpha1.MigLayout{}, &v1alpha1.NodeMigLayout{}).Build()
			r := &Reconciler{Client: c, Scheme: c.Scheme(), Recorder: events.NewFakeRecorder(100)}
			for _, name := range []string{"a", "b"} {
				if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: types.NamespacedName{Name: name}}); err != nil {
					t.Fatal(err)
				}
			}
			var nml v1alpha1.NodeMigLayout
			if err := c.Get(ctx, types.NamespacedName{Name: "n1"}, &nml); err != nil {
				t.Fatal(err)
			}
			got := nml.Spec.GPUs[0]
			if got.Layout != tc.want {
				t.Errorf("n1's GPU 0 spec %q, want %q", got.Layout, tc.want)
			}
			if tc.want == wholeLayout && !strings.Contains(got.Reason, "another MigLayout selects the node too") {
				t.Errorf("dropped change's reason %q, want it to say why", got.Reason)
			}
			var ml v1alpha1.MigLayout
			if err := c.Get(ctx, types.NamespacedName{Name: "a"}, &ml); err != nil {
				t.Fatal(err)
			}
			say := "left as it is"
			if tc.want == halvesLayout {
				say = "the one begun is carried out"
			}
			if len(ml.Status.Nodes) != 1 || !strings.Contains(ml.Status.Nodes[0].Message, say) {
				t.Errorf("row of n1 %+v, want it to say %q", ml.Status.Nodes, say)
			}
		})
	}
}

// TestConflictCarriesAStopOnADroppedGPU: a's NodeMigLayout of n1 no
// longer lists GPU 1, which its agent is still repartitioning (stopping
// the change where it is); b then selects n1 too. The stop is a change
// begun: a's row of n1 says it is carried out and Progressing names it,
// as where a's selector does not parse.
func TestConflictCarriesAStopOnADroppedGPU(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	a, b := staticMigLayout("a", "uid-a", "a"), staticMigLayout("b", "uid-b", "a")
	nml := ownedBy(nodeMigLayout("n1").spec(specGPU(0, halvesLayout, `rule "halves"`)).
		status(a100(0).layout(halvesLayout), a100(1).layout("3g.40gb@0").phase(v1alpha1.PhaseRepartitioning, v1alpha1.ReasonRepartitioning, "creating 3g.40gb@4")).build(), a)
	c := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(a, b, node("n1", map[string]string{"pool": "a"}), nml).
		WithStatusSubresource(&v1alpha1.MigLayout{}, &v1alpha1.NodeMigLayout{}).Build()
	r := &Reconciler{Client: c, Scheme: c.Scheme(), Recorder: events.NewFakeRecorder(100)}
	if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: types.NamespacedName{Name: "a"}}); err != nil {
		t.Fatal(err)
	}
	var ml v1alpha1.MigLayout
	if err := c.Get(ctx, types.NamespacedName{Name: "a"}, &ml); err != nil {
		t.Fatal(err)
	}
	if len(ml.Status.Nodes) != 1 || !strings.Contains(ml.Status.Nodes[0].Message, "the one begun is carried out") {
		t.Errorf("row of n1 %+v, want it to say the change begun is carried out", ml.Status.Nodes)
	}
	if p := meta.FindStatusCondition(ml.Status.Conditions, v1alpha1.ConditionProgressing); p == nil || p.Status != metav1.ConditionTrue {
		t.Errorf("Progressing %+v, want True", p)
	}
}
