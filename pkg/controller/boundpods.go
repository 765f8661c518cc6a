package controller

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// newBoundPodsCache is a cache of the pods bound to a node, trimmed to what
// the Auto planner reads of them (trimBoundPod): what they request of their
// node's allocatable resources (planner.Node.Requested) and whether they
// end (the devices their claims hold are releasing). The manager's own
// cache holds unbound pods only (the demand), less their bulk
// (TrimPendingPod).
func newBoundPodsCache(mgr ctrl.Manager) (cache.Cache, error) {
	c, err := cache.New(mgr.GetConfig(), cache.Options{
		Scheme: mgr.GetScheme(),
		Mapper: mgr.GetRESTMapper(),
		ByObject: map[client.Object]cache.ByObject{
			&corev1.Pod{}: {Field: fields.OneTermNotEqualSelector("spec.nodeName", ""), Transform: trimBoundPod},
		},
	})
	if err != nil {
		return nil, fmt.Errorf("creating the cache of bound pods: %w", err)
	}
	if err := mgr.Add(c); err != nil {
		return nil, fmt.Errorf("adding the cache of bound pods: %w", err)
	}
	return c, nil
}

// trimBoundPod keeps of a pod what the Auto planner reads of a bound one:
// its identity, node, priority, deletion, phase, the claims it uses, and
// the resources it requests as component-helpers' PodRequests counts them
// (containers', init containers' and sidecars' requests, overhead,
// pod-level resources, and the status's resources during an in-place
// resize). The rest (images, commands, environment, volumes, container
// states) stays out of memory.
func trimBoundPod(obj any) (any, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	trimmed := &corev1.Pod{
		TypeMeta: p.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: p.Name, UID: p.UID, ResourceVersion: p.ResourceVersion,
			CreationTimestamp: p.CreationTimestamp, DeletionTimestamp: p.DeletionTimestamp},
		Spec: corev1.PodSpec{NodeName: p.Spec.NodeName, Priority: p.Spec.Priority, PreemptionPolicy: p.Spec.PreemptionPolicy,
			Overhead: p.Spec.Overhead, Resources: p.Spec.Resources, ResourceClaims: p.Spec.ResourceClaims,
			Containers: trimContainers(p.Spec.Containers), InitContainers: trimContainers(p.Spec.InitContainers)},
		Status: corev1.PodStatus{Phase: p.Status.Phase, Conditions: p.Status.Conditions, Resources: p.Status.Resources,
			AllocatedResources: p.Status.AllocatedResources, ResourceClaimStatuses: p.Status.ResourceClaimStatuses,
			ContainerStatuses: trimStatuses(p.Status.ContainerStatuses), InitContainerStatuses: trimStatuses(p.Status.InitContainerStatuses)},
	}
	return trimmed, nil
}

func trimContainers(cs []corev1.Container) []corev1.Container {
	if cs == nil {
		return nil
	}
	out := make([]corev1.Container, len(cs))
	for i, c := range cs {
		out[i] = corev1.Container{Name: c.Name, Resources: c.Resources, RestartPolicy: c.RestartPolicy}
	}
	return out
}

func trimStatuses(ss []corev1.ContainerStatus) []corev1.ContainerStatus {
	if ss == nil {
		return nil
	}
	out := make([]corev1.ContainerStatus, len(ss))
	for i, s := range ss {
		out[i] = corev1.ContainerStatus{Name: s.Name, Resources: s.Resources, AllocatedResources: s.AllocatedResources}
	}
	return out
}
