package planner

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/miglayout/miglayout/pkg/mig"
)

// TestDemandOfClassFailingOnStandIn: a DeviceClass of the driver whose
// selector fails to evaluate on the stand-in devices for a reason other
// than a per-GPU attribute (it reads an attribute the catalog's devices do
// not carry) is still MIG demand: the planner judges it on the real GPUs
// and says why it cannot serve it, rather than leaving the pod without an
// event. Another driver's class failing alike is not.
func TestDemandOfClassFailingOnStandIn(t *testing.T) {
	tests := map[string]struct {
		expression string
		want       []string
	}{
		"the driver's class": {"device.driver == 'mig.miglayout.io' && device.attributes['mig.miglayout.io'].rack == 'r1'", []string{"p"}},
		"another driver's":   {"device.driver == 'gpu.amd.com' || device.attributes['gpu.amd.com'].rack == 'r1'", nil},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			c := &resourceapi.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: "c"}, Spec: resourceapi.DeviceClassSpec{
				Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: tc.expression}}}}}
			if mentionsPerGPU(selectorsText(c)) {
				t.Fatalf("test class %q reads a per-GPU attribute", tc.expression)
			}
			var names []string
			for _, p := range Demand(t.Context(), driver, []*resourceapi.DeviceClass{c}, mig.DefaultCatalog().Models(), []Pod{requests("p", "c")}) {
				names = append(names, p.Pod.Name)
			}
			if diff := cmp.Diff(tc.want, names); diff != "" {
				t.Errorf("demand of a pod of class %q (-want +got):\n%s", tc.expression, diff)
			}
		})
	}
}
