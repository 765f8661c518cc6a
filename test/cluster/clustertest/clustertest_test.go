package clustertest

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// Tests of the helpers that need no cluster; test/e2e/auto and test/e2e/fullstack use the
// rest.

func TestPodByClaimOrTemplate(t *testing.T) {
	byName := Pod("ns", "p", OnNode("n1"), "c", "")
	if rc := byName.Spec.ResourceClaims[0]; rc.Name != "gpu" || ptr.Deref(rc.ResourceClaimName, "") != "c" || rc.ResourceClaimTemplateName != nil {
		t.Errorf("by name: %+v", rc)
	}
	if byName.Spec.NodeSelector[corev1.LabelHostname] != "n1" || byName.Spec.Containers[0].Resources.Claims[0].Name != "gpu" {
		t.Errorf("by name: spec %+v", byName.Spec)
	}
	if got := PodClaim(byName); got != "c" {
		t.Errorf("PodClaim(by name) = %q", got)
	}
	fromTemplate := Pod("ns", "p", nil, "", "tmpl")
	if rc := fromTemplate.Spec.ResourceClaims[0]; rc.ResourceClaimName != nil || ptr.Deref(rc.ResourceClaimTemplateName, "") != "tmpl" {
		t.Errorf("from template: %+v", rc)
	}
	if got := PodClaim(fromTemplate); got != "" {
		t.Errorf("PodClaim before the claim exists = %q", got)
	}
	fromTemplate.Status.ResourceClaimStatuses = []corev1.PodResourceClaimStatus{{Name: "gpu", ResourceClaimName: ptr.To("p-gpu-x")}}
	if got := PodClaim(fromTemplate); got != "p-gpu-x" {
		t.Errorf("PodClaim = %q, want p-gpu-x", got)
	}
}

func TestClaimSpecSelector(t *testing.T) {
	if sels := ClaimSpec("").Devices.Requests[0].Exactly.Selectors; sels != nil {
		t.Errorf("ClaimSpec(\"\") selectors %+v", sels)
	}
	req := ClaimSpec("true").Devices.Requests[0]
	if req.Exactly.DeviceClassName != MIGDeviceClass || req.Exactly.Count != 1 || req.Exactly.Selectors[0].CEL.Expression != "true" {
		t.Errorf("ClaimSpec(\"true\") request %+v", req.Exactly)
	}
}

func TestAllocatedAndConditions(t *testing.T) {
	c := &resourceapi.ResourceClaim{}
	if _, _, ok := Allocated(c); ok {
		t.Error("an unallocated claim is allocated")
	}
	c.Status.Allocation = &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{
		Results: []resourceapi.DeviceRequestAllocationResult{{Pool: "n1", Device: "gpu-0"}}}}
	if pool, dev, ok := Allocated(c); !ok || pool != "n1" || dev != "gpu-0" {
		t.Errorf("Allocated = %s, %s, %v", pool, dev, ok)
	}
	conds := []metav1.Condition{{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonAllNodesReady}}
	if !HasCondition(conds, v1alpha1.ConditionReady, metav1.ConditionTrue, "") ||
		!HasCondition(conds, v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonAllNodesReady) ||
		HasCondition(conds, v1alpha1.ConditionReady, metav1.ConditionTrue, "Other") ||
		HasCondition(conds, v1alpha1.ConditionDegraded, metav1.ConditionTrue, "") {
		t.Errorf("HasCondition wrong on %s", ConditionsString(conds))
	}
	if got, want := DescribeRules([]v1alpha1.LayoutRule{Rule("a", "A100", map[string]int32{"3g.40gb": 2, "1g.10gb": 1})}), "a[A100]{1g.10gb:1,3g.40gb:2}"; got != want {
		t.Errorf("DescribeRules = %q, want %q", got, want)
	}
}
