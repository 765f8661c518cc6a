package agent

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// gpuNode is the Node n1 with allocatable resources (name: count).
func gpuNode(uid types.UID, allocatable map[string]string) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", UID: uid}}
	n.Status.Allocatable = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("64")}
	for name, q := range allocatable {
		n.Status.Allocatable[corev1.ResourceName(name)] = resource.MustParse(q)
	}
	return n
}

func TestDevicePluginResources(t *testing.T) {
	tests := map[string]struct {
		allocatable map[string]string
		want        []string
	}{
		"none":                  {nil, nil},
		"whole GPUs":            {map[string]string{"nvidia.com/gpu": "8"}, []string{"nvidia.com/gpu: 8"}},
		"shared":                {map[string]string{"nvidia.com/gpu.shared": "32"}, []string{"nvidia.com/gpu.shared: 32"}},
		"mixed MIG strategy":    {map[string]string{"nvidia.com/mig-3g.40gb": "2", "nvidia.com/mig-1g.10gb": "1"}, []string{"nvidia.com/mig-1g.10gb: 1", "nvidia.com/mig-3g.40gb: 2"}},
		"stopped plugin (zero)": {map[string]string{"nvidia.com/gpu": "0"}, nil},
		"other vendors' kept":   {map[string]string{"amd.com/gpu": "4", "nvidia.com/gpudirect": "1"}, nil},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, devicePluginResources(gpuNode("u1", tc.allocatable))); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestDevicePluginWithholdsTheNode: where the node's kubelet advertises
// NVIDIA's device plugin resources, a pass publishes no device and changes
// no GPU, and the GPU says why; once the plugin's resources are gone, the
// next pass publishes and applies the spec. With AllowDevicePlugin the
// check is off.
func TestDevicePluginWithholdsTheNode(t *testing.T) {
	for _, allow := range []bool{false, true} {
		t.Run(map[bool]string{false: "default", true: "allowed"}[allow], func(t *testing.T) {
			g := newRig(t, "1xA100-SXM4-80GB")
			g.setup(t, 0, "7g.80gb@0")
			r, c, _ := nodeReconcilerOn(t, g, spec(0, "3g.40gb@0,3g.40gb@4"))
			r.AllowDevicePlugin = allow
			node := gpuNode("u1", map[string]string{"nvidia.com/gpu": "1"})
			if err := c.Create(t.Context(), node); err != nil {
				t.Fatal(err)
			}
			req := ctrl.Request{NamespacedName: types.NamespacedName{Name: "n1"}}
			if _, err := r.Reconcile(t.Context(), req); err != nil {
				t.Fatal(err)
			}
			var nml v1alpha1.NodeMigLayout
			if err := c.Get(t.Context(), types.NamespacedName{Name: "n1"}, &nml); err != nil {
				t.Fatal(err)
			}
			if allow {
				g.wantLayouts(t, "3g.40gb@0,3g.40gb@4")
				return
			}
			g.wantLayouts(t, "7g.80gb@0")
			if devs := g.inv.last().devices; len(devs) != 0 {
				t.Errorf("published %v, want no device", devs)
			}
			if len(nml.Status.GPUs) != 1 || nml.Status.GPUs[0].Reason != v1alpha1.ReasonDevicePluginActive ||
				!strings.Contains(nml.Status.GPUs[0].Message, "nvidia.com/gpu: 1") {
				t.Fatalf("status %+v, want GPU 0 DevicePluginActive naming nvidia.com/gpu", nml.Status.GPUs)
			}
			node.Status.Allocatable["nvidia.com/gpu"] = resource.MustParse("0")
			if err := c.Status().Update(t.Context(), node); err != nil {
				t.Fatal(err)
			}
			if _, err := r.Reconcile(t.Context(), req); err != nil {
				t.Fatal(err)
			}
			g.wantLayouts(t, "3g.40gb@0,3g.40gb@4")
			if devs := g.inv.last().devices; len(devs) != 2 {
				t.Errorf("published %v once the plugin's resources are gone, want both devices", devs)
			}
		})
	}
}

// TestNodeMadeAgainStopsTheAgent: the node's Node deleted and made again
// under its name while the agent runs: the pass fails and the agent is
// told to stop (its ResourceSlices name the old Node as their owner).
func TestNodeMadeAgainStopsTheAgent(t *testing.T) {
	g := newRig(t, "1xA100-SXM4-80GB")
	g.setup(t, 0, "7g.80gb@0")
	r, c, _ := nodeReconcilerOn(t, g, spec(0, "7g.80gb@0"))
	var told error
	r.OnNodeReplaced = func(err error) { told = err }
	if err := c.Create(t.Context(), gpuNode("u1", nil)); err != nil {
		t.Fatal(err)
	}
	req := ctrl.Request{NamespacedName: types.NamespacedName{Name: "n1"}}
	if _, err := r.Reconcile(t.Context(), req); err != nil || told != nil {
		t.Fatalf("first pass: %v, told %v", err, told)
	}
	if err := c.Delete(t.Context(), gpuNode("u1", nil)); err != nil {
		t.Fatal(err)
	}
	if err := c.Create(t.Context(), gpuNode("u2", nil)); err != nil {
		t.Fatal(err)
	}
	_, err := r.Reconcile(t.Context(), req)
	if err == nil || told == nil || !errors.Is(err, told) && err.Error() != told.Error() || !strings.Contains(err.Error(), "u2") {
		t.Errorf("pass after the Node was made again: %v, told %v; want both naming the new UID", err, told)
	}
}
