package controller

import (
	"testing"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// TestSelectedInventoryWaitsForEveryReport: the spec check waits until the
// agent of every node the MigLayout manages has reported its GPUs; a
// NodeMigLayout made but not reported on yet holds it back like a missing
// one, so no rule is reported as matching no GPU on the strength of a node
// not heard from.
func TestSelectedInventoryWaitsForEveryReport(t *testing.T) {
	tests := map[string]map[string]*v1alpha1.NodeMigLayout{
		"no NodeMigLayout yet": {
			"n1": nodeMigLayout("n1").status(a100(0)).build(),
		},
		"a NodeMigLayout without a report": {
			"n1": nodeMigLayout("n1").status(a100(0)).build(),
			"n2": nodeMigLayout("n2").build(),
		},
	}
	sel := Selection{Nodes: []string{"n1", "n2"}}
	for name, nmls := range tests {
		t.Run(name, func(t *testing.T) {
			if got := SelectedInventory(sel, nmls); got != nil {
				t.Errorf("inventory %+v; want none while n2 has not reported", got)
			}
		})
	}
}
