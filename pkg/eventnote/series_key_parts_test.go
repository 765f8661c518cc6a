package eventnote

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Events that differ only in their action (one per GPU) are separate
// series, even with the same note: the second is not recorded under the
// first one's action, which would fold it into the other GPU's series.
func TestDistinctKeepsActionsApart(t *testing.T) {
	c := &capture{}
	d := Distinct(c)
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a", UID: "u"}}
	d.Eventf(node, nil, "Normal", "Repartitioned", "RepartitionGPU0", "%s", "layout applied")
	d.Eventf(node, nil, "Normal", "Repartitioned", "RepartitionGPU1", "%s", "layout applied")
	want := []string{Action("RepartitionGPU0", "layout applied"), Action("RepartitionGPU1", "layout applied")}
	if diff := cmp.Diff(want, c.actions); diff != "" {
		t.Errorf("actions (-want +got):\n%s", diff)
	}
}

// Object references without a UID (made by hand) that differ only in kind
// and API version, such as a Node and a cluster-scoped custom resource
// named after it, are separate series.
func TestDistinctKeepsReferenceKindsApart(t *testing.T) {
	c := &capture{}
	d := Distinct(c)
	refs := []*corev1.ObjectReference{
		{APIVersion: "v1", Kind: "Node", Name: "node-a"},
		{APIVersion: "miglayout.io/v1alpha1", Kind: "NodeLayout", Name: "node-a"},
	}
	for i, ref := range refs {
		d.Eventf(ref, nil, "Normal", "Waiting", "Plan", "%s", []string{"A", "B"}[i])
	}
	if diff := cmp.Diff([]string{Action("Plan", "A"), Action("Plan", "B")}, c.actions); diff != "" {
		t.Errorf("actions (-want +got):\n%s", diff)
	}
}

// Objects without a UID (built in memory) in different namespaces are
// different series keys even when their names match.
func TestDistinctKeepsNamespacesApart(t *testing.T) {
	c := &capture{}
	d := Distinct(c)
	for i, ns := range []string{"ns1", "ns2"} {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "p"}}
		d.Eventf(p, nil, "Normal", "Waiting", "Plan", "%s", []string{"A", "B"}[i])
	}
	if diff := cmp.Diff([]string{Action("Plan", "A"), Action("Plan", "B")}, c.actions); diff != "" {
		t.Errorf("actions (-want +got):\n%s", diff)
	}
}
