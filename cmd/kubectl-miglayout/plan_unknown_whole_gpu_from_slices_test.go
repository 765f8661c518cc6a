package main

import (
	"strings"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/miglayout/miglayout/pkg/mig"
	"github.com/miglayout/miglayout/pkg/mig/gpu"
	migslices "github.com/miglayout/miglayout/pkg/slices"
)

// TestPlanUncataloguedWholeGPUFromSlices: a node no MigLayout selects yet
// publishes an A100 with MIG off and an L4 (no MIG) whole. A rule for every
// MIG GPU does not take the L4 once the agent reports it (migCapable
// false), but the ResourceSlices plan reads do not say whether a GPU has
// MIG: the L4 is said to be left alone if it has none, and not counted as
// needing a look (plan --exit-code gave 3, a false alarm in pipelines).
func TestPlanUncataloguedWholeGPUFromSlices(t *testing.T) {
	model, err := mig.DefaultCatalog().Model("A100-SXM4-80GB")
	if err != nil {
		t.Fatal(err)
	}
	l4 := gpu.GPU{Index: 1, UUID: "GPU-l4", ProductName: "NVIDIA L4", MemoryMiB: 23034}
	slice := &resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: "gpu-a-mig"},
		Spec: resourceapi.ResourceSliceSpec{Driver: migslices.DefaultDriverName, NodeName: ptr.To("gpu-a"),
			Pool:    resourceapi.ResourcePool{Name: "gpu-a", ResourceSliceCount: 1},
			Devices: []resourceapi.Device{migslices.GPUDevice(migslices.PlannedGPU(model, 0)), migslices.GPUDevice(l4)}}}
	f := staticMigLayoutFile(t, "halves", "[{profiles: {3g.40gb: 2}}]")
	out, _, err := runWith(t, []client.Object{node("gpu-a", map[string]string{"pool": "a"}), slice}, "plan", "--exit-code", "-f", f)
	if code := exitStatus(t, err); code != 2 {
		t.Errorf("exit status %d, want 2 (GPU 0 changes, nothing needs a look):\n%s", code, out)
	}
	if !strings.Contains(out, "left as it is if it has no MIG") {
		t.Errorf("plan does not say the L4 is left alone without MIG:\n%s", out)
	}
}
