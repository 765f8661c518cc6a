package controller

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/utils/ptr"

	migslices "github.com/miglayout/miglayout/pkg/slices"
)

// TestTrimResourceSlicesOddInputs: a MIG device whose productName is not a
// string is kept (its model is unknown), and an object that is no
// ResourceSlice passes through untouched.
func TestTrimResourceSlicesOddInputs(t *testing.T) {
	trim := TrimResourceSlices(migClassName, nil)
	d := resourceapi.Device{Name: "gpu-0-mig-3g40gb-0-0", Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
		migslices.AttrProductName: {IntValue: ptr.To[int64](7)},
	}}
	s := &resourceapi.ResourceSlice{Spec: resourceapi.ResourceSliceSpec{Driver: migClassName, Devices: []resourceapi.Device{d}}}
	out, err := trim(s)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]resourceapi.Device{d}, out.(*resourceapi.ResourceSlice).Spec.Devices); diff != "" {
		t.Errorf("devices kept (-want +got):\n%s", diff)
	}
	n := &corev1.Node{}
	if got, err := trim(n); err != nil || got != any(n) {
		t.Errorf("a Node: got %v, %v; want it back as it is", got, err)
	}
}
