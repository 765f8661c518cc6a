package controller

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestConflictMessageNamesUpToTenNodes: the Conflict condition names up to
// ten shared nodes and says how many more there are beyond them.
func TestConflictMessageNamesUpToTenNodes(t *testing.T) {
	names := func(n int) []string {
		var out []string
		for i := range n {
			out = append(out, fmt.Sprintf("n%02d", i))
		}
		return out
	}
	tests := map[string]struct {
		nodes []string
		want  string
	}{
		"ten nodes": {
			nodes: names(10),
			want:  `MigLayout "other" also selects nodes ` + strings.Join(names(10), ", ") + "; these nodes are left as they are until one MigLayout selects them (change a node selector or the nodes' labels, or delete one of the MigLayouts)",
		},
		"eleven nodes": {
			nodes: names(11),
			want:  `MigLayout "other" also selects nodes ` + strings.Join(names(10), ", ") + " and 1 more; these nodes are left as they are until one MigLayout selects them (change a node selector or the nodes' labels, or delete one of the MigLayouts)",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			sel := Selection{Nodes: tc.nodes, Conflicts: map[string][]string{"other": tc.nodes}}
			if diff := cmp.Diff(tc.want, sel.ConflictMessage()); diff != "" {
				t.Errorf("conflict message (-want +got):\n%s", diff)
			}
		})
	}
}
