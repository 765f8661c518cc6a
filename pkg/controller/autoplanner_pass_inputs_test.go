package controller

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	migslices "github.com/miglayout/miglayout/pkg/slices"
)

// TestPendingPodsSelectorLabelsWakeThePlanner: after a pass, a node
// relabelled on a key a pending pod's nodeSelector reads wakes the
// planner (the pod may fit there now, or no longer), while a label nothing
// selects on does not.
func TestPendingPodsSelectorLabelsWakeThePlanner(t *testing.T) {
	ml := autoMigLayout("auto", nil)
	n1 := node("n1", map[string]string{"pool": "auto", "zone": "a", "nvidia.com/gfd.timestamp": "1"})
	p := autoPod("p1", h0(), "c1")
	p.Spec.NodeSelector = map[string]string{"zone": "b"}
	h := newAutoCluster(t, ml, n1, autoNML("n1", ml, a100(0).layout("7g.80gb@0")), autoClaim("c1", profileSelector("3g.40gb")), p)
	if _, err := h.a.Reconcile(context.Background(), autoKey); err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		key, value string
		want       bool
	}{
		"the label the pod selects on": {"zone", "b", true},
		"a label nothing selects on":   {"nvidia.com/gfd.timestamp", "2", false},
	} {
		t.Run(name, func(t *testing.T) {
			after := n1.DeepCopy()
			after.Labels[tc.key] = tc.value
			if got := h.a.nodeChangeMatters(n1, after); got != tc.want {
				t.Errorf("wakes the planner = %t, want %t (label keys %v)", got, tc.want, h.a.labelKeys)
			}
		})
	}
}

// TestPassCountsPendingPods: a pass sets the pending pods gauge to the
// pods it found pending.
func TestPassCountsPendingPods(t *testing.T) {
	ml := autoMigLayout("auto", nil)
	h := newAutoCluster(t, ml, node("n1", map[string]string{"pool": "auto"}), autoNML("n1", ml, a100(0).layout("7g.80gb@0")),
		autoClaim("c1", profileSelector("3g.40gb")), autoPod("p1", h0(), "c1"),
		autoClaim("c2", profileSelector("1g.10gb")), autoPod("p2", h0(), "c2"))
	pendingDemand.Set(0)
	if _, err := h.a.Reconcile(context.Background(), autoKey); err != nil {
		t.Fatal(err)
	}
	if got := testutil.ToFloat64(pendingDemand); got != 2 {
		t.Errorf("miglayout_pending_pods = %v, want 2", got)
	}
}

// TestBoundPodsAreReadFromTheirOwnCache: the pods bound to nodes are read
// from BoundPods (the manager's cache holds only unbound pods): a running
// pod there takes 6 of n1's 8 CPUs, so a pending pod of 4 CPUs, which
// kube-scheduler would not bind to n1, gets no change there.
func TestBoundPodsAreReadFromTheirOwnCache(t *testing.T) {
	ml := autoMigLayout("auto", nil)
	h := newAutoCluster(t, ml, eightCPUs(node("n1", map[string]string{"pool": "auto"})), autoNML("n1", ml, a100(0).layout("7g.80gb@0")),
		autoClaim("c1", profileSelector("1g.10gb")), cpus(autoPod("p1", h0(), "c1"), "4"))
	busy := runningPod("busy", corev1.PodRunning, false)
	busy.Spec.NodeName = "n1"
	h.a.BoundPods = fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(cpus(&busy, "6")).Build()
	h.settle()
	if got := h.specOf("n1"); len(got) != 0 {
		t.Errorf("n1's spec %v written for a pod that does not fit beside the pods bound there", got)
	}
}

// TestDeviceTaintRulesReadWhereServed: where the API server serves
// DeviceTaintRules, the pass reads them: a NoExecute rule on all of n1's
// devices leaves n1 out of the plan, and the pending pod gets no change
// there.
func TestDeviceTaintRulesReadWhereServed(t *testing.T) {
	ml := autoMigLayout("auto", nil)
	maintenance := &resourceapi.DeviceTaintRule{ObjectMeta: metav1.ObjectMeta{Name: "n1-maintenance"},
		Spec: resourceapi.DeviceTaintRuleSpec{DeviceSelector: &resourceapi.DeviceTaintSelector{Driver: ptr.To(migslices.DefaultDriverName), Pool: ptr.To("n1")},
			Taint: resourceapi.DeviceTaint{Key: "maintenance", Effect: resourceapi.DeviceTaintEffectNoExecute}}}
	h := newAutoCluster(t, ml, node("n1", map[string]string{"pool": "auto"}), autoNML("n1", ml, a100(0).layout("7g.80gb@0")),
		autoClaim("c1", profileSelector("1g.10gb")), autoPod("p1", h0(), "c1"), maintenance)
	h.a.taintRules = true
	h.settle()
	if got := h.specOf("n1"); len(got) != 0 {
		t.Errorf("n1's spec %v written while a DeviceTaintRule takes all its devices out", got)
	}
}
