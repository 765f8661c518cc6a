package controller

import (
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// kube-scheduler applies a DeviceTaintRule to every device its selector
// matches, of any driver (resourceslice/tracker applyPatches): a NIC a
// NoSchedule rule taints is allocated to no claim that does not tolerate
// it. A pod that needs a NIC and a MIG device is then planned on the node
// whose NIC no rule taints, not on the one whose NIC the scheduler will
// not give it (a repartition there serves no pod, and the pod waits).
func TestSnapshotDeviceTaintRulesOfOtherDrivers(t *testing.T) {
	const nicDriver = "nic.example.com"
	auto := migLayout("auto").selects("pool", "a").build()
	auto.Spec.Mode, auto.Spec.Rules, auto.UID = v1alpha1.ModeAuto, nil, "uid-auto"
	ref := []metav1.OwnerReference{{APIVersion: "miglayout.io/v1alpha1", Kind: "MigLayout", Name: "auto", UID: "uid-auto", Controller: ptr.To(true)}}
	nml := func(name string) *v1alpha1.NodeMigLayout {
		n := nodeMigLayout(name).status(h100(0)).build()
		n.OwnerReferences, n.Spec.MigLayout = ref, "auto"
		return n
	}
	nics := func(node string) resourceapi.ResourceSlice {
		return resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: node + "-nic"}, Spec: resourceapi.ResourceSliceSpec{
			Driver: nicDriver, NodeName: ptr.To(node), Pool: resourceapi.ResourcePool{Name: node, ResourceSliceCount: 1},
			Devices: []resourceapi.Device{{Name: "nic-0"}}}}
	}
	claim := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "both"}, Spec: resourceapi.ResourceClaimSpec{
		Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{
			{Name: "gpu", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "mig.miglayout.io", AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 1,
				Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: "device.attributes['mig.miglayout.io'].profile == '3g.40gb'"}}}}},
			{Name: "nic", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: nicDriver, AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 1}},
		}}}}
	in := AutoInputs{Driver: "mig.miglayout.io", MigLayouts: []v1alpha1.MigLayout{auto},
		Nodes: []corev1.Node{
			{ObjectMeta: metav1.ObjectMeta{Name: "a1", Labels: map[string]string{"pool": "a"}}},
			{ObjectMeta: metav1.ObjectMeta{Name: "a2", Labels: map[string]string{"pool": "a"}}},
		},
		NodeMigLayouts: map[string]*v1alpha1.NodeMigLayout{"a1": nml("a1"), "a2": nml("a2")},
		Slices:         []resourceapi.ResourceSlice{nics("a1"), nics("a2")},
		Pods: []corev1.Pod{{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "both"},
			Spec:   corev1.PodSpec{ResourceClaims: []corev1.PodResourceClaim{{Name: "both", ResourceClaimName: ptr.To("both")}}},
			Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable}}}}},
		Claims: map[types.NamespacedName]*resourceapi.ResourceClaim{{Namespace: "ns", Name: "both"}: claim},
		Classes: []*resourceapi.DeviceClass{
			{ObjectMeta: metav1.ObjectMeta{Name: "mig.miglayout.io"}, Spec: resourceapi.DeviceClassSpec{Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{
				Expression: "device.driver == 'mig.miglayout.io' && device.attributes['mig.miglayout.io'].type == 'mig'"}}}}},
			{ObjectMeta: metav1.ObjectMeta{Name: nicDriver}, Spec: resourceapi.DeviceClassSpec{Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{
				Expression: "device.driver == '" + nicDriver + "'"}}}}},
		},
		// An administrator takes a1's NIC out of scheduling.
		TaintRules: []resourceapi.DeviceTaintRule{{ObjectMeta: metav1.ObjectMeta{Name: "nic-maintenance"}, Spec: resourceapi.DeviceTaintRuleSpec{
			DeviceSelector: &resourceapi.DeviceTaintSelector{Driver: ptr.To(nicDriver), Pool: ptr.To("a1"), Device: ptr.To("nic-0")},
			Taint:          resourceapi.DeviceTaint{Key: "example.com/maintenance", Effect: resourceapi.DeviceTaintEffectNoSchedule}}}},
	}
	res, got := planChanges(t, in)
	var served []string
	for _, s := range res.Served {
		served = append(served, fmt.Sprintf("%+v", s))
	}
	if len(got) != 1 || !strings.HasPrefix(got[0], "a2/") {
		t.Errorf("changes = %v, want one on a2 (a1's only NIC is tainted by a DeviceTaintRule: the scheduler does not allocate it)\nserved: %v\nunservable: %v", got, served, res.Unservable)
	}
}
