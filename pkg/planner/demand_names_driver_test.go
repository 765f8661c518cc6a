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
// any spacing, or by the driver's attribute domain alone.
func TestDemandOfClassNamingTheDriver(t *testing.T) {
	class := func(name string, expressions ...string) *resourceapi.DeviceClass {
		c := &resourceapi.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: name}}
		for _, e := range expressions {
			c.Spec.Selectors = append(c.Spec.Selectors, resourceapi.DeviceSelector{CEL: &resourceapi.CELDeviceSelector{Expression: e}})
		}
		return c
	}
	const onRoot = "device.attributes['resource.kubernetes.io'].pcieRoot == 'pci0000:00'"
	tests := map[string]*resourceapi.DeviceClass{
		"device.driver in double quotes, spaced": class("c", `device.driver  ==  "mig.miglayout.io"`, onRoot),
		"device.driver in single quotes":         class("c", "device.driver=='mig.miglayout.io'", onRoot),
		"the attribute domain only":              class("c", `device.attributes["mig.miglayout.io"].driverVersion.isGreaterThan(semver('500.0.0'))`),
	}
	for name, c := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := Demand(t.Context(), driver, []*resourceapi.DeviceClass{c}, mig.DefaultCatalog().Models(), []Pod{requests("p", "c")})
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, p := range got {
				names = append(names, p.Pod.Name)
			}
			if diff := cmp.Diff([]string{"p"}, names); diff != "" {
				t.Errorf("demand of a pod of class %q (-want +got):\n%s", c.Spec.Selectors[0].CEL.Expression, diff)
			}
		})
	}
}
