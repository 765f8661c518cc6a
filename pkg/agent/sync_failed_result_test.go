package agent

import (
	"errors"
	"testing"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// TestSyncFailingWithoutChangesReturnsNoResult: a pass that changes no GPU
// and fails at its republication returns its error with a nil result, as
// Sync documents (a result comes with an error only where GPUs were
// changed).
func TestSyncFailingWithoutChangesReturnsNoResult(t *testing.T) {
	g := newRig(t, "1xA100-SXM4-80GB")
	g.setup(t, 0, "7g.80gb@0")
	g.inv.failRepublish = errors.New("the API server is unavailable")
	res, err := g.r.Sync(t.Context(), []v1alpha1.GPUSpec{spec(0, "7g.80gb@0")}, nil)
	if err == nil {
		t.Fatal("the pass succeeded, though its republication failed")
	}
	if res != nil {
		t.Errorf("result %+v with the error %v, want nil: no GPU was changed", res, err)
	}
}
