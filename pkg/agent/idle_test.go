package agent

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// TestIdleSince: a GPU's idleSince is set when the agent first sees it in
// MIG mode, Ready, nothing in use, and kept while it stays so; a device in
// use, a change in flight, MIG mode off or pending, or another GPU (UUID)
// at the index clears or restarts it.
func TestIdleSince(t *testing.T) {
	t0 := metav1.NewTime(time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC))
	now := metav1.NewTime(t0.Add(time.Hour))
	idle := v1alpha1.GPUStatus{Index: 0, UUID: "GPU-a", MIGEnabled: true, MIGPending: true, Phase: v1alpha1.PhaseReady, IdleSince: &t0}
	with := func(f func(*v1alpha1.GPUStatus)) v1alpha1.GPUStatus {
		s := idle
		f(&s)
		return s
	}
	for name, tc := range map[string]struct {
		prev, gs v1alpha1.GPUStatus
		want     *metav1.Time
	}{
		"stays idle":             {prev: idle, gs: idle, want: &t0},
		"becomes idle":           {prev: with(func(s *v1alpha1.GPUStatus) { s.InUse, s.IdleSince = "1g.10gb@0", nil }), gs: idle, want: &now},
		"first seen":             {prev: v1alpha1.GPUStatus{}, gs: idle, want: &now},
		"a device in use":        {prev: idle, gs: with(func(s *v1alpha1.GPUStatus) { s.InUse = "1g.10gb@0" })},
		"draining":               {prev: idle, gs: with(func(s *v1alpha1.GPUStatus) { s.Phase = v1alpha1.PhaseDraining })},
		"MIG mode going off":     {prev: idle, gs: with(func(s *v1alpha1.GPUStatus) { s.MIGPending = false })},
		"MIG mode off":           {prev: idle, gs: with(func(s *v1alpha1.GPUStatus) { s.MIGEnabled, s.MIGPending = false, false })},
		"another GPU at index 0": {prev: idle, gs: with(func(s *v1alpha1.GPUStatus) { s.UUID = "GPU-b" }), want: &now},
	} {
		t.Run(name, func(t *testing.T) {
			got := idleSince(tc.prev, tc.gs, now)
			if (got == nil) != (tc.want == nil) || got != nil && !got.Equal(tc.want) {
				t.Errorf("idleSince = %v, want %v", got, tc.want)
			}
		})
	}
}
