package planner

import (
	"testing"

	"k8s.io/utils/ptr"
)

// TestPerGPUClaimJudgedOnEachGPUsAttributes: a claim for one device that
// reads per-GPU attributes is judged on each GPU's own, GPUs of one model
// told apart by every attribute it reads: the first node's GPU, which the
// claim refuses, does not decide for the second's, which it accepts.
func TestPerGPUClaimJudgedOnEachGPUsAttributes(t *testing.T) {
	const attrs = "device.attributes['mig.miglayout.io']"
	tests := map[string]struct {
		// set makes the GPU of node n1 (refused) and n2 (accepted)
		// differ in the attribute.
		set   func(n1, n2 *GPU)
		claim string
	}{
		"product name": {
			set:   func(n1, n2 *GPU) { n1.Info.ProductName, n2.Info.ProductName = "NVIDIA Other", "NVIDIA A100-SXM4-80GB" },
			claim: attrs + ".productName == 'NVIDIA A100-SXM4-80GB' && " + attrs + ".parentIndex == 0",
		},
		"PCIe root": {
			set:   func(n1, n2 *GPU) { n1.Info.PCIeRoot, n2.Info.PCIeRoot = "pci0000:80", "pci0000:00" },
			claim: "device.attributes['resource.kubernetes.io'].pcieRoot == 'pci0000:00'",
		},
		"NUMA node": {
			set:   func(n1, n2 *GPU) { n1.Info.NUMANode, n2.Info.NUMANode = ptr.To(1), ptr.To(0) },
			claim: "device.attributes['resource.kubernetes.io'].numaNode == 0",
		},
		"driver version": {
			set:   func(n1, n2 *GPU) { n1.Info.DriverVersion, n2.Info.DriverVersion = "550.54.15", "570.86.10" },
			claim: attrs + ".driverVersion.compareTo(semver('560.0.0')) >= 0",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			n1, n2 := node("n1").gpu("A100-SXM4-80GB", "", "").build(), node("n2").gpu("A100-SXM4-80GB", "", "").build()
			tc.set(&n1.GPUs[0], &n2.GPUs[0])
			pods := []Pod{pod("p", 1).claim(profileIs("1g.10gb")+" && "+tc.claim, 1).build()}
			want := trace{
				Changes: []string{"n2/0: (empty) -> 1g.10gb@6 serves default/p"},
				Served:  []string{"default/p -> n2 gpu-0-mig-1g10gb-19-6 after change"},
			}
			checkTrace(t, want, planTrace(t, []Node{n1, n2}, pods))
		})
	}
}
