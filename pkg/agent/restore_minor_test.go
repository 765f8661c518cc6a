package agent

import (
	"testing"

	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/miglayout/miglayout/pkg/mig"
	"github.com/miglayout/miglayout/pkg/mig/gpu"
)

// TestRestorePlansSkipNameOfAnotherGPUsMinor: GPU 0 has minor 1 and GPU 1
// minor 0. An allocated name "gpu-1-mig-..." the GPUs lack may be GPU 1's
// (miglayout's numbering by index) or GPU 0's (NVIDIA's DRA driver numbers
// by minor): nothing is made again on GPU 1 for it.
func TestRestorePlansSkipNameOfAnotherGPUsMinor(t *testing.T) {
	a100, err := mig.DefaultCatalog().Model("A100-SXM4-80GB")
	if err != nil {
		t.Fatal(err)
	}
	on := gpu.MIGMode{Current: true, Pending: true}
	obs := []GPUState{
		{GPU: gpu.GPU{Index: 0, Minor: 1, UUID: "GPU-a", MIGCapable: true, MIGMode: on, Model: a100}},
		{GPU: gpu.GPU{Index: 1, Minor: 0, UUID: "GPU-b", MIGCapable: true, MIGMode: on, Model: a100}},
	}
	j, err := OpenJournal(t.TempDir() + "/journal.json")
	if err != nil {
		t.Fatal(err)
	}
	r := &Repartitioner{Inventory: &fakeInventory{}, Journal: j, counted: sets.New(0, 1)}
	const name = "gpu-1-mig-3g40gb-9-4"
	if plans := r.restorePlans(obs, nil, unknownAllocations{1: {name}}, sets.New(name)); len(plans) != 0 {
		t.Errorf("restore plans %v for %s, which may be GPU 0's (minor 1): want none", plans[0].plan.Create, name)
	}
	// Control: with minors equal to indices the name is GPU 1's alone.
	obs[0].GPU.Minor, obs[1].GPU.Minor = 0, 1
	if plans := r.restorePlans(obs, nil, unknownAllocations{1: {name}}, sets.New(name)); len(plans) != 1 || plans[0].plan.Create.String() != "3g.40gb@4" {
		t.Errorf("restore plans %d, want 3g.40gb@4 made again on GPU 1", len(plans))
	}
}
