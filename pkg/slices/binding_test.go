package slices

import (
	"fmt"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
)

func TestRequireBinding(t *testing.T) {
	// 300 devices: three slices of one pool, every device must carry them.
	res, err := BuildPoolFromDevices("node-a", fakeDevices(300, 0))
	if err != nil {
		t.Fatal(err)
	}
	RequireBinding(&res)
	n := 0
	for _, s := range res.Pools["node-a"].Slices {
		for _, d := range s.Devices {
			n++
			if fmt.Sprint(d.BindingConditions, d.BindingFailureConditions) != fmt.Sprint([]string{BindingConditionReady}, []string{BindingConditionRemoved}) {
				t.Errorf("%s: binding conditions %v, failure conditions %v", d.Name, d.BindingConditions, d.BindingFailureConditions)
			}
		}
	}
	if n != 300 {
		t.Errorf("%d devices, want 300", n)
	}
	// They are no advanced feature: the split stays at 128 devices per slice.
	if err := ValidatePool("node-a", res.Pools["node-a"]); err != nil {
		t.Error(err)
	}
	if got := SliceCapacity(res.Pools["node-a"].Slices[0].Devices); got != resourceapi.ResourceSliceMaxDevices {
		t.Errorf("slice capacity %d with binding conditions, want %d", got, resourceapi.ResourceSliceMaxDevices)
	}

	for name, tc := range map[string]struct {
		r    resourceapi.DeviceRequestAllocationResult
		want bool
	}{
		"ours":          {resourceapi.DeviceRequestAllocationResult{BindingConditions: []string{BindingConditionReady}}, true},
		"none":          {resourceapi.DeviceRequestAllocationResult{}, false},
		"another's one": {resourceapi.DeviceRequestAllocationResult{BindingConditions: []string{"nic.example.com/Attached"}}, false},
	} {
		if got := RequiresBinding(tc.r); got != tc.want {
			t.Errorf("%s: RequiresBinding = %v, want %v", name, got, tc.want)
		}
	}
}
