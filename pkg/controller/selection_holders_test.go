package controller

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// invalidSelector is a node selector that does not parse (a label key with
// a space, which admission cannot check).
var invalidSelector = metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "gpu pool", Operator: metav1.LabelSelectorOpExists}}}

// TestConflictMessageNamesAnInvalidHolder: the Conflict message tells a
// MigLayout that holds nodes because its selector does not parse apart
// from one that selects them too.
func TestConflictMessageNamesAnInvalidHolder(t *testing.T) {
	a := staticMigLayout("a", "uid-a", "a")
	b := staticMigLayout("b", "uid-b", "a")
	b.Spec.NodeSelector = invalidSelector
	c := staticMigLayout("c", "uid-c", "a")
	nodes := map[string]map[string]string{"n1": {"pool": "a"}, "n2": {"pool": "a"}}
	all := []v1alpha1.MigLayout{*a, *b, *c}
	sel, err := SelectNodes(a, all, nodes)
	if err != nil {
		t.Fatal(err)
	}
	nmls := map[string]*v1alpha1.NodeMigLayout{"n1": ownedBy(nodeMigLayout("n1").build(), b)}
	sel = HeldByInvalidSelectors(a, sel, all, nmls)
	want := `MigLayout "b", whose node selector is invalid, holds node n1; MigLayout "c" also selects nodes n1, n2; these nodes are left as they are until one MigLayout selects them (change a node selector or the nodes' labels, or delete one of the MigLayouts)`
	if diff := cmp.Diff(want, sel.ConflictMessage()); diff != "" {
		t.Errorf("conflict message (-want +got):\n%s", diff)
	}
}

// TestHeldByInvalidSelectorsOnlyTheirOwn: a MigLayout whose selector does
// not parse holds only the nodes whose NodeMigLayout it controls, not
// those of this MigLayout or of nobody; applied again, the selection
// stays as it was.
func TestHeldByInvalidSelectorsOnlyTheirOwn(t *testing.T) {
	a := staticMigLayout("a", "uid-a", "a")
	b := staticMigLayout("b", "uid-b", "a")
	b.Spec.NodeSelector = invalidSelector
	all := []v1alpha1.MigLayout{*a, *b}
	nmls := map[string]*v1alpha1.NodeMigLayout{
		"n1": ownedBy(nodeMigLayout("n1").build(), b),
		"n2": ownedBy(nodeMigLayout("n2").build(), a),
		"n3": nodeMigLayout("n3").build(),
	}
	sel := HeldByInvalidSelectors(a, Selection{Nodes: []string{"n1", "n2", "n3", "n4"}}, all, nmls)
	want := Selection{
		Nodes:          []string{"n1", "n2", "n3", "n4"},
		Conflicts:      map[string][]string{"b": {"n1"}},
		InvalidHolders: map[string]bool{"b": true},
	}
	if diff := cmp.Diff(want, sel); diff != "" {
		t.Errorf("selection (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want, HeldByInvalidSelectors(a, sel, all, nmls)); diff != "" {
		t.Errorf("selection applied again (-want +got):\n%s", diff)
	}
}
