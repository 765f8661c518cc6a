package controller

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"

	"github.com/miglayout/miglayout/api/v1alpha1"
	"github.com/miglayout/miglayout/pkg/mig"
)

// TestChangeToWholeForAPodIsNoReclaim: a change in flight to one whole
// 7g.80gb is a reclaim (an idle GPU given back, planned on its actual
// layout) only when it serves no pod; one made for a pod, even a single
// one, is a change like any other: its coming layout, serving its pods.
func TestChangeToWholeForAPodIsNoReclaim(t *testing.T) {
	type gpuRow struct {
		Layout               string
		Changing, Reclaiming bool
		Serves               []string
	}
	for name, tc := range map[string]struct {
		served []string
		want   gpuRow
	}{
		"no pod":   {want: gpuRow{Layout: "3g.40gb@0,3g.40gb@4", Reclaiming: true}},
		"one pod":  {served: []string{"ns/p1"}, want: gpuRow{Layout: "7g.80gb@0", Changing: true, Serves: []string{"ns/p1"}}},
		"two pods": {served: []string{"ns/p1", "ns/p2"}, want: gpuRow{Layout: "7g.80gb@0", Changing: true, Serves: []string{"ns/p1", "ns/p2"}}},
	} {
		t.Run(name, func(t *testing.T) {
			ml := autoMigLayout("auto", nil)
			nml := autoNML("n1", ml, a100(0).layout("3g.40gb@0,3g.40gb@4"))
			nml.Spec.GPUs = []v1alpha1.GPUSpec{{Index: 0, MIGEnabled: true, Layout: "7g.80gb@0", ServedPods: tc.served}}
			in := AutoInputs{MigLayouts: []v1alpha1.MigLayout{*ml}, Nodes: []corev1.Node{*node("n1", map[string]string{"pool": "auto"})},
				NodeMigLayouts: map[string]*v1alpha1.NodeMigLayout{"n1": nml}, Driver: "mig.miglayout.io"}
			snap := BuildSnapshot(in, mig.DefaultCatalog())
			if len(snap.Nodes) != 1 || len(snap.Nodes[0].GPUs) != 1 {
				t.Fatalf("snapshot nodes %v, want n1 with one GPU", snap.Nodes)
			}
			g := snap.Nodes[0].GPUs[0]
			got := gpuRow{Layout: g.Layout.String(), Changing: g.Changing, Reclaiming: g.Reclaiming, Serves: g.Serves}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("n1/gpu-0 (-want +got):\n%s", diff)
			}
		})
	}
}

// TestPodNamedByTwoUndestroyedChangesKeptByTheFirst: two nodes' changes in
// flight name the same pod and neither has destroyed anything yet: the
// first node's (by name) keeps the pod, the others serve nobody (which
// lets UnneededChanges cancel them).
func TestPodNamedByTwoUndestroyedChangesKeptByTheFirst(t *testing.T) {
	ml := autoMigLayout("auto", nil)
	in := AutoInputs{MigLayouts: []v1alpha1.MigLayout{*ml}, NodeMigLayouts: map[string]*v1alpha1.NodeMigLayout{}, Driver: "mig.miglayout.io"}
	for _, name := range []string{"n2", "n1", "n3"} {
		nml := autoNML(name, ml, a100(0).layout("7g.80gb@0"))
		nml.Spec.GPUs = []v1alpha1.GPUSpec{{Index: 0, MIGEnabled: true, Layout: "3g.40gb@0,3g.40gb@4", ServedPods: []string{"ns/p1"}}}
		in.NodeMigLayouts[name] = nml
		in.Nodes = append(in.Nodes, *node(name, map[string]string{"pool": "auto"}))
	}
	got := map[string][]string{}
	for _, n := range BuildSnapshot(in, mig.DefaultCatalog()).Nodes {
		got[n.Node.Name] = n.GPUs[0].Serves
	}
	want := map[string][]string{"n1": {"ns/p1"}, "n2": {}, "n3": {}}
	if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("pods served by each node's change (-want +got):\n%s", diff)
	}
}

// TestNodeWithoutPlannableGPUIsNoAutoNode: a node of an Auto MigLayout
// whose GPUs Auto mode cannot plan (MIG off, an unknown model) is left out
// of the snapshot: it is no Auto node for the pods, nor is its room.
func TestNodeWithoutPlannableGPUIsNoAutoNode(t *testing.T) {
	ml := autoMigLayout("auto", nil)
	in := AutoInputs{MigLayouts: []v1alpha1.MigLayout{*ml},
		Nodes: []corev1.Node{*node("n1", map[string]string{"pool": "auto"}), *node("n2", map[string]string{"pool": "auto"})},
		NodeMigLayouts: map[string]*v1alpha1.NodeMigLayout{
			"n1": autoNML("n1", ml, a100(0).migOff(), unknownGPU(1)),
			"n2": autoNML("n2", ml, a100(0).layout("7g.80gb@0")),
		}, Driver: "mig.miglayout.io"}
	var got []string
	for _, n := range BuildSnapshot(in, mig.DefaultCatalog()).Nodes {
		got = append(got, n.Node.Name)
	}
	if diff := cmp.Diff([]string{"n2"}, got); diff != "" {
		t.Errorf("snapshot nodes (-want +got):\n%s", diff)
	}
}
