package agent

import (
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// TestRetryOfHalfMadeGPUToMIGOffStaysBlocked: a GPU whose change to MIG
// off stopped part way (another client holds a device) is Blocked; its
// retries after an edit of the spec that keeps MIG off (a new reason)
// show no Draining: the agent remembers the spec it left the GPU Blocked
// on (the journal, which names a layout, cannot tell MIG off apart); a
// restarted agent, which remembers nothing, takes the row for the outcome
// of the spec its status observed.
func TestRetryOfHalfMadeGPUToMIGOffStaysBlocked(t *testing.T) {
	h := newHalfMade(t, v1alpha1.GPUSpec{Index: 0, MIGEnabled: false})
	var cur v1alpha1.NodeMigLayout
	if err := h.c.Get(t.Context(), client.ObjectKey{Name: "n1"}, &cur); err != nil {
		t.Fatal(err)
	}
	if row := cur.Status.GPUs[0]; row.Phase != v1alpha1.PhaseBlocked {
		t.Fatalf("premise: GPU 0 %s %s, want Blocked", row.Phase, row.Reason)
	}
	h.newReason(t, `rule "off", edited`)
	h.retries(t, "retries after a new reason")
	h.restart()
	h.retries(t, "a restarted agent's retries")
}
