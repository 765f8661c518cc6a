package planner

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// gpuResource is the extended resource a device plugin serves and a
// DeviceClass may back (DeviceClassSpec.ExtendedResourceName).
const gpuResource = corev1.ResourceName("nvidia.com/gpu")

// withPluginGPUs sets n's allocatable: room for pods, and count
// gpuResource (a device plugin serves it where count is above 0; "": the
// node does not list it).
func withPluginGPUs(n Node, count string) Node {
	n.Node.Status.Allocatable = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("64"), corev1.ResourceMemory: resource.MustParse("512Gi"),
		corev1.ResourcePods: resource.MustParse("110")}
	if count != "" {
		n.Node.Status.Allocatable[gpuResource] = resource.MustParse(count)
	}
	return n
}

// asExtendedResource makes p ask for one gpuResource, its first claim the
// one kube-scheduler makes for it from the DeviceClass that backs it.
func asExtendedResource(p Pod) Pod {
	p.Claims[0].Name = "<extended-resources>" + p.Pod.Name
	p.ExtendedResources = []corev1.ResourceName{gpuResource}
	p.Pod.Spec.Containers = []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{gpuResource: resource.MustParse("1")}}}}
	return p
}
