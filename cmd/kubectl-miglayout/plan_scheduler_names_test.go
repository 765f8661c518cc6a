package main

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// TestPlanAutoSchedulerNames: plan counts as demand only the pods of the
// schedulers --auto-scheduler-names lists (default-scheduler unless told),
// as the controller's flag of that name does.
func TestPlanAutoSchedulerNames(t *testing.T) {
	for name, tc := range map[string]struct {
		args    []string
		counted bool
	}{
		"default":          {},
		"named":            {args: []string{"--auto-scheduler-names=default-scheduler,gpu-scheduler"}, counted: true},
		"named, as a list": {args: []string{"--auto-scheduler-names=default-scheduler", "--auto-scheduler-names=gpu-scheduler"}, counted: true},
	} {
		t.Run(name, func(t *testing.T) {
			nml := &v1alpha1.NodeMigLayout{
				ObjectMeta: metav1.ObjectMeta{Name: "auto-node"},
				Status: v1alpha1.NodeMigLayoutStatus{GPUs: []v1alpha1.GPUStatus{
					{Index: 0, Product: "NVIDIA H100 80GB HBM3", Model: "H100-SXM5-80GB", MIGEnabled: true, MIGPending: true, Phase: v1alpha1.PhaseReady},
				}},
			}
			claim, pod := pending("small", "small-gpu", "device.attributes['mig.miglayout.io'].profile == '1g.10gb'", 1000)
			pod.Spec.SchedulerName = "gpu-scheduler"
			objs := []client.Object{node("auto-node", map[string]string{"pool": "auto"}), nml, migClass(), claim, pod}
			out, _, err := runWith(t, objs, append([]string{"plan", "-f", "testdata/plan-auto.yaml"}, tc.args...)...)
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Contains(out, "serves:   ml/small"); got != tc.counted {
				t.Errorf("the pod of gpu-scheduler served %v, want %v:\n%s", got, tc.counted, out)
			}
		})
	}
}
