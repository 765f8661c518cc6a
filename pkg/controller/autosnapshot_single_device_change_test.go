package controller

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/miglayout/miglayout/api/v1alpha1"
	"github.com/miglayout/miglayout/pkg/mig"
)

// TestChangeToOneSmallerDeviceIsNoReclaim: a change in flight for no pod
// to a layout of one device is a reclaim (the idle GPU given back,
// planned on its actual layout) only when that device is the whole GPU;
// a change to one smaller device (a spare) is a change like any other:
// Changing, on its coming layout.
func TestChangeToOneSmallerDeviceIsNoReclaim(t *testing.T) {
	type gpuRow struct {
		Layout               string
		Changing, Reclaiming bool
	}
	for desired, want := range map[string]gpuRow{
		"7g.80gb@0": {Layout: "3g.40gb@0,3g.40gb@4", Reclaiming: true},
		"4g.40gb@0": {Layout: "4g.40gb@0", Changing: true},
	} {
		t.Run(desired, func(t *testing.T) {
			ml := autoMigLayout("auto", nil)
			nml := autoNML("n1", ml, a100(0).layout("3g.40gb@0,3g.40gb@4"))
			nml.Spec.GPUs = []v1alpha1.GPUSpec{{Index: 0, MIGEnabled: true, Layout: desired}}
			in := AutoInputs{MigLayouts: []v1alpha1.MigLayout{*ml}, Nodes: []corev1.Node{*node("n1", map[string]string{"pool": "auto"})},
				NodeMigLayouts: map[string]*v1alpha1.NodeMigLayout{"n1": nml}, Driver: "mig.miglayout.io"}
			snap := BuildSnapshot(in, mig.DefaultCatalog())
			if len(snap.Nodes) != 1 || len(snap.Nodes[0].GPUs) != 1 {
				t.Fatalf("snapshot nodes %v, want n1 with one GPU", snap.Nodes)
			}
			g := snap.Nodes[0].GPUs[0]
			got := gpuRow{Layout: g.Layout.String(), Changing: g.Changing, Reclaiming: g.Reclaiming}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("n1/gpu-0 (-want +got):\n%s", diff)
			}
		})
	}
}
