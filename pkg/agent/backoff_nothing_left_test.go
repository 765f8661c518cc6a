package agent

import (
	"testing"
	"time"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// TestRetryWithNoGPUToRetryBacksOff: a pass asks for a retry though no GPU
// of its result is failing or waiting (a GPU instance left half made on a
// GPU no spec lists that could not be rolled back, on a node without a
// NodeMigLayout): it is retried on the waiting backoff, from about a
// second and growing, not at once over and over.
func TestRetryWithNoGPUToRetryBacksOff(t *testing.T) {
	g := newBackoffRig()
	for _, res := range []*SyncResult{
		{Retry: true},
		{Retry: true, Results: map[int]GPUResult{0: {Phase: v1alpha1.PhaseReady, Reason: v1alpha1.ReasonLayoutApplied}}},
	} {
		var specs []v1alpha1.GPUSpec
		if len(res.Results) > 0 {
			specs = []v1alpha1.GPUSpec{spec(0, "7g.80gb@0")}
		}
		if d := g.r.retryAfter(specs, res, nil); d < 500*time.Millisecond {
			t.Errorf("retry of a pass with results %v after %s, want the waiting backoff's first delay (at least 500ms)", res.Results, d)
		}
	}
	var d time.Duration
	for range 8 {
		d = g.r.retryAfter(nil, &SyncResult{Retry: true}, nil)
	}
	if d < 5*time.Second {
		t.Errorf("the tenth retry alike after %s, want the delay grown past 5s", d)
	}
}
