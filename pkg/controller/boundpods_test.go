package controller

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	resourcehelper "k8s.io/component-helpers/resource"
	"k8s.io/utils/ptr"
)

// TestTrimBoundPod: a bound pod trimmed for the cache still requests what
// it did (containers, a sidecar, an init container, overhead, pod-level
// resources, a resize in progress) and keeps what the planner reads of it,
// without its images, commands, environment and volumes.
func TestTrimBoundPod(t *testing.T) {
	cpu := func(v string) corev1.ResourceList {
		return corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(v)}
	}
	now := metav1.Now()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: "uid-p", DeletionTimestamp: &now, Labels: map[string]string{"app": "x"}},
		Spec: corev1.PodSpec{
			NodeName: "n1", Priority: ptr.To[int32](100), Overhead: cpu("250m"),
			InitContainers: []corev1.Container{
				{Name: "init", Image: "busybox", Resources: corev1.ResourceRequirements{Requests: cpu("3")}},
				{Name: "sidecar", Image: "envoy", RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways), Resources: corev1.ResourceRequirements{Requests: cpu("1")}},
			},
			Containers: []corev1.Container{{Name: "main", Image: "cuda", Command: []string{"train"}, Env: []corev1.EnvVar{{Name: "A", Value: "b"}},
				Resources: corev1.ResourceRequirements{Requests: cpu("2")}}},
			Volumes:        []corev1.Volume{{Name: "data"}},
			ResourceClaims: []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimName: ptr.To("c")}},
		},
		Status: corev1.PodStatus{Phase: corev1.PodRunning,
			ContainerStatuses: []corev1.ContainerStatus{{Name: "main", Image: "cuda", AllocatedResources: cpu("4"), Resources: &corev1.ResourceRequirements{Requests: cpu("4")}}}},
	}
	out, err := trimBoundPod(pod)
	if err != nil {
		t.Fatal(err)
	}
	trimmed := out.(*corev1.Pod)
	opts := resourcehelper.PodResourcesOptions{UseStatusResources: true}
	if diff := cmp.Diff(resourcehelper.PodRequests(pod, opts), resourcehelper.PodRequests(trimmed, opts)); diff != "" {
		t.Errorf("requests of the trimmed pod (-want +got):\n%s", diff)
	}
	if trimmed.Spec.NodeName != "n1" || *trimmed.Spec.Priority != 100 || trimmed.DeletionTimestamp == nil || trimmed.UID != "uid-p" ||
		trimmed.Status.Phase != corev1.PodRunning || len(trimmed.Spec.ResourceClaims) != 1 {
		t.Errorf("trimmed pod lost what the planner reads: %+v", trimmed)
	}
	if trimmed.Spec.Containers[0].Image != "" || trimmed.Spec.Containers[0].Env != nil || trimmed.Spec.Volumes != nil || trimmed.Labels != nil ||
		trimmed.Status.ContainerStatuses[0].Image != "" {
		t.Errorf("trimmed pod keeps what the planner does not read: %+v", trimmed)
	}
}
