package controller

import (
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/resourceclaim"

	"github.com/miglayout/miglayout/pkg/planner"
)

// pendingPods returns the pods the scheduler could not place that wait for
// ResourceClaims, each with its claims not allocated yet, or for extended
// resources that DeviceClasses back (classes; the claim the scheduler
// would make for them, see extendedResourceClaim). A pod whose generated
// claims do not exist yet, or one of whose claims is being deleted or was
// made for another pod (podClaim), is left for a later pass. A claim shared by
// several pending pods is in each (the planner makes its devices once).
// A pod with a nominated node (status.nominatedNodeName: kube-scheduler
// preempts pods there to make room for it) is planned on that node only
// where it is one of autoNodes (the Auto-mode nodes planned): it runs there
// once its victims are gone, on devices free there (the scheduler's DRA
// plugin never frees a victim's device, so it nominates a node only where
// the pod's devices are free), which the plan keeps for it rather than hand
// to another pod; a change planned elsewhere would destroy free devices for
// nothing. Nominated to another node, it is no Auto demand at all. The
// scheduler clears the nomination when the room does not come; the pod is
// planned anywhere then. Only the pods of a scheduler plans (nil: every
// one) are Auto demand.
func pendingPods(pods []corev1.Pod, claims map[types.NamespacedName]*resourceapi.ResourceClaim, classes *extendedResources, autoNodes sets.Set[string], plans func(*corev1.Pod) bool) []planner.Pod {
	var out []planner.Pod
	for i := range pods {
		pod := &pods[i]
		if pod.Spec.NodeName != "" || pod.DeletionTimestamp != nil || !unschedulable(pod) || plans != nil && !plans(pod) {
			continue
		}
		extended, backed := extendedResourceClaim(pod, classes, claims)
		if len(pod.Spec.ResourceClaims) == 0 && extended == nil {
			continue
		}
		p := planner.Pod{Pod: pod}
		if n := pod.Status.NominatedNodeName; n != "" {
			if !autoNodes.Has(n) {
				continue // going to a node Auto mode does not plan
			}
			p.AllocatedOn = append(p.AllocatedOn, &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{n}}},
			}}})
		}
		if extended != nil {
			p.Claims = append(p.Claims, extended)
			p.ExtendedResources = backed
		}
		complete := true
		for j := range pod.Spec.ResourceClaims {
			c, needed := podClaim(pod, &pod.Spec.ResourceClaims[j], claims)
			if !needed {
				continue
			}
			if c == nil || c.DeletionTimestamp != nil {
				// Not made yet, another pod's, or being deleted:
				// kube-scheduler does not place the pod (its
				// PreFilter refuses it until the claim is made).
				complete = false
				break
			}
			switch a := c.Status.Allocation; {
			case a == nil:
				p.Claims = append(p.Claims, c)
			case a.NodeSelector != nil:
				p.AllocatedOn = append(p.AllocatedOn, a.NodeSelector)
			}
		}
		if complete && len(p.Claims) > 0 {
			out = append(out, p)
		}
	}
	return out
}

// podClaim is the ResourceClaim of claims a pod's entry refers to, found
// as kube-scheduler finds it (resourceclaim.Name, then, for a claim made
// from a template, resourceclaim.IsForPod): needed is false when the pod's
// status says no claim was needed for the entry (its resourceClaimName is
// unset), which is then ignored, as the scheduler and kubelet do. c is nil
// while the claim is not made yet, is not in claims, or was made for
// another pod (an earlier pod of the same name; the scheduler refuses the
// pod until the claim is made again) or an entry's API field this version
// does not know.
func podClaim(pod *corev1.Pod, rc *corev1.PodResourceClaim, claims map[types.NamespacedName]*resourceapi.ResourceClaim) (c *resourceapi.ResourceClaim, needed bool) {
	name, mustCheckOwner, err := resourceclaim.Name(pod, rc)
	switch {
	case err != nil:
		return nil, true
	case name == nil:
		return nil, false
	}
	c = claims[types.NamespacedName{Namespace: pod.Namespace, Name: *name}]
	// A claim a PodGroup owns serves the PodGroup's pods: accepted, as
	// the scheduler does with DRAWorkloadResourceClaims on (without it,
	// no PodGroup owns a claim).
	if c != nil && mustCheckOwner && resourceclaim.IsForPod(pod, c, true) != nil {
		return nil, true
	}
	return c, true
}

// unschedulable reports whether the scheduler tried the pod and failed.
func unschedulable(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			return true
		}
	}
	return false
}
