package controller

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// withRuleTaints adds a rule's taint to each device of another driver that
// the rule selects, after the taints the device has and those of the rules
// before it; a rule without a device name selects every device of its
// pool. The driver's own slices and the slices given are left as they are.
func TestWithRuleTaintsTaintsTheDevicesOfOtherDrivers(t *testing.T) {
	const driver, nicDriver = "mig.miglayout.io", "nic.example.com"
	own := resourceapi.DeviceTaint{Key: "example.com/own", Effect: resourceapi.DeviceTaintEffectNoSchedule}
	slice := func(name, drv, pool string, devices ...resourceapi.Device) resourceapi.ResourceSlice {
		return resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: resourceapi.ResourceSliceSpec{
			Driver: drv, Pool: resourceapi.ResourcePool{Name: pool, ResourceSliceCount: 1}, Devices: devices}}
	}
	given := func() []resourceapi.ResourceSlice {
		return []resourceapi.ResourceSlice{
			slice("a1-nic", nicDriver, "a1", resourceapi.Device{Name: "nic-0", Taints: []resourceapi.DeviceTaint{own}}, resourceapi.Device{Name: "nic-1"}),
			slice("a2-nic", nicDriver, "a2", resourceapi.Device{Name: "nic-0"}, resourceapi.Device{Name: "nic-1"}),
			slice("a1-mig", driver, "a1", resourceapi.Device{Name: "gpu-0"}),
		}
	}
	taint := func(key string) resourceapi.DeviceTaint {
		return resourceapi.DeviceTaint{Key: key, Effect: resourceapi.DeviceTaintEffectNoSchedule}
	}
	rule := func(key string, sel *resourceapi.DeviceTaintSelector) resourceapi.DeviceTaintRule {
		return resourceapi.DeviceTaintRule{Spec: resourceapi.DeviceTaintRuleSpec{DeviceSelector: sel, Taint: taint(key)}}
	}
	rules := []resourceapi.DeviceTaintRule{
		// One device of a1 by name: nic-1 stays untainted.
		rule("example.com/one", &resourceapi.DeviceTaintSelector{Driver: ptr.To(nicDriver), Pool: ptr.To("a1"), Device: ptr.To("nic-0")}),
		// Every device of a2, and of a1's MIG pool, which is left alone.
		rule("example.com/pool", &resourceapi.DeviceTaintSelector{Pool: ptr.To("a2")}),
		rule("example.com/pool", &resourceapi.DeviceTaintSelector{Driver: ptr.To(driver), Pool: ptr.To("a1")}),
		// A second rule on a1's nic-0 comes after the first.
		rule("example.com/second", &resourceapi.DeviceTaintSelector{Pool: ptr.To("a1"), Device: ptr.To("nic-0")}),
		rule("example.com/none", nil),
	}
	taints := func(slices []resourceapi.ResourceSlice) map[string][]string {
		out := map[string][]string{}
		for _, s := range slices {
			for _, d := range s.Spec.Devices {
				var keys []string
				for _, t := range d.Taints {
					keys = append(keys, t.Key)
				}
				out[s.Name+"/"+d.Name] = keys
			}
		}
		return out
	}
	in := given()
	got := taints(withRuleTaints(in, rules, driver))
	want := map[string][]string{
		"a1-nic/nic-0": {"example.com/own", "example.com/one", "example.com/second"},
		"a1-nic/nic-1": nil,
		"a2-nic/nic-0": {"example.com/pool"},
		"a2-nic/nic-1": {"example.com/pool"},
		"a1-mig/gpu-0": nil,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("taints (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(taints(given()), taints(in)); diff != "" {
		t.Errorf("the slices given were changed (-want +got):\n%s", diff)
	}
}
