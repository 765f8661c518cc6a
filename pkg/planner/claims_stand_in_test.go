package planner

import "testing"

// TestSingleDeviceProductNameOfNodeServes: a single-device claim that
// selects the product name the GPU reports (published from NVML, which may
// name a model of the catalog otherwise) is judged on what the node's GPUs
// publish, not on the catalog's name for the model.
func TestSingleDeviceProductNameOfNodeServes(t *testing.T) {
	n := node("n1").gpu("A100-SXM4-80GB", "", "").build()
	n.GPUs[0].Info.ProductName = "NVIDIA A100 80GB HBM2e"
	pods := []Pod{pod("p", 1).claim(profileIs("3g.40gb")+" && device.attributes['mig.miglayout.io'].productName == 'NVIDIA A100 80GB HBM2e'", 1).build()}
	want := trace{
		Changes: []string{"n1/0: (empty) -> 3g.40gb@4 serves default/p"},
		Served:  []string{"default/p -> n1 gpu-0-mig-3g40gb-9-4 after change"},
	}
	checkTrace(t, want, planTrace(t, []Node{n}, pods))
}
