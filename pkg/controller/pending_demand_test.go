package controller

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/utils/ptr"
)

// TestPendingPodsAreUnschedulableUnboundAndComplete: a pod is Auto-mode
// demand only while kube-scheduler has tried it and found it unschedulable
// (not while it waits for its scheduling gates), it is bound to no node, it
// is not being deleted, and every claim it names exists and is not being
// deleted: a pod whose claims are not all there yet is left for a later
// pass rather than planned for some of them.
func TestPendingPodsAreUnschedulableUnboundAndComplete(t *testing.T) {
	unsched := []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable}}
	claims := map[types.NamespacedName]*resourceapi.ResourceClaim{
		{Namespace: "ns", Name: "c1"}: {ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c1"}},
		{Namespace: "ns", Name: "c2"}: {ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c2"}},
		{Namespace: "ns", Name: "going"}: {ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "going", DeletionTimestamp: ptr.To(metav1.Now()),
			Finalizers: []string{"resource.kubernetes.io/delete-protection"}}},
	}
	claimNamed := func(entry, name string) corev1.PodResourceClaim {
		return corev1.PodResourceClaim{Name: entry, ResourceClaimName: ptr.To(name)}
	}
	tests := map[string]struct {
		pod corev1.Pod
		// want is the pod's claims as planned, nil where it is no demand.
		want []string
	}{
		"unschedulable, waiting for its claim": {
			pod:  corev1.Pod{Spec: corev1.PodSpec{ResourceClaims: []corev1.PodResourceClaim{claimNamed("gpu", "c1")}}, Status: corev1.PodStatus{Conditions: unsched}},
			want: []string{"c1"},
		},
		"bound to a node": {
			pod: corev1.Pod{Spec: corev1.PodSpec{NodeName: "n1", ResourceClaims: []corev1.PodResourceClaim{claimNamed("gpu", "c1")}}, Status: corev1.PodStatus{Conditions: unsched}},
		},
		"being deleted": {
			pod: corev1.Pod{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: ptr.To(metav1.Now())},
				Spec: corev1.PodSpec{ResourceClaims: []corev1.PodResourceClaim{claimNamed("gpu", "c1")}}, Status: corev1.PodStatus{Conditions: unsched}},
		},
		"held by its scheduling gates": {
			pod: corev1.Pod{Spec: corev1.PodSpec{SchedulingGates: []corev1.PodSchedulingGate{{Name: "example.com/gate"}}, ResourceClaims: []corev1.PodResourceClaim{claimNamed("gpu", "c1")}},
				Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonSchedulingGated}}}},
		},
		"one of its claims does not exist yet": {
			pod: corev1.Pod{Spec: corev1.PodSpec{ResourceClaims: []corev1.PodResourceClaim{claimNamed("gpu", "c1"), claimNamed("more", "c3")}},
				Status: corev1.PodStatus{Conditions: unsched}},
		},
		"the claim of one of its templates is not generated yet": {
			pod: corev1.Pod{Spec: corev1.PodSpec{ResourceClaims: []corev1.PodResourceClaim{claimNamed("gpu", "c1"), {Name: "more", ResourceClaimTemplateName: ptr.To("t")}}},
				Status: corev1.PodStatus{Conditions: unsched}},
		},
		// kube-scheduler's PreFilter: "resourceclaim going is being
		// deleted", unschedulable until the pod is replaced.
		"one of its claims is being deleted": {
			pod: corev1.Pod{Spec: corev1.PodSpec{ResourceClaims: []corev1.PodResourceClaim{claimNamed("gpu", "c1"), claimNamed("shared", "going")}},
				Status: corev1.PodStatus{Conditions: unsched}},
		},
		"both its claims exist": {
			pod: corev1.Pod{Spec: corev1.PodSpec{ResourceClaims: []corev1.PodResourceClaim{claimNamed("gpu", "c1"), claimNamed("more", "c2")}},
				Status: corev1.PodStatus{Conditions: unsched}},
			want: []string{"c1", "c2"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			tc.pod.Namespace, tc.pod.Name = "ns", "p"
			var got []string
			for _, p := range pendingPods([]corev1.Pod{tc.pod}, claims, newExtendedResources(nil, claims), sets.New[string](), nil) {
				for _, c := range p.Claims {
					got = append(got, c.Name)
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("pending claims (-want +got):\n%s", diff)
			}
		})
	}
}
