package planner

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/miglayout/miglayout/pkg/mig"
)

// TestDemandOfClassNamingTheDriver: a DeviceClass whose selectors fail on
// a stand-in device (it reads what the catalog does not know: a PCIe root,
// a driver version) is still for miglayout's devices when it names the
// driver, whichever way it does: by device.driver, with either quotes and
// any spacing, or by the driver's attribute domain alone; so is one that
// evaluates to false there but reads an attribute telling GPUs apart (some
// GPUs of a node, a placement, a NUMA node, a driver version). One that
// evaluates there, admits no MIG device and reads no such attribute (the
// driver's class of whole GPUs) is not.
func TestDemandOfClassNamingTheDriver(t *testing.T) {
	class := func(name string, expressions ...string) *resourceapi.DeviceClass {
		c := &resourceapi.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: name}}
		for _, e := range expressions {
			c.Spec.Selectors = append(c.Spec.Selectors, resourceapi.DeviceSelector{CEL: &resourceapi.CELDeviceSelector{Expression: e}})
		}
		return c
	}
	const onRoot = "device.attributes['resource.kubernetes.io'].pcieRoot == 'pci0000:00'"
	tests := map[string]struct {
		class *resourceapi.DeviceClass
		want  []string
	}{
		"device.driver in double quotes, spaced": {class("c", `device.driver  ==  "mig.miglayout.io"`, onRoot), []string{"p"}},
		"device.driver in single quotes":         {class("c", "device.driver=='mig.miglayout.io'", onRoot), []string{"p"}},
		"the attribute domain only":              {class("c", `device.attributes["mig.miglayout.io"].driverVersion.isGreaterThan(semver('500.0.0'))`), []string{"p"}},
		// The chart's class of whole GPUs names the driver and evaluates
		// on every MIG device, to false: its pods wait for a whole GPU,
		// which Auto mode does not make.
		"the driver's whole GPUs": {class("c", "device.driver == 'mig.miglayout.io' && device.attributes['mig.miglayout.io'].type == 'gpu'"), nil},
		// A class of some GPUs of a node evaluates, to false, on the
		// stand-in (GPU 0 of each model, its first placement, no NUMA
		// node): it is for MIG devices all the same.
		"a team's GPUs by index":    {class("c", "device.driver == 'mig.miglayout.io' && device.attributes['mig.miglayout.io'].type == 'mig' && device.attributes['mig.miglayout.io'].parentIndex >= 4"), []string{"p"}},
		"one GPU by UUID":           {class("c", "device.driver == 'mig.miglayout.io' && device.attributes['mig.miglayout.io'].parentUUID == 'GPU-1234'"), []string{"p"}},
		"upper placements":          {class("c", "device.driver == 'mig.miglayout.io' && device.attributes['mig.miglayout.io'].placementStart >= 4"), []string{"p"}},
		"a NUMA node":               {class("c", "device.driver == 'mig.miglayout.io' && device.attributes['mig.miglayout.io'].type == 'mig' && device.attributes['resource.kubernetes.io'].numaNode == 1"), []string{"p"}},
		"a driver version, guarded": {class("c", "device.driver == 'mig.miglayout.io' && has(device.attributes['mig.miglayout.io'].driverVersion) && device.attributes['mig.miglayout.io'].driverVersion.isGreaterThan(semver('550.0.0'))"), []string{"p"}},
		// Another driver's class that reads a per-GPU attribute of its
		// own, or fails on the stand-in, is none of miglayout's.
		"another driver's GPUs by index":    {class("c", "device.driver == 'gpu.amd.com' && device.attributes['gpu.amd.com'].index == 0"), nil},
		"another driver's attributes alone": {class("c", "device.attributes['gpu.amd.com'].uuid == 'GPU-1234'"), nil},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			c := tc.class
			got := Demand(t.Context(), driver, []*resourceapi.DeviceClass{c}, mig.DefaultCatalog().Models(), []Pod{requests("p", "c")})
			var names []string
			for _, p := range got {
				names = append(names, p.Pod.Name)
			}
			if diff := cmp.Diff(tc.want, names); diff != "" {
				t.Errorf("demand of a pod of class %q (-want +got):\n%s", c.Spec.Selectors[0].CEL.Expression, diff)
			}
		})
	}
}
