package main

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/miglayout/miglayout/api/v1alpha1"
	"github.com/miglayout/miglayout/pkg/controller"
)

// declinedCluster is the cluster of the declined-node tests: node-a has a
// free 1g.10gb, node-b a whole GPU, and pod ml/small (UID uid-small) is
// pending for a 1g.10gb. Each call makes new objects.
func declinedCluster() []client.Object {
	ready := func(name, layout string) *v1alpha1.NodeMigLayout {
		return &v1alpha1.NodeMigLayout{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec:       v1alpha1.NodeMigLayoutSpec{MigLayout: "on-demand", GPUs: []v1alpha1.GPUSpec{{Index: 0, MIGEnabled: true, Layout: layout}}},
			Status: v1alpha1.NodeMigLayoutStatus{GPUs: []v1alpha1.GPUStatus{
				{Index: 0, UUID: "GPU-" + name, Product: "NVIDIA H100 80GB HBM3", Model: "H100-SXM5-80GB", MIGEnabled: true,
					MIGPending: true, Layout: layout, Phase: v1alpha1.PhaseReady}}},
		}
	}
	claim, pod := pending("small", "small-gpu", "device.attributes['mig.miglayout.io'].profile == '1g.10gb'", 1000)
	pod.UID = "uid-small"
	return []client.Object{node("node-a", map[string]string{"pool": "auto"}), node("node-b", map[string]string{"pool": "auto"}),
		ready("node-a", "1g.10gb@6"), ready("node-b", "7g.80gb@0"), migClass(), claim, pod}
}

// declinedEvent is the controller's SchedulerDeclinedNode event on the pod
// ml/small of UID uid, recorded ago before runWith's clock (Unix time
// 1060): node-a left out of its plans for 10m0s.
func declinedEvent(uid types.UID, ago time.Duration) *eventsv1.Event {
	return &eventsv1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: "small.declined-" + string(uid)},
		Regarding:           corev1.ObjectReference{Kind: "Pod", Namespace: "ml", Name: "small", UID: uid},
		ReportingController: controller.Name, Reason: controller.EventSchedulerDeclinedNode, Type: corev1.EventTypeWarning,
		EventTime: metav1.NewMicroTime(time.Unix(1060, 0).Add(-ago)),
		Note:      "node node-a is left out of the pod's plans for 10m0s: free devices for the pod (gpu-0-mig-1g10gb-19-6) waited there for 1m0s and kube-scheduler did not bind it there; ..."}
}

// TestPlanAutoLeavesDeclinedNodesOut: node-a has a free 1g.10gb, node-b a
// whole GPU. A pod pending for a 1g.10gb is shown getting node-a's as it
// is, unless the controller has said (a SchedulerDeclinedNode event on the
// pod, still within its length) that it left node-a out of the pod's
// plans: then, as the controller does, the dry run makes its 1g.10gb on
// node-b. An event past its length, or another pod's, changes nothing.
func TestPlanAutoLeavesDeclinedNodesOut(t *testing.T) {
	for name, tc := range map[string]struct {
		event *eventsv1.Event
		want  []string
	}{
		"no event":               {want: []string{"Summary: 0 GPUs would change", "ml/small fits existing free devices on node-a"}},
		"node-a left out":        {event: declinedEvent("uid-small", time.Minute), want: []string{"node-b", "gpu-0  7g.80gb@0 -> 1g.10gb@6", "serves:   ml/small"}},
		"past its length":        {event: declinedEvent("uid-small", 11*time.Minute), want: []string{"Summary: 0 GPUs would change", "ml/small fits existing free devices on node-a"}},
		"another pod's decision": {event: declinedEvent("uid-other", time.Minute), want: []string{"Summary: 0 GPUs would change", "ml/small fits existing free devices on node-a"}},
	} {
		t.Run(name, func(t *testing.T) {
			objs := declinedCluster()
			if tc.event != nil {
				objs = append(objs, tc.event)
			}
			out, errOut, err := runWith(t, objs, "plan", "-f", "testdata/plan-auto.yaml")
			if err != nil {
				t.Fatal(err)
			}
			if errOut != "" {
				t.Errorf("plan warns: %s", errOut)
			}
			for _, s := range tc.want {
				if !strings.Contains(out, s) {
					t.Errorf("plan does not say %q:\n%s", s, out)
				}
			}
		})
	}
}

// TestPlanAutoOptionalReadsForbidden: a user who may not list events, or
// DeviceTaintRules, gets the plan, with no node left out or no device
// tainted by a rule, and a warning saying so.
func TestPlanAutoOptionalReadsForbidden(t *testing.T) {
	for name, tc := range map[string]struct {
		forbidden   func(client.ObjectList) bool
		resource    schema.GroupResource
		wantWarning string
	}{
		"events": {
			forbidden:   func(l client.ObjectList) bool { _, ok := l.(*eventsv1.EventList); return ok },
			resource:    eventsv1.Resource("events"),
			wantWarning: "SchedulerDeclinedNode events cannot be read",
		},
		"device taint rules": {
			forbidden:   func(l client.ObjectList) bool { _, ok := l.(*resourceapi.DeviceTaintRuleList); return ok },
			resource:    resourceapi.Resource("devicetaintrules"),
			wantWarning: "DeviceTaintRules cannot be read",
		},
	} {
		t.Run(name, func(t *testing.T) {
			claim, pod := pending("small", "small-gpu", "device.attributes['mig.miglayout.io'].profile == '1g.10gb'", 1000)
			nml := &v1alpha1.NodeMigLayout{
				ObjectMeta: metav1.ObjectMeta{Name: "node-a"},
				Spec:       v1alpha1.NodeMigLayoutSpec{MigLayout: "on-demand", GPUs: []v1alpha1.GPUSpec{{Index: 0, MIGEnabled: true, Layout: "1g.10gb@6"}}},
				Status: v1alpha1.NodeMigLayoutStatus{GPUs: []v1alpha1.GPUStatus{{Index: 0, UUID: "GPU-a", Product: "NVIDIA H100 80GB HBM3",
					Model: "H100-SXM5-80GB", MIGEnabled: true, MIGPending: true, Layout: "1g.10gb@6", Phase: v1alpha1.PhaseReady}}},
			}
			c := fake.NewClientBuilder().WithScheme(scheme()).WithObjects(node("node-a", map[string]string{"pool": "auto"}), nml, migClass(), claim, pod).
				WithInterceptorFuncs(interceptor.Funcs{List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
					if tc.forbidden(list) {
						return apierrors.NewForbidden(tc.resource, "", errors.New("no list"))
					}
					return c.List(ctx, list, opts...)
				}}).Build()
			e := &env{now: func() time.Time { return time.Unix(1060, 0) }, newClient: func() (client.Client, error) { return c, nil }}
			cmd := newRootCommandEnv(e)
			var out, errOut bytes.Buffer
			cmd.SetOut(&out)
			cmd.SetErr(&errOut)
			cmd.SetArgs([]string{"plan", "-f", "testdata/plan-auto.yaml"})
			if err := cmd.Execute(); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(errOut.String(), tc.wantWarning) {
				t.Errorf("no warning %q; stderr:\n%s", tc.wantWarning, errOut.String())
			}
			if !strings.Contains(out.String(), "ml/small fits existing free devices on node-a") {
				t.Errorf("no plan:\n%s", out.String())
			}
		})
	}
}
