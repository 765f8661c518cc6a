package main

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// TestPlanAutoTellsMissingSparesUnderTheirNodesMigLayout: spares the plan
// does not make on one MigLayout's node are told under that MigLayout
// only, not under another Auto MigLayout of the file.
func TestPlanAutoTellsMissingSparesUnderTheirNodesMigLayout(t *testing.T) {
	h100 := func(name string) *v1alpha1.NodeMigLayout {
		return &v1alpha1.NodeMigLayout{ObjectMeta: metav1.ObjectMeta{Name: name},
			Status: v1alpha1.NodeMigLayoutStatus{GPUs: []v1alpha1.GPUStatus{{Index: 0, Product: "NVIDIA H100 80GB HBM3", Model: "H100-SXM5-80GB",
				MIGEnabled: true, MIGPending: true, Layout: "3g.40gb@0,3g.40gb@4", Phase: v1alpha1.PhaseReady}}}}
	}
	objs := []client.Object{migClass(), node("node-a", map[string]string{"pool": "a"}), h100("node-a"),
		node("node-b", map[string]string{"pool": "b"}), h100("node-b")}
	a, b := planOfEachPool(t, objs, "    spares: {1g.10gb: 2}\n")
	if want := "Spares not made (they would destroy a device, or the limits on GPUs changed at once are reached):\n  node-a: 2 1g.10gb\n"; !strings.Contains(a, want) {
		t.Errorf("the plan of pool-a lacks %q:\n%s", want, a)
	}
	if strings.Contains(b, "Spares not made") {
		t.Errorf("the plan of pool-b tells of spares pool-a's policy asks for on pool-a's node:\n%s", b)
	}
}
