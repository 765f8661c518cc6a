package main

import (
	"context"
	"errors"
	"strings"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// TestPlanAutoWhereDeviceTaintRulesAreNotServed: an API server that does
// not serve DeviceTaintRules (an older Kubernetes: no such kind, or no such
// resource in resource.k8s.io/v1) has none to read: the Auto plan is made
// without them and without a warning; any other error listing them fails
// the plan, naming them.
func TestPlanAutoWhereDeviceTaintRulesAreNotServed(t *testing.T) {
	gr := resourceapi.Resource("devicetaintrules")
	for name, tc := range map[string]struct {
		answer  error
		wantErr string
	}{
		"no such kind":     {&meta.NoKindMatchError{GroupKind: schema.GroupKind{Group: gr.Group, Kind: "DeviceTaintRule"}, SearchedVersions: []string{"v1"}}, ""},
		"no such resource": {apierrors.NewNotFound(gr, ""), ""},
		"a server error":   {apierrors.NewInternalError(errors.New("etcd unavailable")), "listing DeviceTaintRules"},
	} {
		t.Run(name, func(t *testing.T) {
			nml := &v1alpha1.NodeMigLayout{ObjectMeta: metav1.ObjectMeta{Name: "auto-node"},
				Status: v1alpha1.NodeMigLayoutStatus{GPUs: []v1alpha1.GPUStatus{{Index: 0, Product: "NVIDIA H100 80GB HBM3", Model: "H100-SXM5-80GB",
					MIGEnabled: true, MIGPending: true, Phase: v1alpha1.PhaseReady}}}}
			claim, pod := pending("whole", "whole-gpu", "device.attributes['mig.miglayout.io'].profile == '7g.80gb'", 1000)
			objs := []client.Object{node("auto-node", map[string]string{"pool": "auto"}), nml, migClass(), claim, pod}
			out, errOut, err := runIntercepted(t, objs, interceptor.Funcs{List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
				if _, ok := list.(*resourceapi.DeviceTaintRuleList); ok {
					return tc.answer
				}
				return c.List(ctx, list, opts...)
			}}, "plan", "-f", "testdata/plan-auto.yaml")
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Errorf("plan: %v, want an error saying %q; planned:\n%s", err, tc.wantErr, out)
				}
				return
			}
			if err != nil {
				t.Fatalf("plan: %v, want the plan made without DeviceTaintRules", err)
			}
			if errOut != "" {
				t.Errorf("stderr %q, want no warning", errOut)
			}
			if !strings.Contains(out, "serves:   ml/whole") {
				t.Errorf("plan does not serve the pending pod:\n%s", out)
			}
		})
	}
}
