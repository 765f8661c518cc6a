package controller

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/utils/ptr"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// TestAutoReclaimsIdleGPU: a GPU left with free fragments and nothing in use
// is given back as one 7g.80gb once it has been idle for the policy's
// reclaimIdleGPUsAfterSeconds, counted from the first pass that saw it
// idle: the controller asks to be woken then, though nothing changes; a
// GPU in use is left alone, and 0 turns reclaiming off.
func TestAutoReclaimsIdleGPU(t *testing.T) {
	for name, tc := range map[string]struct {
		seconds  *int32
		wantWake time.Duration
		want     map[int32]string
	}{
		"default, five minutes": {wantWake: 5 * time.Minute, want: map[int32]string{0: "7g.80gb@0"}},
		"one minute":            {seconds: ptr.To[int32](60), wantWake: time.Minute, want: map[int32]string{0: "7g.80gb@0"}},
		"off":                   {seconds: ptr.To[int32](0), want: map[int32]string{}},
	} {
		t.Run(name, func(t *testing.T) {
			ml := autoMigLayout("auto", &v1alpha1.AutoPolicy{ReclaimIdleGPUsAfterSeconds: tc.seconds})
			n1 := autoNML("n1", ml,
				a100(0).layout("1g.10gb@0,2g.20gb@2,3g.40gb@4"),
				a100(1).layout("1g.10gb@0,3g.40gb@4").inUse("1g.10gb@0"))
			h := newAutoCluster(t, ml, node("n1", map[string]string{"pool": "auto"}), n1)
			// The passes before the plan wait out the batching window.
			if wake := h.settle(); wake > tc.wantWake || wake < tc.wantWake-h.a.Max {
				t.Errorf("first plan asks to be woken in %s, want %s less the batching window", wake, tc.wantWake)
			}
			if got := h.specOf("n1"); len(got) != 0 {
				t.Fatalf("spec %v before the GPU has been idle long enough", got)
			}
			h.now = h.now.Add(tc.wantWake + time.Second)
			h.settle()
			if diff := cmp.Diff(tc.want, h.specOf("n1")); diff != "" {
				t.Errorf("spec once idle long enough (-want +got):\n%s", diff)
			}
		})
	}
}
