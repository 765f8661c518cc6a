package controller

import (
	"testing"

	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/miglayout/miglayout/pkg/mig"
)

// TestAutoGPUKnownByItsProductName: a GPU whose agent reports no model
// name (an older agent) is found in the catalog by its product name and
// planned on like any other.
func TestAutoGPUKnownByItsProductName(t *testing.T) {
	g := a100(0).layout("7g.80gb@0")
	g.g.Model = ""
	nml := nodeMigLayout("n1").status(g).build()
	gpus := autoGPUs(nml, mig.DefaultCatalog(), modelVariants{}, sets.New[string](), sets.New[string](), true)
	if len(gpus) != 1 {
		t.Fatalf("%d GPUs planned on, want 1 (product %q)", len(gpus), g.g.Product)
	}
	if got := gpus[0].Layout.String(); got != "7g.80gb@0" {
		t.Errorf("GPU layout %q, want 7g.80gb@0", got)
	}
}
