package controller

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/miglayout/miglayout/api/v1alpha1"
	migslices "github.com/miglayout/miglayout/pkg/slices"
)

// reservedFor reserves c for pods (by UID "uid-<name>").
func reservedFor(c *resourceapi.ResourceClaim, pods ...string) *resourceapi.ResourceClaim {
	for _, p := range pods {
		c.Status.ReservedFor = append(c.Status.ReservedFor, resourceapi.ResourceClaimConsumerReference{Resource: "pods", Name: p, UID: types.UID("uid-" + p)})
	}
	return c
}

// runningPod is a pod bound to a node, in phase; terminating sets its
// deletion timestamp.
func runningPod(name string, phase corev1.PodPhase, terminating bool) corev1.Pod {
	p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("uid-" + name)},
		Spec: corev1.PodSpec{NodeName: "a"}, Status: corev1.PodStatus{Phase: phase}}
	if terminating {
		p.DeletionTimestamp = &metav1.Time{Time: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	}
	return p
}

// TestReleasingDevices: a device is releasing when every claim that holds
// it ends soon (deleted, or reserved only for pods that are terminating,
// done or gone); one a claim in use or just allocated also holds is not,
// nor one held with admin access or another driver's.
func TestReleasingDevices(t *testing.T) {
	dev := func(name string) [3]string { return [3]string{migClassName, "a", name} }
	pods := []corev1.Pod{
		runningPod("running", corev1.PodRunning, false),
		runningPod("terminating", corev1.PodRunning, true),
		runningPod("succeeded", corev1.PodSucceeded, false),
		runningPod("failed", corev1.PodFailed, false),
	}
	deleting := allocatedClaim("deleting", false, dev("d-deleting"))
	deleting.DeletionTimestamp = &metav1.Time{Time: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	other := reservedFor(allocatedClaim("other-driver", false, [3]string{"nic.example.com", "a", "nic-0"}), "terminating")
	byDevice := reservedFor(allocatedClaim("non-pod", false, dev("d-non-pod")))
	byDevice.Status.ReservedFor = []resourceapi.ResourceClaimConsumerReference{{APIGroup: "example.com", Resource: "jobs", Name: "j", UID: "uid-j"}}
	claims := map[types.NamespacedName]*resourceapi.ResourceClaim{}
	for _, c := range []*resourceapi.ResourceClaim{
		reservedFor(allocatedClaim("of-running", false, dev("d-running")), "running"),
		reservedFor(allocatedClaim("of-terminating", false, dev("d-terminating")), "terminating"),
		reservedFor(allocatedClaim("of-succeeded", false, dev("d-succeeded")), "succeeded"),
		reservedFor(allocatedClaim("of-failed", false, dev("d-failed")), "failed"),
		reservedFor(allocatedClaim("of-gone", false, dev("d-gone")), "gone"),
		reservedFor(allocatedClaim("shared-ending", false, dev("d-shared-ending")), "terminating", "succeeded"),
		reservedFor(allocatedClaim("shared-running", false, dev("d-shared-running")), "terminating", "running"),
		allocatedClaim("not-reserved", false, dev("d-not-reserved")),
		deleting,
		// Two claims hold d-twice; one of them stays.
		reservedFor(allocatedClaim("twice-ending", false, dev("d-twice")), "terminating"),
		reservedFor(allocatedClaim("twice-running", false, dev("d-twice")), "running"),
		reservedFor(allocatedClaim("admin", true, dev("d-admin")), "terminating"),
		other, byDevice,
	} {
		claims[types.NamespacedName{Namespace: c.Namespace, Name: c.Name}] = c
	}
	got := map[string][]string{}
	for pool, names := range releasingDevices(claims, pods, migClassName) {
		got[pool] = sets.List(names)
	}
	want := map[string][]string{"a": {"d-deleting", "d-failed", "d-gone", "d-shared-ending", "d-succeeded", "d-terminating"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("releasing devices (-want +got):\n%s", diff)
	}
}

// TestReleasingDevicesKeptForLargePod: on the real snapshot path, the
// devices of terminating pods are planner.GPU.Releasing, so a pending
// 4g.40gb waits on the GPU they are leaving rather than on one whose
// devices stay in use, and a pending 2g.20gb is served on the room that
// stays instead of waiting for the kept half.
func TestReleasingDevicesKeptForLargePod(t *testing.T) {
	ml := autoMigLayout("auto", nil)
	created := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	big, small := autoClaim("want-4g", profileSelector("4g.40gb")), autoClaim("want-2g", profileSelector("2g.20gb"))
	dev := func(gpu int, profile string, id, start int) [3]string {
		return [3]string{migClassName, "a", migslices.MIGDeviceName(gpu, profile, id, start)}
	}
	claimList := []*resourceapi.ResourceClaim{big, small,
		reservedFor(allocatedClaim("stays", false, dev(0, "1g.10gb", 19, 0), dev(0, "3g.40gb", 9, 4)), "running"),
		reservedFor(allocatedClaim("stays-too", false, dev(1, "3g.40gb", 9, 4)), "running"),
		reservedFor(allocatedClaim("ends-0", false, dev(1, "2g.20gb", 14, 0)), "terminating"),
		reservedFor(allocatedClaim("ends-2", false, dev(1, "2g.20gb", 14, 2)), "terminating"),
	}
	claims := map[types.NamespacedName]*resourceapi.ResourceClaim{}
	for _, c := range claimList {
		claims[types.NamespacedName{Namespace: c.Namespace, Name: c.Name}] = c
	}
	in := AutoInputs{Driver: migClassName, MigLayouts: []v1alpha1.MigLayout{*ml},
		Nodes: []corev1.Node{{ObjectMeta: metav1.ObjectMeta{Name: "a", Labels: map[string]string{"pool": "auto"}}}},
		NodeMigLayouts: map[string]*v1alpha1.NodeMigLayout{"a": autoNML("a", ml,
			a100(0).layout("1g.10gb@0,3g.40gb@4").inUse("1g.10gb@0,3g.40gb@4"),
			a100(1).layout("2g.20gb@0,2g.20gb@2,3g.40gb@4").inUse("2g.20gb@0,2g.20gb@2,3g.40gb@4"))},
		Pods: []corev1.Pod{*autoPod("big", created, big.Name), *autoPod("small", created.Add(time.Minute), small.Name),
			runningPod("running", corev1.PodRunning, false), runningPod("terminating", corev1.PodRunning, true)},
		Claims:  claims,
		Classes: []*resourceapi.DeviceClass{migDeviceClass()},
	}
	for name, tc := range map[string]struct {
		rules       []resourceapi.DeviceTaintRule
		wantKept    string
		wantChanges []string
	}{
		"the terminating pods' half": {
			wantKept:    "memory slices 0-3 of a/gpu-1 (where a 4g.40gb goes)",
			wantChanges: []string{"a/0 -> 1g.10gb@0,2g.20gb@2,3g.40gb@4"},
		},
		// A device a DeviceTaintRule names stays out of scheduling after its
		// claim ends: it is in the way for good.
		"one of them named by a DeviceTaintRule": {
			rules: []resourceapi.DeviceTaintRule{{ObjectMeta: metav1.ObjectMeta{Name: "faulty"},
				Spec: resourceapi.DeviceTaintRuleSpec{
					DeviceSelector: &resourceapi.DeviceTaintSelector{Driver: new(migClassName), Device: new(dev(1, "2g.20gb", 14, 0)[2])},
					Taint:          resourceapi.DeviceTaint{Key: "example.com/faulty", Effect: resourceapi.DeviceTaintEffectNoSchedule}}}},
			wantKept: "memory slices 0-3 of a/gpu-0 (where a 4g.40gb goes)",
		},
	} {
		t.Run(name, func(t *testing.T) {
			in := in
			in.TaintRules = tc.rules
			res, changes := planChanges(t, in)
			if got := res.Kept["ns/big"]; got.String() != tc.wantKept {
				t.Errorf("kept for the 4g.40gb: %s, want %s", got, tc.wantKept)
			}
			if diff := cmp.Diff(tc.wantChanges, changes); diff != "" {
				t.Errorf("changes (-want +got):\n%s\nunservable: %v", diff, res.Unservable)
			}
		})
	}
}

// TestPodMatters: the planner is woken by pending pods with claims and by
// bound ones that terminate or end (their devices are releasing), not by a
// running pod's updates nor by pods without claims.
func TestPodMatters(t *testing.T) {
	withClaim := func(p corev1.Pod) *corev1.Pod {
		p.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimName: new("c")}}
		return &p
	}
	pending := runningPod("pending", corev1.PodPending, false)
	pending.Spec.NodeName = ""
	for name, tc := range map[string]struct {
		pod  *corev1.Pod
		want bool
	}{
		"pending with a claim":   {withClaim(pending), true},
		"pending without claims": {&pending, false},
		"running":                {withClaim(runningPod("r", corev1.PodRunning, false)), false},
		"terminating":            {withClaim(runningPod("t", corev1.PodRunning, true)), true},
		"succeeded":              {withClaim(runningPod("s", corev1.PodSucceeded, false)), true},
		"failed":                 {withClaim(runningPod("f", corev1.PodFailed, false)), true},
		"terminating, no claims": {func() *corev1.Pod { p := runningPod("t", corev1.PodRunning, true); return &p }(), false},
	} {
		t.Run(name, func(t *testing.T) {
			if got := podMatters(tc.pod); got != tc.want {
				t.Errorf("podMatters = %t, want %t", got, tc.want)
			}
		})
	}
}
