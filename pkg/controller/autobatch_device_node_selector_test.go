package controller

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/utils/ptr"

	"github.com/miglayout/miglayout/pkg/planner"
)

// TestFeasibilityLabelsOfOtherDriversDevices: the node labels the key
// follows include those another driver's slice selects nodes by, for the
// whole slice or per device (a NIC reached from one rack only), so that a
// node relabelled into or out of that rack is planned again; miglayout's
// own slices select nothing.
func TestFeasibilityLabelsOfOtherDriversDevices(t *testing.T) {
	sel := func(key string) *corev1.NodeSelector {
		return &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
			{Key: key, Operator: corev1.NodeSelectorOpIn, Values: []string{"r1"}}}}}}
	}
	in := AutoInputs{Driver: "mig.miglayout.io", Slices: []resourceapi.ResourceSlice{
		{Spec: resourceapi.ResourceSliceSpec{Driver: "nic.example.com", NodeSelector: sel("example.com/row")}},
		{Spec: resourceapi.ResourceSliceSpec{Driver: "nic.example.com", PerDeviceNodeSelection: ptr.To(true),
			Devices: []resourceapi.Device{{Name: "nic-0", NodeSelector: sel("example.com/rack")}}}},
		{Spec: resourceapi.ResourceSliceSpec{Driver: "mig.miglayout.io", NodeSelector: sel("example.com/mine")}},
	}}
	got := feasibilityLabelKeys(in, planner.Snapshot{})
	want := map[string]bool{"example.com/row": true, "example.com/rack": true}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("label keys followed (-want +got):\n%s", diff)
	}
}
