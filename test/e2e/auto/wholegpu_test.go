package auto

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/miglayout/miglayout/api/v1alpha1"
	"github.com/miglayout/miglayout/test/cluster/clustertest"
)

// wholeGPUClass is the DeviceClass of whole GPUs (MIG mode off).
const wholeGPUClass = "gpu.miglayout.io"

// TestAutoPlansBesideAWholeGPU: GPU 1 of each Auto node has MIG mode off
// (a Static rule; Auto mode never changes MIG mode), published whole. A
// pod asks for a 3g.40gb MIG device and a whole GPU: the planner reads the
// free whole GPUs from miglayout's own ResourceSlices, repartitions GPU 0
// of a node, and the pod is bound there with both.
func TestAutoPlansBesideAWholeGPU(t *testing.T) {
	ctx := clustertest.Context(t, 3*time.Minute)
	staticThenAuto(t, ctx,
		v1alpha1.LayoutRule{Name: "whole", GPUIndices: []int32{0}, Profiles: map[string]int32{"7g.80gb": 1}},
		v1alpha1.LayoutRule{Name: "off", GPUIndices: []int32{1}, MIGEnabled: ptr.To(false)})

	ns := env.NewNamespace(t, ctx, "beside")
	env.CreateClaim(t, ctx, ns, "mixed-gpu", `device.attributes['mig.miglayout.io'].profile == '3g.40gb'`)
	if _, err := env.Client.ResourceV1().ResourceClaims(ns).Create(ctx, &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "mixed-whole"},
		Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{
			Name: "gpu", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: wholeGPUClass,
				AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 1}}}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod := clustertest.Pod(ns, "mixed", autoNodes, "mixed-gpu", "")
	pod.Spec.ResourceClaims = append(pod.Spec.ResourceClaims, corev1.PodResourceClaim{Name: "whole", ResourceClaimName: ptr.To("mixed-whole")})
	pod.Spec.Containers[0].Resources.Claims = append(pod.Spec.Containers[0].Resources.Claims, corev1.ResourceClaim{Name: "whole"})
	env.CreatePod(t, ctx, pod)

	clustertest.Poll(t, ctx, 90*time.Second, "pod mixed to be bound with a 3g.40gb and a whole GPU of its node", func(ctx context.Context) (bool, string) {
		p, err := env.Client.CoreV1().Pods(ns).Get(ctx, "mixed", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		migPool, migDev, ok1 := clustertest.Allocated(env.GetClaim(t, ctx, ns, "mixed-gpu"))
		wholePool, wholeDev, ok2 := clustertest.Allocated(env.GetClaim(t, ctx, ns, "mixed-whole"))
		node := p.Spec.NodeName
		return node != "" && ok1 && ok2 && migPool == node && wholePool == node && strings.HasPrefix(migDev, "gpu-0-mig-") && wholeDev == "gpu-1",
			fmt.Sprintf("bound to %q, MIG device %s/%s, whole GPU %s/%s", node, migPool, migDev, wholePool, wholeDev)
	})
}
