package agent

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// TestDeferralEndsWithItsNodeMigLayoutUnseen: a NodeMigLayout deleted and
// made again (another UID) between two passes, with no pass seeing it
// gone, starts with no GPU deferred: the new object's GPU 0 is tried at
// once, not left Failed until the old object's retry is due.
func TestDeferralEndsWithItsNodeMigLayoutUnseen(t *testing.T) {
	f := newFailedChange(t)
	old := f.nml(t)
	if err := f.c.Delete(t.Context(), &old); err != nil {
		t.Fatal(err)
	}
	fresh := &v1alpha1.NodeMigLayout{ObjectMeta: metav1.ObjectMeta{Name: "n1", Generation: 1, UID: types.UID(string(old.UID) + "-again")},
		Spec: v1alpha1.NodeMigLayoutSpec{GPUs: []v1alpha1.GPUSpec{spec(0, "7g.80gb@0")}}}
	if err := f.c.Create(t.Context(), fresh); err != nil {
		t.Fatal(err)
	}
	if got := f.nml(t).UID; got == old.UID {
		t.Fatalf("the NodeMigLayout made again has the old UID %q, want another", got)
	}
	f.clock = f.clock.Add(f.retry / 2)
	f.reconcile(t)
	if st := f.nml(t).Status.GPUs[0]; st.Phase != v1alpha1.PhaseReady {
		t.Errorf("the new NodeMigLayout's GPU 0 %s/%s (%q), want it tried and Ready", st.Phase, st.Reason, st.Message)
	}
}
