package controller

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// extPod is a pod the scheduler found unschedulable whose containers
// request the given extended resources (name, count per container).
func extPod(name string, init map[string]int64, containers ...map[string]int64) corev1.Pod {
	p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: name, UID: types.UID(name + "-uid")},
		Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable}}}}
	list := func(m map[string]int64) corev1.ResourceList {
		out := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}
		for n, q := range m {
			out[corev1.ResourceName(n)] = *resource.NewQuantity(q, resource.DecimalSI)
		}
		return out
	}
	if init != nil {
		p.Spec.InitContainers = []corev1.Container{{Name: "init", Resources: corev1.ResourceRequirements{Requests: list(init), Limits: list(init)}}}
	}
	for i, c := range containers {
		p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "c" + string(rune('0'+i)), Resources: corev1.ResourceRequirements{Requests: list(c), Limits: list(c)}})
	}
	return p
}

func TestPendingPodsExtendedResources(t *testing.T) {
	classes := []*resourceapi.DeviceClass{
		{ObjectMeta: metav1.ObjectMeta{Name: "mig.miglayout.io"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "mig-1g.10gb"}, Spec: resourceapi.DeviceClassSpec{ExtendedResourceName: ptr.To("nvidia.com/mig-1g.10gb")}},
	}
	// want are, per pod, its claims' requests as class×count.
	type req struct {
		Class string
		Count int64
	}
	binding := func(name string) corev1.Pod {
		p := extPod(name, nil, map[string]int64{"nvidia.com/mig-1g.10gb": 1})
		p.Status.ExtendedResourceClaimStatus = &corev1.PodExtendedResourceClaimStatus{ResourceClaimName: name + "-extended-resources-x",
			RequestMappings: []corev1.ContainerExtendedResourceRequest{{ContainerName: "c0", ResourceName: "nvidia.com/mig-1g.10gb", RequestName: "container-1-request-0"}}}
		return p
	}
	made := map[types.NamespacedName]*resourceapi.ResourceClaim{{Namespace: "ml", Name: "f-extended-resources-x"}: {}}
	// madeFor is the claim kube-scheduler's PreBind makes for the pod of
	// that name and UID, allocated before the pod's status names it.
	madeFor := func(name string, uid types.UID) map[types.NamespacedName]*resourceapi.ResourceClaim {
		c := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: name + "-extended-resources-y",
			Annotations:     map[string]string{resourceapi.ExtendedResourceClaimAnnotation: "true"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: name, UID: uid, Controller: ptr.To(true)}}},
			Status: resourceapi.ResourceClaimStatus{Allocation: &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{{
				Request: "container-1-request-0", Driver: "mig.miglayout.io", Pool: "n1", Device: "gpu-0-mig-1g10gb-19-6"}}}}}}
		return map[types.NamespacedName]*resourceapi.ResourceClaim{{Namespace: "ml", Name: c.Name}: c}
	}
	const one, implicit = corev1.ResourceName("nvidia.com/mig-1g.10gb"), corev1.ResourceName("deviceclass.resource.kubernetes.io/mig.miglayout.io")
	tests := map[string]struct {
		pod    corev1.Pod
		claims map[types.NamespacedName]*resourceapi.ResourceClaim
		want   map[string][]req
		// wantNames are the pod's extended resources the claim stands for
		// (planner.Pod.ExtendedResources).
		wantNames []corev1.ResourceName
	}{
		"a class's extendedResourceName": {
			pod:       extPod("a", nil, map[string]int64{"nvidia.com/mig-1g.10gb": 1}),
			want:      map[string][]req{"ml/a": {{"mig-1g.10gb", 1}}},
			wantNames: []corev1.ResourceName{one},
		},
		"the implicit name of a class, summed over containers": {
			pod:       extPod("b", nil, map[string]int64{"deviceclass.resource.kubernetes.io/mig.miglayout.io": 1}, map[string]int64{"deviceclass.resource.kubernetes.io/mig.miglayout.io": 2}),
			want:      map[string][]req{"ml/b": {{"mig.miglayout.io", 3}}},
			wantNames: []corev1.ResourceName{implicit},
		},
		"an init container asking more than the containers": {
			pod:       extPod("c", map[string]int64{"nvidia.com/mig-1g.10gb": 3}, map[string]int64{"nvidia.com/mig-1g.10gb": 1}),
			want:      map[string][]req{"ml/c": {{"mig-1g.10gb", 3}}},
			wantNames: []corev1.ResourceName{one},
		},
		"two resources: one request each, in name order": {
			pod:       extPod("d", nil, map[string]int64{"nvidia.com/mig-1g.10gb": 1, "deviceclass.resource.kubernetes.io/mig.miglayout.io": 1}),
			want:      map[string][]req{"ml/d": {{"mig.miglayout.io", 1}, {"mig-1g.10gb", 1}}},
			wantNames: []corev1.ResourceName{implicit, one},
		},
		"a resource no class backs (a device plugin's): not demand": {
			pod:  extPod("e", nil, map[string]int64{"example.com/fpga": 1}),
			want: map[string][]req{},
		},
		"the scheduler made its claim already (binding)": {
			pod: binding("f"), claims: made,
			want: map[string][]req{},
		},
		// kube-scheduler's PreBind makes the claim, allocates it, then
		// names it in the pod's status: in between, the claim is found
		// as kube-scheduler finds it, by annotation and controlling pod.
		"the scheduler made and allocated its claim, not named in the status yet": {
			pod: extPod("h", nil, map[string]int64{"nvidia.com/mig-1g.10gb": 1}), claims: madeFor("h", "h-uid"),
			want: map[string][]req{},
		},
		"a claim made for another pod of the name (deleted and made again)": {
			pod: extPod("i", nil, map[string]int64{"nvidia.com/mig-1g.10gb": 1}), claims: madeFor("i", "old-uid"),
			want:      map[string][]req{"ml/i": {{"mig-1g.10gb", 1}}},
			wantNames: []corev1.ResourceName{one},
		},
		// The scheduler writes the status before the binding completes
		// and leaves it when the binding fails and it deletes its claim
		// (a device refused as draining, a binding timeout).
		"the scheduler's claim deleted after a failed binding: demand again": {
			pod:       binding("g"),
			want:      map[string][]req{"ml/g": {{"mig-1g.10gb", 1}}},
			wantNames: []corev1.ResourceName{one},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := map[string][]req{}
			for _, p := range pendingPods([]corev1.Pod{tc.pod}, tc.claims, newExtendedResources(classes, tc.claims), nil, nil) {
				var rs []req
				for _, c := range p.Claims {
					for _, r := range c.Spec.Devices.Requests {
						rs = append(rs, req{r.Exactly.DeviceClassName, r.Exactly.Count})
					}
				}
				got[p.Pod.Namespace+"/"+p.Pod.Name] = rs
				if diff := cmp.Diff(tc.wantNames, p.ExtendedResources); diff != "" {
					t.Errorf("extended resources the claim stands for (-want +got):\n%s", diff)
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("pending pods' requests (-want +got):\n%s", diff)
			}
		})
	}
}
