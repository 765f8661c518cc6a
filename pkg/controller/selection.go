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
		parts = append(parts, fmt.Sprintf("MigLayout %q also selects %s %s", other, word, joinBounded(nodes, 10)))
	}
	return strings.Join(parts, "; ") + "; these nodes are left as they are"
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
	for i := range all {
		other := &all[i]
		if other.Name == ml.Name || other.DeletionTimestamp != nil {
			continue
		}
		s, err := selector(other)
		if err != nil {
			continue
		}
		for _, name := range sel.Nodes {
			if s.Matches(labels.Set(nodes[name])) {
				if sel.Conflicts == nil {
					sel.Conflicts = map[string][]string{}
				}
				sel.Conflicts[other.Name] = append(sel.Conflicts[other.Name], name)
			}
		}
	}
	return sel, nil
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
