package controller

import (
	"testing"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// TestDevicePluginActiveGPU: a GPU its agent withholds because NVIDIA's
// device plugin hands the node's GPUs out holds no maxNodesChanging slot
// (no spec changes it), and Auto mode plans nothing on it (none of its
// devices is published); the same GPU failing on NVML still holds its
// slot and stays plannable.
func TestDevicePluginActiveGPU(t *testing.T) {
	withheld := v1alpha1.GPUStatus{Index: 0, MIGEnabled: true, MIGPending: true, Layout: "7g.80gb@0",
		Phase: v1alpha1.PhaseFailed, Reason: v1alpha1.ReasonDevicePluginActive}
	nvml := withheld
	nvml.Reason = v1alpha1.ReasonNVMLError
	tests := map[string]struct {
		st                 v1alpha1.GPUStatus
		gone, autoPlanning bool
	}{
		"device plugin active": {withheld, true, false},
		"NVML error":           {nvml, false, true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := hardwareGone(tc.st); got != tc.gone {
				t.Errorf("hardwareGone = %v, want %v", got, tc.gone)
			}
			if got := autoPlannable(tc.st); got != tc.autoPlanning {
				t.Errorf("autoPlannable = %v, want %v", got, tc.autoPlanning)
			}
		})
	}
}
