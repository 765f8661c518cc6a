package controller

import (
	corev1 "k8s.io/api/core/v1"
)

// TrimPendingPod is the cache's transform of the pods not bound to a node
// (the Auto planner's demand): it drops what nothing of miglayout reads and
// what makes most of a batch pod's size: managed fields, annotations
// (kubectl's last-applied configuration among them), volumes, ephemeral
// containers, of each container and container status what the bound
// pods' transform drops too (trimContainers, trimStatuses: image, command,
// arguments, environment, mounts, probes, lifecycle, states), and the
// conditions' messages (the scheduler's, one line per reason over every
// node). It keeps what the planner reads: identity, labels and owners,
// scheduling constraints (node selector, affinity, tolerations, scheduling
// gates, scheduler name), priority and preemption policy, the claims and
// the resources requested, the nominated node, phase and conditions.
// An object that is not a pod is left as it is.
func TrimPendingPod(obj any) (any, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	p.ManagedFields, p.Annotations = nil, nil
	p.Spec.Volumes, p.Spec.EphemeralContainers = nil, nil
	p.Spec.Containers = trimContainers(p.Spec.Containers)
	p.Spec.InitContainers = trimContainers(p.Spec.InitContainers)
	for i := range p.Status.Conditions {
		p.Status.Conditions[i].Message = ""
	}
	p.Status.ContainerStatuses = trimStatuses(p.Status.ContainerStatuses)
	p.Status.InitContainerStatuses = trimStatuses(p.Status.InitContainerStatuses)
	p.Status.EphemeralContainerStatuses = nil
	return p, nil
}
