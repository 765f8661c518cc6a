package auto

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/miglayout/miglayout/api/v1alpha1"
	"github.com/miglayout/miglayout/pkg/controller"
	"github.com/miglayout/miglayout/test/cluster/clustertest"
)

// wholeThenAuto makes every GPU of the Auto nodes one whole 7g.80gb (a
// Static MigLayout; MIG on, since the planner only uses GPUs in MIG mode),
// then switches the MigLayout to Auto mode, two GPUs of a node at once.
func wholeThenAuto(t *testing.T, ctx context.Context) *v1alpha1.MigLayout {
	t.Helper()
	return staticThenAuto(t, ctx, v1alpha1.LayoutRule{Name: "whole", ProductName: a100, Profiles: map[string]int32{"7g.80gb": 1}})
}

// staticThenAuto brings the Auto nodes to rules (a Static MigLayout), then
// switches the MigLayout to Auto mode, two GPUs of a node at once.
func staticThenAuto(t *testing.T, ctx context.Context, rules ...v1alpha1.LayoutRule) *v1alpha1.MigLayout {
	t.Helper()
	ml := env.SetMigLayout(t, ctx, layoutName, v1alpha1.MigLayoutSpec{
		NodeSelector: metav1.LabelSelector{MatchLabels: autoNodes},
		Mode:         v1alpha1.ModeStatic,
		Rules:        rules,
	})
	env.WaitReady(t, ctx, ml, 2)
	// Out of Auto mode, the planner's counts leave the status (after an Auto test, the
	// MigLayout had them).
	env.WaitMigLayout(t, ctx, layoutName, ml.Generation, 30*time.Second, "no Auto status in Static mode", func(ml *v1alpha1.MigLayout) bool {
		return ml.Status.Auto == nil
	})
	ml = env.SetMigLayout(t, ctx, layoutName, v1alpha1.MigLayoutSpec{
		NodeSelector: metav1.LabelSelector{MatchLabels: autoNodes},
		Mode:         v1alpha1.ModeAuto,
		Policy:       &v1alpha1.AutoPolicy{MaxGPUsPerNode: 2},
	})
	return env.WaitReady(t, ctx, ml, 2)
}

// nicDriver is a second DRA driver whose ResourceSlice the test publishes itself (no
// plugin runs for it): a NIC per node, as an RDMA driver would publish.
const nicDriver = "nic.e2e.example.com"

// TestAutoPlansPodsThatAlsoAskForAnotherDriver: a pending pod asks for a 4g.40gb MIG
// device and, in a second claim, a NIC of another driver that node A publishes. The
// planner puts the node's NIC beside the hypothetical MIG devices when it runs the
// allocator, so it plans the 4g.40gb on node A and the scheduler then allocates both
// claims there. A second pod whose NIC is taken is not planned for: it waits for capacity.
func TestAutoPlansPodsThatAlsoAskForAnotherDriver(t *testing.T) {
	ctx := clustertest.Context(t, 2*time.Minute)
	ml := wholeThenAuto(t, ctx)

	class := &resourceapi.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: nicDriver},
		Spec: resourceapi.DeviceClassSpec{Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{
			Expression: "device.driver == '" + nicDriver + "'"}}}}}
	slice := &resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: nodeA + "-nic"},
		Spec: resourceapi.ResourceSliceSpec{Driver: nicDriver, NodeName: ptr.To(nodeA),
			Pool:    resourceapi.ResourcePool{Name: nodeA, Generation: 1, ResourceSliceCount: 1},
			Devices: []resourceapi.Device{{Name: "nic-0"}}}}
	for _, obj := range []func() error{
		func() error {
			_, err := env.Client.ResourceV1().DeviceClasses().Create(ctx, class, metav1.CreateOptions{})
			return err
		},
		func() error {
			_, err := env.Client.ResourceV1().ResourceSlices().Create(ctx, slice, metav1.CreateOptions{})
			return err
		},
	} {
		if err := obj(); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = env.Client.ResourceV1().ResourceSlices().Delete(ctx, slice.Name, metav1.DeleteOptions{})
		_ = env.Client.ResourceV1().DeviceClasses().Delete(ctx, class.Name, metav1.DeleteOptions{})
	})

	ns := env.NewNamespace(t, ctx, "nic")
	// No plugin of the NIC driver runs, so the stand-in kubelet cannot prepare the pods
	// nor tear them down: they are deleted with no grace period (before the namespace
	// cleanup, which waits for them to go).
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for _, name := range []string{"train", "second", "nic-only"} {
			_ = env.Client.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To(int64(0))})
		}
	})
	nicClaim := resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{
		Name: "nic", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: nicDriver,
			AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 1}}}}}
	const sel4g = `device.attributes['mig.miglayout.io'].profile == '4g.40gb'`
	for _, name := range []string{"train", "second"} {
		for claim, spec := range map[string]resourceapi.ResourceClaimSpec{name + "-gpu": clustertest.ClaimSpec(sel4g), name + "-nic": nicClaim} {
			if _, err := env.Client.ResourceV1().ResourceClaims(ns).Create(ctx, &resourceapi.ResourceClaim{
				ObjectMeta: metav1.ObjectMeta{Name: claim}, Spec: spec}, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	pod := func(name string) *corev1.Pod {
		p := clustertest.Pod(ns, name, autoNodes, name+"-gpu", "")
		p.Spec.ResourceClaims = append(p.Spec.ResourceClaims, corev1.PodResourceClaim{Name: "nic", ResourceClaimName: ptr.To(name + "-nic")})
		p.Spec.Containers[0].Resources.Claims = append(p.Spec.Containers[0].Resources.Claims, corev1.ResourceClaim{Name: "nic"})
		return p
	}
	env.CreatePod(t, ctx, pod("train"))

	clustertest.Poll(t, ctx, 60*time.Second, "pod train to be bound with a 4g.40gb and the NIC", func(ctx context.Context) (bool, string) {
		p, err := env.Client.CoreV1().Pods(ns).Get(ctx, "train", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		if p.Spec.NodeName == "" {
			return false, "not bound"
		}
		gpu, nic := env.GetClaim(t, ctx, ns, "train-gpu"), env.GetClaim(t, ctx, ns, "train-nic")
		_, gpuDev, ok1 := clustertest.Allocated(gpu)
		nicPool, nicDev, ok2 := clustertest.Allocated(nic)
		return ok1 && ok2 && p.Spec.NodeName == nodeA && nicPool == nodeA && nicDev == "nic-0",
			fmt.Sprintf("bound to %s, gpu %s, nic %s/%s", p.Spec.NodeName, gpuDev, nicPool, nicDev)
	})

	// The only NIC is taken now. A pod asking for a NIC alone waits for it too; it is
	// none of Auto mode's business: no event, no count.
	if _, err := env.Client.ResourceV1().ResourceClaims(ns).Create(ctx, &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "nic-only-nic"}, Spec: nicClaim}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	env.CreatePod(t, ctx, clustertest.Pod(ns, "nic-only", autoNodes, "nic-only-nic", ""))
	clustertest.Poll(t, ctx, 30*time.Second, "pod nic-only to be found unschedulable", func(ctx context.Context) (bool, string) {
		p, err := env.Client.CoreV1().Pods(ns).Get(ctx, "nic-only", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Reason == corev1.PodReasonUnschedulable {
				return true, ""
			}
		}
		return false, fmt.Sprintf("conditions %v", p.Status.Conditions)
	})
	// A second pod of a 4g.40gb and the NIC cannot run until the NIC is released; the
	// planner says it waits for capacity instead of cutting a GPU for it.
	env.CreatePod(t, ctx, pod("second"))
	waitPodEvent(t, ctx, ns, "second", "WaitingForCapacity")
	env.WaitMigLayout(t, ctx, layoutName, ml.Generation, 30*time.Second, "status.auto counting the pod that waits for room, not the NIC-only pod", func(ml *v1alpha1.MigLayout) bool {
		a := ml.Status.Auto
		return a != nil && a.PendingPods == 1 && a.WaitingForRoomPods == 1 && a.WaitingForCapacityPods == 0 && a.NotServablePods == 0
	})
	events, err := env.Client.EventsV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "regarding.name=nic-only"})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range events.Items {
		switch e.Reason {
		case controller.EventNotServable, controller.EventWaitingForCapacity, controller.EventWaitingForRepartition:
			t.Errorf("pod nic-only, which asks for no MIG device, got an event from miglayout: %s: %s", e.Reason, e.Note)
		}
	}
	data, err := os.ReadFile(filepath.Join(env.Cluster.LogDir(), "controller.log"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if strings.Contains(line, `"Planned GPU layout"`) && strings.Contains(line, ns+"/second") {
			t.Errorf("a change was planned for pod second, whose NIC is taken: %s", line)
		}
	}
}
