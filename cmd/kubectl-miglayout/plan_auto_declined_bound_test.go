package main

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/miglayout/miglayout/api/v1alpha1"
	"github.com/miglayout/miglayout/pkg/controller"
)

// TestPlanAutoBoundsDeclinedNodesByTheFlag: a SchedulerDeclinedNode event
// leaves its node out of the pod's plans for at most 8 times
// --auto-declined-for, whatever length its note gives, as the controller
// reads it back: with --auto-declined-for 1m, a node left out "for 10m0s"
// 9 minutes ago is back in the pod's plans, one left out a minute ago is
// not.
func TestPlanAutoBoundsDeclinedNodesByTheFlag(t *testing.T) {
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
	// runWith's clock reads Unix time 1060.
	now := time.Unix(1060, 0)
	declined := func(ago time.Duration) *eventsv1.Event {
		return &eventsv1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: "small.declined"},
			Regarding:           corev1.ObjectReference{Kind: "Pod", Namespace: "ml", Name: "small", UID: pod.UID},
			ReportingController: controller.Name, Reason: controller.EventSchedulerDeclinedNode, Type: corev1.EventTypeWarning, EventTime: metav1.NewMicroTime(now.Add(-ago)),
			Note: "node node-a is left out of the pod's plans for 10m0s: free devices for the pod (gpu-0-mig-1g10gb-19-6) waited there for 1m0s and kube-scheduler did not bind it there; ..."}
	}
	for name, tc := range map[string]struct {
		ago  time.Duration
		want string
	}{
		"within the bound": {time.Minute, "serves:   ml/small"},
		"past the bound":   {9 * time.Minute, "ml/small fits existing free devices on node-a"},
	} {
		t.Run(name, func(t *testing.T) {
			objs := []client.Object{node("node-a", map[string]string{"pool": "auto"}), node("node-b", map[string]string{"pool": "auto"}),
				ready("node-a", "1g.10gb@6"), ready("node-b", "7g.80gb@0"), migClass(), claim.DeepCopy(), pod.DeepCopy(), declined(tc.ago)}
			out, _, err := runWith(t, objs, "plan", "--auto-declined-for", "1m", "-f", "testdata/plan-auto.yaml")
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(out, tc.want) {
				t.Errorf("node-a left out %s ago for 10m0s, --auto-declined-for 1m: plan does not say %q:\n%s", tc.ago, tc.want, out)
			}
		})
	}
}
