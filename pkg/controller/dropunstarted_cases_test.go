package controller

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// dropUnstarted sets a change the agent has not started back to the GPU's
// actual layout, MIG mode included, and says what was dropped ("MIG off",
// "no device", or the layout); a GPU the agent has not reported, or whose
// MIG mode change waits for a reset, keeps its spec.
func TestDropUnstartedSetsBackToTheActualLayout(t *testing.T) {
	const why = "Auto mode"
	dropped := func(what string) string { return why + ": the change to " + what + " was dropped before it started" }
	sevenths := "1g.10gb@0,1g.10gb@1,1g.10gb@2,1g.10gb@3,1g.10gb@4,1g.10gb@5,1g.10gb@6"
	for name, tc := range map[string]struct {
		spec   v1alpha1.GPUSpec
		status *gpuBuilder
		want   v1alpha1.GPUSpec
	}{
		"a layout change not started": {
			spec: specGPU(0, wholeLayout, "rule"), status: a100(0).layout(halvesLayout),
			want: v1alpha1.GPUSpec{Index: 0, MIGEnabled: true, Layout: halvesLayout, Reason: dropped(wholeLayout)},
		},
		"a long layout's reason is not cut short": {
			spec: specGPU(0, sevenths, "rule"), status: a100(0).layout(halvesLayout),
			want: v1alpha1.GPUSpec{Index: 0, MIGEnabled: true, Layout: halvesLayout, Reason: dropped(sevenths)},
		},
		"MIG off not started, on a GPU with MIG on": {
			spec: specMIGOff(0, "rule"), status: a100(0).layout(halvesLayout),
			want: v1alpha1.GPUSpec{Index: 0, MIGEnabled: true, Layout: halvesLayout, Reason: dropped("MIG off")},
		},
		"MIG off not started, on a GPU with MIG on and no device": {
			spec: specMIGOff(0, "rule"), status: a100(0),
			want: v1alpha1.GPUSpec{Index: 0, MIGEnabled: true, Reason: dropped("MIG off")},
		},
		"no device not started, on a GPU with MIG off": {
			spec: specGPU(0, "", "rule"), status: a100(0).migOff(),
			want: v1alpha1.GPUSpec{Index: 0, Reason: dropped("no device")},
		},
		"a MIG mode change waiting for a reset": {
			spec: specGPU(0, wholeLayout, "rule"), status: func() *gpuBuilder { g := a100(0).migOff(); g.g.MIGPending = true; return g }(),
			want: specGPU(0, wholeLayout, "rule"),
		},
		"a GPU not reported": {
			spec: specGPU(0, wholeLayout, "rule"), status: a100(1).layout(halvesLayout),
			want: specGPU(0, wholeLayout, "rule"),
		},
		"a change under way": {
			spec: specGPU(0, wholeLayout, "rule"), status: a100(0).layout(halvesLayout).phase(v1alpha1.PhaseRepartitioning, "", ""),
			want: specGPU(0, wholeLayout, "rule"),
		},
	} {
		t.Run(name, func(t *testing.T) {
			nml := nodeMigLayout("n1").spec(tc.spec).status(tc.status).build()
			got := dropUnstarted(nml, why)
			if diff := cmp.Diff([]v1alpha1.GPUSpec{tc.want}, got); diff != "" {
				t.Errorf("spec (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff([]v1alpha1.GPUSpec{tc.spec}, nml.Spec.GPUs); diff != "" {
				t.Errorf("the object's spec was changed (-want +got):\n%s", diff)
			}
		})
	}
}

// A write the API server refuses (admission, RBAC, validation, size,
// method) is told apart from one a retry may get through.
func TestWriteRefusedTellsRefusalsFromPassingFailures(t *testing.T) {
	gr := schema.GroupResource{Group: v1alpha1.GroupVersion.Group, Resource: "nodemiglayouts"}
	for name, tc := range map[string]struct {
		err  error
		want bool
	}{
		"forbidden":          {err: apierrors.NewForbidden(gr, "n1", nil), want: true},
		"invalid":            {err: apierrors.NewInvalid(schema.GroupKind{Group: gr.Group, Kind: "NodeMigLayout"}, "n1", nil), want: true},
		"bad request":        {err: apierrors.NewBadRequest("bad"), want: true},
		"unauthorized":       {err: apierrors.NewUnauthorized("who"), want: true},
		"too large":          {err: apierrors.NewRequestEntityTooLargeError("too large"), want: true},
		"method not allowed": {err: apierrors.NewMethodNotSupported(gr, "patch"), want: true},
		"conflict":           {err: apierrors.NewConflict(gr, "n1", nil)},
		"timeout":            {err: apierrors.NewTimeoutError("slow", 1)},
		"unavailable":        {err: apierrors.NewServiceUnavailable("down")},
	} {
		t.Run(name, func(t *testing.T) {
			if got := writeRefused(tc.err); got != tc.want {
				t.Errorf("writeRefused(%v) = %v, want %v", tc.err, got, tc.want)
			}
		})
	}
}
