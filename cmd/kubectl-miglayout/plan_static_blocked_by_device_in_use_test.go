package main

import (
	"errors"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// TestPlanStaticBlockedByADeviceInUseOutsideAClaim: a device its agent
// reports in use (prepared for a container or running a process) blocks
// the change that would destroy it even where no ResourceClaim is
// allocated to it; --exit-code asks for a look (3).
func TestPlanStaticBlockedByADeviceInUseOutsideAClaim(t *testing.T) {
	nml := &v1alpha1.NodeMigLayout{ObjectMeta: metav1.ObjectMeta{Name: "gpu-a"},
		Status: v1alpha1.NodeMigLayoutStatus{GPUs: []v1alpha1.GPUStatus{{Index: 0, Product: "NVIDIA A100-SXM4-80GB", Model: "A100-SXM4-80GB",
			MIGEnabled: true, MIGPending: true, Layout: "7g.80gb@0", InUse: "7g.80gb@0", Phase: v1alpha1.PhaseReady}}}}
	out, _, err := runWith(t, []client.Object{node("gpu-a", map[string]string{"pool": "a"}), nml},
		"plan", "--exit-code", "-f", staticMigLayoutFile(t, "halves", "[{profiles: {3g.40gb: 2}}]"))
	for _, want := range []string{
		"           blocked until released: 7g.80gb@0: in use on the node (prepared for a container or running a process)\n",
		"; 1 blocked by devices in use",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("plan lacks %q:\n%s", want, out)
		}
	}
	var code exitCode
	if !errors.As(err, &code) || code != 3 {
		t.Errorf("exit %v, want 3 (a change blocked by a device in use):\n%s", err, out)
	}
}
