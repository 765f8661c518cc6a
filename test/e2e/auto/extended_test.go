package auto

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/miglayout/miglayout/test/cluster/clustertest"
)

// TestAutoServesExtendedResources: a pod that asks for a MIG device the device-plugin
// way, `nvidia.com/mig-1g.10gb: 1` in its container's resources, is served through DRA
// (kube-scheduler's extended resources backed by a DeviceClass, GA in 1.37): a
// DeviceClass names that resource in spec.extendedResourceName, the planner counts the
// pod as demand for a 1g.10gb, repartitions a whole GPU, the scheduler binds the pod with
// a claim of its own allocated a 1g.10gb, and the node's kubelet has the agent prepare it.
func TestAutoServesExtendedResources(t *testing.T) {
	ctx := clustertest.Context(t, 2*time.Minute)
	wholeThenAuto(t, ctx)

	const resourceName = "nvidia.com/mig-1g.10gb"
	class := &resourceapi.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: "e2e-mig-1g.10gb"},
		Spec: resourceapi.DeviceClassSpec{
			ExtendedResourceName: ptr.To(resourceName),
			Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{
				Expression: "device.driver == 'mig.miglayout.io' && device.attributes['mig.miglayout.io'].profile == '1g.10gb'"}}},
		}}
	if _, err := env.Client.ResourceV1().DeviceClasses().Create(ctx, class, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = env.Client.ResourceV1().DeviceClasses().Delete(ctx, class.Name, metav1.DeleteOptions{})
	})

	ns := env.NewNamespace(t, ctx, "extended")
	one := corev1.ResourceList{resourceName: resource.MustParse("1")}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "legacy"},
		Spec: corev1.PodSpec{
			NodeSelector:                  autoNodes,
			TerminationGracePeriodSeconds: ptr.To(int64(0)),
			Containers: []corev1.Container{{
				Name: "cuda", Image: "nvcr.io/nvidia/cuda:12.9.0-base-ubuntu24.04", Command: []string{"nvidia-smi", "-L"},
				Resources: corev1.ResourceRequirements{Requests: one, Limits: one},
			}},
		},
	}
	env.CreatePod(t, ctx, pod)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = env.Client.CoreV1().Pods(ns).Delete(ctx, pod.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To(int64(0))})
	})

	waitPodEvent(t, ctx, ns, pod.Name, "WaitingForRepartition")
	clustertest.Poll(t, ctx, 60*time.Second, "pod legacy to run with a 1g.10gb of its own claim", func(ctx context.Context) (bool, string) {
		p, err := env.Client.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		st := p.Status.ExtendedResourceClaimStatus
		if p.Spec.NodeName == "" || st == nil {
			return false, fmt.Sprintf("node %q, extended resource claim status %v", p.Spec.NodeName, st)
		}
		c, err := env.Client.ResourceV1().ResourceClaims(ns).Get(ctx, st.ResourceClaimName, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		_, dev, ok := clustertest.Allocated(c)
		return ok && strings.Contains(dev, "-mig-1g10gb-") && p.Status.Phase == corev1.PodRunning,
			fmt.Sprintf("bound to %s, claim %s allocated %q, phase %s", p.Spec.NodeName, c.Name, dev, p.Status.Phase)
	})
}
