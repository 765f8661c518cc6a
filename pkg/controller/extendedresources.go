package controller

import (
	"slices"
	"strconv"
	"strings"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	resourcehelper "k8s.io/component-helpers/resource"
	"k8s.io/dynamic-resource-allocation/deviceclass/extendedresourcecache"
)

// extendedResourceClaimName is the name of the claim a pending pod's
// extended resources stand for in the planner's snapshot. kube-scheduler
// makes the real one when it binds the pod (DRAExtendedResource, GA in
// 1.37); the angle brackets keep it apart from any real claim's name, as
// the scheduler's own in-memory name "<extended-resources>" does.
const extendedResourceClaimName = "<extended-resources>"

// extendedResources is what deciding a pod's extended resource claim
// needs: the DeviceClasses that back extended resource names, and the pods
// kube-scheduler has made that claim for.
type extendedResources struct {
	classes *extendedresourcecache.ExtendedResourceCache
	// madeFor are the UIDs of the pods that control a claim annotated
	// resource.kubernetes.io/extended-resource-claim: "true": kube-scheduler
	// makes it in PreBind, allocates it, and only then names it in the
	// pod's status.extendedResourceClaimStatus.
	madeFor sets.Set[types.UID]
}

// newExtendedResources resolves extended resource names to the
// DeviceClasses that back them, as kube-scheduler does: a class's
// spec.extendedResourceName (the newest class where several name one), or
// the implicit deviceclass.resource.kubernetes.io/<class name>; and finds
// the pods whose extended resource claim kube-scheduler has made among
// claims, by annotation and controlling owner, as kube-scheduler finds it.
func newExtendedResources(classes []*resourceapi.DeviceClass, claims map[types.NamespacedName]*resourceapi.ResourceClaim) *extendedResources {
	// Filled once per snapshot: its event logs (V(5)) say nothing here.
	c := extendedresourcecache.NewExtendedResourceCache(logr.Discard())
	for _, class := range classes {
		c.OnAdd(class, true)
	}
	made := sets.New[types.UID]()
	for _, claim := range claims {
		if claim.Annotations[resourceapi.ExtendedResourceClaimAnnotation] != "true" {
			continue
		}
		if owner := metav1.GetControllerOfNoCopy(claim); owner != nil && owner.Kind == "Pod" {
			made.Insert(owner.UID)
		}
	}
	return &extendedResources{classes: c, madeFor: made}
}

// extendedResourceClaim returns the claim kube-scheduler would allocate for
// the pod's extended resource requests that DeviceClasses back: one request
// per resource name (in name order), ExactCount devices of its class, the
// count the pod's effective request (containers, sidecars and the largest
// init container, as for any resource); and those resource names. It
// returns nil for a pod without
// such requests, and for one whose claim the scheduler has made (the pod is
// being bound): the claim status.extendedResourceClaimStatus names exists
// in claims, or a claim the pod controls is annotated as its extended
// resource claim (ext.madeFor; made and allocated before the status names
// it). The scheduler writes that status before the binding completes and
// does not clear it when the binding fails (a device refused as draining,
// a binding timeout) and it deletes its claim: a pod that names a claim
// that is gone is demand again.
func extendedResourceClaim(pod *corev1.Pod, ext *extendedResources, claims map[types.NamespacedName]*resourceapi.ResourceClaim) (*resourceapi.ResourceClaim, []corev1.ResourceName) {
	if !asksExtendedResources(pod) || ext.madeFor.Has(pod.UID) {
		return nil, nil
	}
	if st := pod.Status.ExtendedResourceClaimStatus; st != nil {
		if _, ok := claims[types.NamespacedName{Namespace: pod.Namespace, Name: st.ResourceClaimName}]; ok {
			return nil, nil
		}
	}
	reqs := resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})
	names := make([]corev1.ResourceName, 0, len(reqs))
	for name := range reqs {
		names = append(names, name)
	}
	slices.Sort(names)
	var requests []resourceapi.DeviceRequest
	var backed []corev1.ResourceName
	for _, name := range names {
		q := reqs[name]
		count, ok := q.AsInt64()
		class := ext.classes.GetDeviceClass(name)
		if !ok || count <= 0 || class == nil || !extendedResourceName(name) {
			continue
		}
		backed = append(backed, name)
		requests = append(requests, resourceapi.DeviceRequest{
			Name: "extended-resource-" + strconv.Itoa(len(requests)),
			Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: class.Name,
				AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: count},
		})
	}
	if len(requests) == 0 {
		return nil, nil
	}
	return &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: extendedResourceClaimName + pod.Name, UID: pod.UID},
		Spec:       resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: requests}},
	}, backed
}

// asksExtendedResources reports whether a container of the pod requests a
// resource that DeviceClasses may back (extendedResourceName).
func asksExtendedResources(pod *corev1.Pod) bool {
	for _, cs := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for _, c := range cs {
			for name := range c.Resources.Requests {
				if extendedResourceName(name) {
					return true
				}
			}
		}
	}
	return false
}

// extendedResourceName reports whether name may be backed by a
// DeviceClass, as the scheduler decides it: an extended resource (a
// domain-qualified name not in a kubernetes.io domain, nor a quota
// "requests." name) or an implicit deviceclass.resource.kubernetes.io/<class>
// one.
func extendedResourceName(name corev1.ResourceName) bool {
	n := string(name)
	if strings.HasPrefix(n, resourceapi.ResourceDeviceClassPrefix) {
		return true
	}
	return strings.Contains(n, "/") && !strings.Contains(n, corev1.ResourceDefaultNamespacePrefix) && !strings.HasPrefix(n, "requests.")
}
