package main

import (
	"errors"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// TestPlanAutoExitCode: with --exit-code, an Auto plan exits 0 when no GPU
// would change, 2 when a GPU would change for a pending pod, and 3 when a
// node is in conflict with another MigLayout (left as it is).
func TestPlanAutoExitCode(t *testing.T) {
	nml := &v1alpha1.NodeMigLayout{ObjectMeta: metav1.ObjectMeta{Name: "auto-node"},
		Status: v1alpha1.NodeMigLayoutStatus{GPUs: []v1alpha1.GPUStatus{{Index: 0, Product: "NVIDIA H100 80GB HBM3", Model: "H100-SXM5-80GB",
			MIGEnabled: true, MIGPending: true, Phase: v1alpha1.PhaseReady}}}}
	claim, pod := pending("whole", "whole-gpu", "device.attributes['mig.miglayout.io'].profile == '7g.80gb'", 1000)
	auto := []client.Object{node("auto-node", map[string]string{"pool": "auto"}), nml, migClass()}
	other := &v1alpha1.MigLayout{ObjectMeta: metav1.ObjectMeta{Name: "other", UID: "uid-other"},
		Spec: v1alpha1.MigLayoutSpec{Mode: v1alpha1.ModeAuto, NodeSelector: metav1.LabelSelector{MatchLabels: map[string]string{"pool": "auto"}}}}
	f := manifestFile(t, autoMigLayoutDoc("on-demand", "auto"))
	for name, tc := range map[string]struct {
		objs []client.Object
		want int
	}{
		"nothing pending":          {auto, 0},
		"a pod served by a change": {append([]client.Object{claim, pod}, auto...), 2},
		"a node in conflict":       {append([]client.Object{other}, auto...), 3},
	} {
		t.Run(name, func(t *testing.T) {
			out, _, err := runWith(t, tc.objs, "plan", "--exit-code", "-f", f)
			code := exitStatus(t, err)
			if code != tc.want {
				t.Errorf("exit status %d, want %d:\n%s", code, tc.want, out)
			}
		})
	}
}

// exitStatus is the status a command that returned err exits with under
// --exit-code: the exitCode it returned, or 0 for none; any other error
// fails the test.
func exitStatus(t *testing.T, err error) int {
	t.Helper()
	var c exitCode
	switch {
	case errors.As(err, &c):
		return int(c)
	case err != nil:
		t.Fatal(err)
	}
	return 0
}
