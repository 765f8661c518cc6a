package agent

import (
	"testing"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// TestGPUMissingIsNotRetried: a GPU the spec names but NVML does not count
// (GPUMissing) failed on its input, as an invalid layout or an unknown
// model: only a new spec changes it, so it is neither failing nor waiting,
// and a pass that left nothing else to retry does not back off for it.
func TestGPUMissingIsNotRetried(t *testing.T) {
	missing := GPUResult{Phase: v1alpha1.PhaseFailed, Reason: v1alpha1.ReasonGPUMissing}
	if !onInput(missing) {
		t.Errorf("onInput(%+v) = false, want true", missing)
	}
	res := passResult(map[int][2]string{
		0: {string(v1alpha1.PhaseReady), v1alpha1.ReasonLayoutApplied},
		5: {string(v1alpha1.PhaseFailed), v1alpha1.ReasonGPUMissing},
	})
	if f, w := outcomes(res); f != "" || w != "" {
		t.Errorf("outcomes of a pass with GPU 5 missing = (failing %q, waiting %q), want both empty", f, w)
	}
}
