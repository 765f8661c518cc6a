package controller

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"

	"github.com/miglayout/miglayout/api/v1alpha1"
	"github.com/miglayout/miglayout/pkg/mig"
)

// TestAutoNodesAreThoseWhoseNodeMigLayoutTheMigLayoutControls: an Auto-mode
// MigLayout plans a node it selects only once it controls the node's
// NodeMigLayout: not while another MigLayout (the Static one that selected
// the node before) still controls it, nor while none does. Such a node is
// in its snapshot all the same, Frozen: its changes in flight count toward
// the MigLayout's limits, which it adopts them under.
func TestAutoNodesAreThoseWhoseNodeMigLayoutTheMigLayoutControls(t *testing.T) {
	auto := migLayout("auto").selects("pool", "a").build()
	auto.UID, auto.Spec.Mode = k8stypes.UID("uid-auto"), v1alpha1.ModeAuto
	static := migLayout("static").selects("pool", "b").build()
	static.UID, static.Spec.Mode = k8stypes.UID("uid-static"), v1alpha1.ModeStatic
	status := func(name string) *v1alpha1.NodeMigLayout {
		return nodeMigLayout(name).status(a100(0).layout("7g.80gb@0")).build()
	}
	in := AutoInputs{
		Driver:     "mig.miglayout.io",
		MigLayouts: []v1alpha1.MigLayout{auto, static},
		Nodes: []corev1.Node{
			{ObjectMeta: metav1.ObjectMeta{Name: "mine", Labels: map[string]string{"pool": "a"}}},
			{ObjectMeta: metav1.ObjectMeta{Name: "static-still", Labels: map[string]string{"pool": "a"}}},
			{ObjectMeta: metav1.ObjectMeta{Name: "uncontrolled", Labels: map[string]string{"pool": "a"}}},
		},
		NodeMigLayouts: map[string]*v1alpha1.NodeMigLayout{
			"mine":         ownedBy(status("mine"), &auto),
			"static-still": ownedBy(status("static-still"), &static),
			"uncontrolled": status("uncontrolled"),
		},
	}
	got := map[string]string{}
	for _, n := range BuildSnapshot(in, mig.DefaultCatalog()).Nodes {
		got[n.Node.Name] = n.FrozenReason
	}
	want := map[string]string{
		"mine":         "",
		"static-still": "MigLayout auto has not adopted its NodeMigLayout yet from MigLayout static",
		"uncontrolled": "MigLayout auto has not adopted its NodeMigLayout yet",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Auto nodes and why each is frozen (-want +got):\n%s", diff)
	}
}
