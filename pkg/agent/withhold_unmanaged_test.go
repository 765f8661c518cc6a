package agent

import (
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// TestDevicePluginWithholdsANodeWithoutNodeMigLayout: on a node no
// MigLayout manages whose kubelet advertises NVIDIA's device plugin
// resources, a pass publishes the pool without a device (the scheduler
// would allocate a GPU the device plugin hands out too), and the agent is
// ready; the pass starts the backoffs again, so that a GPU found
// unreadable once the plugin is gone is retried within about a second.
func TestDevicePluginWithholdsANodeWithoutNodeMigLayout(t *testing.T) {
	g := newRig(t, "2xA100-SXM4-80GB")
	g.setup(t, 0, "7g.80gb@0")
	r, c, _ := nodeReconcilerOn(t, g)
	if err := c.Delete(t.Context(), &v1alpha1.NodeMigLayout{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}); err != nil {
		t.Fatal(err)
	}
	if err := g.sim.LoseGPU(1); err != nil {
		t.Fatal(err)
	}
	req := ctrl.Request{NamespacedName: types.NamespacedName{Name: "n1"}}
	for range 10 { // the backoff grows
		if _, err := r.Reconcile(t.Context(), req); err != nil {
			t.Fatal(err)
		}
	}
	r.published.Store(false)
	node := gpuNode("u1", map[string]string{"nvidia.com/gpu": "1"})
	if err := c.Create(t.Context(), node); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Reconcile(t.Context(), req); err != nil {
		t.Fatal(err)
	}
	if devs := g.inv.last().devices; len(devs) != 0 {
		t.Errorf("published %v, want no device (GPU 0's withheld)", devs)
	}
	if err := r.Readyz(nil); err != nil {
		t.Errorf("Readyz after the pool was published without devices: %v", err)
	}
	node.Status.Allocatable["nvidia.com/gpu"] = resource.MustParse("0")
	if err := c.Status().Update(t.Context(), node); err != nil {
		t.Fatal(err)
	}
	res, err := r.Reconcile(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	if res.RequeueAfter <= 0 || res.RequeueAfter > 1500*time.Millisecond {
		t.Errorf("retry of the unreadable GPU after a withheld pass: after %s, want the backoff started again (at most 1.5s)", res.RequeueAfter)
	}
}

// TestReadyzNotAfterAFailedPass: a pass whose publication fails does not
// make the agent Ready.
func TestReadyzNotAfterAFailedPass(t *testing.T) {
	g := newRig(t, "1xA100-SXM4-80GB")
	g.setup(t, 0, "7g.80gb@0")
	r, _, _ := nodeReconcilerOn(t, g, spec(0, "7g.80gb@0"))
	g.inv.failRepublish = errors.New("the API server is unavailable")
	if _, err := r.Reconcile(t.Context(), ctrl.Request{NamespacedName: types.NamespacedName{Name: "n1"}}); err == nil {
		t.Fatal("the pass succeeded, though its publication failed")
	}
	if err := r.Readyz(nil); err == nil {
		t.Error("Ready after a pass that published nothing")
	}
}

// TestWithheldUnlistedGPUIsToldOnce: a GPU the spec does not list, withheld
// because NVIDIA's device plugin runs on the node, gets one
// DevicePluginActive warning; the passes after, while its row says so,
// record no other.
func TestWithheldUnlistedGPUIsToldOnce(t *testing.T) {
	g := newRig(t, "2xA100-SXM4-80GB")
	r, c, rec := nodeReconcilerOn(t, g, spec(0, "7g.80gb@0"))
	if err := c.Create(t.Context(), gpuNode("u1", map[string]string{"nvidia.com/gpu": "2"})); err != nil {
		t.Fatal(err)
	}
	req := ctrl.Request{NamespacedName: types.NamespacedName{Name: "n1"}}
	var told []string
	for range 3 {
		if _, err := r.Reconcile(t.Context(), req); err != nil {
			t.Fatal(err)
		}
		for len(rec.Events) > 0 {
			if e := <-rec.Events; strings.Contains(e, EventDevicePluginActive) && strings.Contains(e, "GPU 1:") {
				told = append(told, e)
			}
		}
	}
	if len(told) != 1 {
		t.Errorf("DevicePluginActive events of GPU 1 over three passes: %d, want one", len(told))
	}
}

// TestNodeChangedPassesANodeMadeAgain: an update of the node's Node whose
// UID differs (the Node deleted and made again while the watch was down:
// the informer's relist shows it as an update) makes a pass, though its
// device plugin resources are the same, and so does a new request to clear
// the Xid marks; a status update of other fields or another annotation
// does not.
func TestNodeChangedPassesANodeMadeAgain(t *testing.T) {
	for name, tc := range map[string]struct {
		old, new *corev1.Node
		want     bool
	}{
		"made again":            {old: gpuNode("u1", nil), new: gpuNode("u2", nil), want: true},
		"device plugin started": {old: gpuNode("u1", nil), new: gpuNode("u1", map[string]string{"nvidia.com/gpu": "1"}), want: true},
		"other fields":          {old: gpuNode("u1", nil), new: gpuNode("u1", map[string]string{"memory": "1Gi"}), want: false},
		"Xid clear requested":   {old: gpuNode("u1", nil), new: annotated(gpuNode("u1", nil), v1alpha1.AnnotationClearXids, `{"id":"1"}`), want: true},
		"other annotation":      {old: gpuNode("u1", nil), new: annotated(gpuNode("u1", nil), "example.com/note", "x"), want: false},
	} {
		t.Run(name, func(t *testing.T) {
			if got := nodeChanged.Update(event.UpdateEvent{ObjectOld: tc.old, ObjectNew: tc.new}); got != tc.want {
				t.Errorf("nodeChanged.Update = %v, want %v", got, tc.want)
			}
		})
	}
}

// annotated returns n with annotation key set to value.
func annotated(n *corev1.Node, key, value string) *corev1.Node {
	n.Annotations = map[string]string{key: value}
	return n
}
