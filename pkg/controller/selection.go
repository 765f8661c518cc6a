package controller

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// Selection is the set of nodes one MigLayout selects.
type Selection struct {
	// Nodes are all the selected nodes, sorted by name.
	Nodes []string
	// Conflicts maps the name of each other MigLayout that selects some of
	// the same nodes to those nodes, sorted. Such nodes are left as they are.
	Conflicts map[string][]string
	// InvalidHolders are the other MigLayouts of Conflicts whose node
	// selector does not parse: they are in conflict on the nodes whose
	// NodeMigLayouts they control (HeldByInvalidSelectors).
	InvalidHolders map[string]bool
}

// Conflicted reports whether another MigLayout selects node too.
func (s Selection) Conflicted(node string) bool {
	for _, nodes := range s.Conflicts {
		if _, found := slices.BinarySearch(nodes, node); found {
			return true
		}
	}
	return false
}

// ConflictMessage names the other MigLayouts and the shared nodes, or is
// empty without conflict.
func (s Selection) ConflictMessage() string {
	if len(s.Conflicts) == 0 {
		return ""
	}
	var parts []string
	for _, other := range slices.Sorted(maps.Keys(s.Conflicts)) {
		nodes := s.Conflicts[other]
		word := "node"
		if len(nodes) > 1 {
			word = "nodes"
		}
		if s.InvalidHolders[other] {
			parts = append(parts, fmt.Sprintf("MigLayout %q, whose node selector is invalid, holds %s %s", other, word, joinBounded(nodes, 10)))
			continue
		}
		parts = append(parts, fmt.Sprintf("MigLayout %q also selects %s %s", other, word, joinBounded(nodes, 10)))
	}
	return strings.Join(parts, "; ") + "; these nodes are left as they are until one MigLayout selects them (change a node selector or the nodes' labels, or delete one of the MigLayouts)"
}

// SelectNodes resolves which of nodes (name → labels) ml selects, and which
// of those another MigLayout of all selects too. MigLayouts being deleted
// select nothing; another MigLayout whose selector is invalid selects nothing.
// The error is about ml's own selector.
func SelectNodes(ml *v1alpha1.MigLayout, all []v1alpha1.MigLayout, nodes map[string]map[string]string) (Selection, error) {
	own, err := selector(ml)
	if err != nil {
		return Selection{}, err
	}
	var sel Selection
	for _, name := range slices.Sorted(maps.Keys(nodes)) {
		if own.Matches(labels.Set(nodes[name])) {
			sel.Nodes = append(sel.Nodes, name)
		}
	}
	addSelectedByOthers(&sel, ml, all, nodes, sel.Nodes)
	return sel, nil
}

// addSelectedByOthers adds to sel.Conflicts, under each other MigLayout of
// all (not being deleted, with a selector that parses) the names (sorted)
// of those of names whose labels (nodes: name → labels) it selects.
func addSelectedByOthers(sel *Selection, ml *v1alpha1.MigLayout, all []v1alpha1.MigLayout, nodes map[string]map[string]string, names []string) {
	for i := range all {
		other := &all[i]
		if other.Name == ml.Name || other.DeletionTimestamp != nil {
			continue
		}
		s, err := selector(other)
		if err != nil {
			continue
		}
		for _, name := range names {
			if s.Matches(labels.Set(nodes[name])) {
				if sel.Conflicts == nil {
					sel.Conflicts = map[string][]string{}
				}
				sel.Conflicts[other.Name] = append(sel.Conflicts[other.Name], name)
			}
		}
	}
}

// HeldByInvalidSelectors adds to sel, as conflicts, the selected nodes
// whose NodeMigLayout (nmls, by node) another MigLayout of all controls
// while its node selector does not parse: that MigLayout cannot say which
// nodes it selects, so it releases none, and taking them over would apply
// this MigLayout's layout to nodes the other may well select once fixed.
// They are left as they are until it is fixed or deleted.
func HeldByInvalidSelectors(ml *v1alpha1.MigLayout, sel Selection, all []v1alpha1.MigLayout, nmls map[string]*v1alpha1.NodeMigLayout) Selection {
	for i := range all {
		other := &all[i]
		if other.UID == ml.UID || other.DeletionTimestamp != nil {
			continue
		}
		if _, err := selector(other); err == nil {
			continue
		}
		for _, node := range sel.Nodes {
			nml := nmls[node]
			if nml == nil || !metav1.IsControlledBy(nml, other) || slices.Contains(sel.Conflicts[other.Name], node) {
				continue
			}
			if sel.Conflicts == nil {
				sel.Conflicts = map[string][]string{}
			}
			if sel.InvalidHolders == nil {
				sel.InvalidHolders = map[string]bool{}
			}
			sel.Conflicts[other.Name] = append(sel.Conflicts[other.Name], node)
			sel.InvalidHolders[other.Name] = true
		}
	}
	return sel
}

// ConflictsOfHeld is the Selection of ml, whose own node selector does not
// parse: it selects no node, and its Conflicts are the nodes whose
// NodeMigLayout (nmls, by node) it controls that another MigLayout of all,
// with a valid selector and not being deleted, selects (nodes: name →
// labels), the other side of HeldByInvalidSelectors, so that both report
// the conflict.
func ConflictsOfHeld(ml *v1alpha1.MigLayout, all []v1alpha1.MigLayout, nodes map[string]map[string]string, nmls map[string]*v1alpha1.NodeMigLayout) Selection {
	var sel Selection
	var held []string
	for _, name := range slices.Sorted(maps.Keys(nmls)) {
		if _, ok := nodes[name]; ok && metav1.IsControlledBy(nmls[name], ml) {
			held = append(held, name)
		}
	}
	addSelectedByOthers(&sel, ml, all, nodes, held)
	return sel
}

func selector(ml *v1alpha1.MigLayout) (labels.Selector, error) {
	s, err := metav1.LabelSelectorAsSelector(&ml.Spec.NodeSelector)
	if err != nil {
		return nil, fmt.Errorf("parsing the node selector of MigLayout %s: %w", ml.Name, err)
	}
	return s, nil
}

// joinBounded joins at most n names and says how many more there are.
func joinBounded(names []string, n int) string {
	if len(names) <= n {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:n], ", "), len(names)-n)
}
