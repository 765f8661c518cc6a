package agent

import (
	"context"
	"strings"
	"testing"

	"github.com/miglayout/miglayout/api/v1alpha1"
	"github.com/miglayout/miglayout/pkg/mig"
)

// TestSpecForAnotherGPUIsNotApplied: a node of an A100 (index 0) and two
// H100s, each spec entry written for the GPU at its index (GPUSpec.UUID).
// After a reboot that destroyed every GPU instance, the A100 is not found
// and NVML numbers the H100s 0 and 1. The entries written for the A100 and
// the first H100 are not applied to the H100s now at their indexes (the
// A100's 7g.80gb@0 would be made on an H100): those GPUs are Blocked with
// reason SpecForAnotherGPU and keep no change. An entry for the GPU at its
// index is applied, and so is one for another GPU that asks for what the
// GPU holds already (nothing to change).
func TestSpecForAnotherGPUIsNotApplied(t *testing.T) {
	ctx := context.Background()
	g := newRig(t, "1xA100-SXM4-80GB,2xH100-SXM5-80GB")
	before, err := g.mgr.GPUs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	const h = "1g.10gb@0,1g.10gb@1,1g.10gb@2,1g.10gb@3,1g.10gb@4,1g.10gb@5,1g.10gb@6"
	specs := []v1alpha1.GPUSpec{spec(0, "7g.80gb@0"), spec(1, h), spec(2, h)}
	for i := range specs {
		specs[i].UUID = before[i].UUID
	}
	if _, err := g.r.Sync(ctx, specs, nil); err != nil {
		t.Fatal(err)
	}
	for i := range 3 { // the reboot destroys every GPU instance
		devs, _ := g.mgr.MIGDevices(ctx, i)
		for _, d := range devs {
			if err := g.mgr.DestroyMIGDevice(ctx, i, d.Device()); err != nil {
				t.Fatal(err)
			}
		}
	}
	g.withoutGPU(t, 0)
	after, err := g.mgr.GPUs(ctx)
	if err != nil || len(after) != 2 || after[0].UUID != before[1].UUID {
		t.Fatalf("renumbered GPUs %+v, %v; want the two H100s at 0 and 1", after, err)
	}
	layout := func(idx int) string {
		devs, err := g.mgr.MIGDevices(ctx, idx)
		if err != nil {
			t.Fatal(err)
		}
		var l mig.Layout
		for _, d := range devs {
			l = append(l, d.Device())
		}
		return l.Canonical().String()
	}
	// In order: the last case needs the one before it.
	for _, tc := range []struct {
		name       string
		spec       v1alpha1.GPUSpec
		wantReason string
		wantLayout string
		// wantWhere is a part of the message: where the GPU the entry was
		// written for is.
		wantWhere string
	}{
		{"the A100's entry on the first H100", specs[0], v1alpha1.ReasonSpecForAnotherGPU, "", "no GPU of this node has that UUID"},
		{"the first H100's on the second", withIndex(specs[1], 1), v1alpha1.ReasonSpecForAnotherGPU, "", "NVML shows that GPU at index 0"},
		{"an entry for the GPU at its index", withUUID(spec(0, "3g.40gb@0"), after[0].UUID), v1alpha1.ReasonLayoutApplied, "3g.40gb@0", ""},
		{"another GPU's, held already", withUUID(spec(0, "3g.40gb@0"), before[0].UUID), v1alpha1.ReasonLayoutApplied, "3g.40gb@0", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := g.r.Sync(ctx, []v1alpha1.GPUSpec{tc.spec}, nil)
			if err != nil {
				t.Fatal(err)
			}
			idx := int(tc.spec.Index)
			if got := res.Results[idx]; got.Reason != tc.wantReason || !strings.Contains(got.Message, tc.wantWhere) {
				t.Errorf("gpu %d: %s %s (%s), want reason %s saying %q", idx, got.Phase, got.Reason, got.Message, tc.wantReason, tc.wantWhere)
			}
			if got := layout(idx); got != tc.wantLayout {
				t.Errorf("gpu %d holds %q, want %q", idx, got, tc.wantLayout)
			}
		})
	}
}

func withIndex(s v1alpha1.GPUSpec, idx int32) v1alpha1.GPUSpec { s.Index = idx; return s }

func withUUID(s v1alpha1.GPUSpec, uuid string) v1alpha1.GPUSpec { s.UUID = uuid; return s }
