package agent

import (
	"context"
	"fmt"
	"runtime"
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
)

// BenchmarkInUse: what a pass reads to know which devices run processes,
// on a node of 8 A100s cut into seven 1g.10gb each (56 MIG devices).
// Reported per call of inUse (a pass makes two or three).
func BenchmarkInUse(b *testing.B) {
	g := newRig(b, "8xA100-SXM4-80GB")
	for idx := range 8 {
		g.setup(b, idx, "1g.10gb@0,1g.10gb@1,1g.10gb@2,1g.10gb@3,1g.10gb@4,1g.10gb@5,1g.10gb@6")
	}
	ctx := context.Background()
	obs, _, err := g.r.observe(ctx)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := g.r.inUse(ctx, obs, false); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkClaimCache: the heap a ResourceClaim allocated on another node
// keeps in the agent's cache: unchanged (as the API server sends it), whole
// (managed fields dropped, as every object's are) and reduced by
// ClaimTransform; reported as
// retained-B/claim over 2000 claims shaped as the scheduler leaves a
// template's claim (two managed-field entries, a CEL selector, an
// allocation with a node selector, a reservation).
func BenchmarkClaimCache(b *testing.B) {
	const n = 2000
	for name, transform := range map[string]func(any) (any, error){
		"unchanged": func(o any) (any, error) { return o, nil },
		"whole":     cache.TransformStripManagedFields(),
		"reduced":   ClaimTransform(testDriver, "this-node"),
	} {
		b.Run(name, func(b *testing.B) {
			var retained float64
			for b.Loop() {
				kept := make([]any, 0, n)
				var before, after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				for i := range n {
					obj, err := transform(scheduledClaim(i))
					if err != nil {
						b.Fatal(err)
					}
					kept = append(kept, obj)
				}
				runtime.GC()
				runtime.ReadMemStats(&after)
				retained = float64(after.HeapAlloc-before.HeapAlloc) / n
				runtime.KeepAlive(kept)
			}
			b.ReportMetric(retained, "retained-B/claim")
		})
	}
}

// scheduledClaim is claim i of a ResourceClaimTemplate, allocated a MIG
// device on another node, as the API server returns it.
func scheduledClaim(i int) *resourceapi.ResourceClaim {
	now := metav1.Now()
	name, pod := fmt.Sprintf("train-%d-gpu-x7k2p", i), fmt.Sprintf("train-%d", i)
	uid, podUID := types.UID(fmt.Sprintf("0b6f1c5e-3c4d-4f6a-9d1e-%012d", i)), types.UID(fmt.Sprintf("1b6f1c5e-3c4d-4f6a-9d1e-%012d", i))
	fields := metav1.NewFieldsV1
	return &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: name, GenerateName: fmt.Sprintf("train-%d-gpu-", i), UID: uid,
			ResourceVersion: fmt.Sprint(100000 + i), CreationTimestamp: now,
			Annotations:     map[string]string{"resource.kubernetes.io/pod-claim-name": "gpu"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: pod, UID: podUID, Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}},
			Finalizers:      []string{"resource.kubernetes.io/delete-protection"},
			ManagedFields: []metav1.ManagedFieldsEntry{
				{Manager: "kube-controller-manager", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "resource.k8s.io/v1", Time: &now, FieldsType: "FieldsV1",
					FieldsV1: fields(`{"f:metadata":{"f:annotations":{".":{},"f:resource.kubernetes.io/pod-claim-name":{}},"f:generateName":{},"f:ownerReferences":{".":{},"k:{\"uid\":\"` + string(podUID) + `\"}":{}}},"f:spec":{"f:devices":{"f:requests":{}}}}`)},
				{Manager: "kube-scheduler", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "resource.k8s.io/v1", Time: &now, Subresource: "status", FieldsType: "FieldsV1",
					FieldsV1: fields(`{"f:status":{"f:allocation":{".":{},"f:allocationTimestamp":{},"f:devices":{".":{},"f:results":{}},"f:nodeSelector":{}},"f:reservedFor":{".":{},"k:{\"resource\":\"pods\",\"uid\":\"` + string(podUID) + `\"}":{}}}}`)},
			}},
		Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{Name: "gpu", Exactly: &resourceapi.ExactDeviceRequest{
			DeviceClassName: "mig.miglayout.io", AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 1,
			Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: `device.attributes["mig.miglayout.io"].profile == "3g.40gb"`}}}}}}}},
		Status: resourceapi.ResourceClaimStatus{
			Allocation: &resourceapi.AllocationResult{AllocationTimestamp: &now,
				Devices:      resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{{Request: "gpu", Driver: testDriver, Pool: "other-node", Device: "gpu-3-mig-3g40gb-9-4"}}},
				NodeSelector: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{"other-node"}}}}}}},
			ReservedFor: []resourceapi.ResourceClaimConsumerReference{{Resource: "pods", Name: pod, UID: podUID}},
		},
	}
}
