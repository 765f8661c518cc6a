package agent

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/miglayout/miglayout/api/v1alpha1"
	"github.com/miglayout/miglayout/pkg/mig"
	"github.com/miglayout/miglayout/pkg/mig/gpu"
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
		// The pass's in-flight row (patchGPUPhase) keeps idleSince: the
		// GPU holds new devices once it is Ready again.
		"repartitioned": {prev: with(func(s *v1alpha1.GPUStatus) { s.Phase = v1alpha1.PhaseRepartitioning }), gs: idle, want: &now},
	} {
		t.Run(name, func(t *testing.T) {
			got := idleSince(tc.prev, tc.gs, now)
			if (got == nil) != (tc.want == nil) || got != nil && !got.Equal(tc.want) {
				t.Errorf("idleSince = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestBuildStatusIdleSince: BuildStatus sets a GPU's idleSince when a pass
// first finds it idle and keeps it over the passes that follow while it
// stays so; a device in use clears it.
func TestBuildStatusIdleSince(t *testing.T) {
	a100, err := mig.DefaultCatalog().Model("A100-SXM4-80GB")
	if err != nil {
		t.Fatal(err)
	}
	res := func(inUse string) *SyncResult {
		return &SyncResult{
			GPUs:    []GPUState{{GPU: gpu.GPU{Index: 0, UUID: "GPU-a", ProductName: "NVIDIA A100-SXM4-80GB", Model: a100, MIGCapable: true, MIGMode: gpu.MIGMode{Current: true, Pending: true}}}},
			InUse:   map[int]mig.Layout{0: mig.MustParseLayout(inUse)},
			Results: map[int]GPUResult{0: {Phase: v1alpha1.PhaseReady, Reason: v1alpha1.ReasonLayoutApplied}},
		}
	}
	t1 := metav1.NewTime(time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC))
	t2 := metav1.NewTime(t1.Add(time.Minute))
	first := BuildStatus(v1alpha1.NodeMigLayoutStatus{}, 1, res(""), t1)
	second := BuildStatus(first, 1, res(""), t2)
	busy := BuildStatus(second, 1, res("1g.10gb@0"), t2)
	for name, tc := range map[string]struct {
		st   v1alpha1.NodeMigLayoutStatus
		want *metav1.Time
	}{"first idle pass": {first, &t1}, "still idle": {second, &t1}, "in use": {busy, nil}} {
		if got := tc.st.GPUs[0].IdleSince; (got == nil) != (tc.want == nil) || got != nil && !got.Equal(tc.want) {
			t.Errorf("%s: idleSince %v, want %v", name, got, tc.want)
		}
	}
}
