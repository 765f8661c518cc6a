package controller

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// A trimmed bound pod keeps each field the planner reads of it, of the pod
// and of its containers and their statuses, and nothing else; an object
// that is not a pod is left as it is.
func TestTrimBoundPodKeepsWhatThePlannerReads(t *testing.T) {
	cpu := func(v string) corev1.ResourceList {
		return corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(v)}
	}
	created, deleted := metav1.Unix(100, 0), metav1.Unix(200, 0)
	preempt := corev1.PreemptLowerPriority
	container := func(name string) corev1.Container {
		return corev1.Container{Name: name, Resources: corev1.ResourceRequirements{Requests: cpu("1")}, RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways)}
	}
	status := func(name string) corev1.ContainerStatus {
		return corev1.ContainerStatus{Name: name, Resources: &corev1.ResourceRequirements{Requests: cpu("2")}, AllocatedResources: cpu("3")}
	}
	want := &corev1.Pod{
		TypeMeta: metav1.TypeMeta{Kind: "Pod", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: "uid-p", ResourceVersion: "7",
			CreationTimestamp: created, DeletionTimestamp: &deleted},
		Spec: corev1.PodSpec{NodeName: "n1", Priority: ptr.To[int32](10), PreemptionPolicy: &preempt,
			Overhead: cpu("100m"), Resources: &corev1.ResourceRequirements{Requests: cpu("4")},
			ResourceClaims: []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimName: ptr.To("c")}},
			Containers:     []corev1.Container{container("main")}, InitContainers: []corev1.Container{container("init")}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning,
			Conditions:            []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}},
			Resources:             &corev1.ResourceRequirements{Requests: cpu("5")},
			AllocatedResources:    cpu("6"),
			ResourceClaimStatuses: []corev1.PodResourceClaimStatus{{Name: "gpu", ResourceClaimName: ptr.To("c")}},
			ContainerStatuses:     []corev1.ContainerStatus{status("main")}, InitContainerStatuses: []corev1.ContainerStatus{status("init")}},
	}
	pod := want.DeepCopy()
	pod.Labels, pod.Annotations = map[string]string{"app": "x"}, map[string]string{"note": "y"}
	pod.Spec.Volumes = []corev1.Volume{{Name: "data"}}
	pod.Spec.Containers[0].Image, pod.Spec.InitContainers[0].Command = "cuda", []string{"prepare"}
	pod.Status.ContainerStatuses[0].Image, pod.Status.InitContainerStatuses[0].ImageID = "cuda", "sha"
	pod.Status.HostIP = "10.0.0.1"
	got, err := trimBoundPod(pod)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("trimmed pod (-want +got):\n%s", diff)
	}
	n := node("n1", nil)
	if got, err := trimBoundPod(n); err != nil || got != any(n) {
		t.Errorf("trimBoundPod(a node) = %v, %v; want the node as it is", got, err)
	}
}
