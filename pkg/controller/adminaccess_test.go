package controller

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/structured"
	"k8s.io/utils/ptr"

	"github.com/miglayout/miglayout/api/v1alpha1"
	migslices "github.com/miglayout/miglayout/pkg/slices"
)

// allocatedClaim is a claim whose allocation holds devices (driver, pool,
// device), with admin access where admin is set.
func allocatedClaim(name string, admin bool, devices ...[3]string) *resourceapi.ResourceClaim {
	c := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name},
		Status: resourceapi.ResourceClaimStatus{Allocation: &resourceapi.AllocationResult{}}}
	for i, d := range devices {
		r := resourceapi.DeviceRequestAllocationResult{Request: fmt.Sprintf("r%d", i), Driver: d[0], Pool: d[1], Device: d[2]}
		if admin {
			r.AdminAccess = ptr.To(true)
		}
		c.Status.Allocation.Devices.Results = append(c.Status.Allocation.Devices.Results, r)
	}
	return c
}

// kube-scheduler counts no device given with admin access as in use: such a
// device of miglayout's is held (never destroyed) but may still be given
// to a pending pod, one of another driver is free for the allocator.
func TestAllocationsAdminAccess(t *testing.T) {
	const nic = "nic.example.com"
	claims := map[types.NamespacedName]*resourceapi.ResourceClaim{}
	for _, c := range []*resourceapi.ResourceClaim{
		allocatedClaim("workload", false, [3]string{migClassName, "a", "gpu-0-mig-4g40gb-5-0"}, [3]string{nic, "a", "nic-0"}),
		allocatedClaim("monitor", true, [3]string{migClassName, "a", "gpu-0-mig-3g40gb-9-4"}, [3]string{nic, "a", "nic-1"}),
		// Held both ways: in use.
		allocatedClaim("both-user", false, [3]string{migClassName, "b", "gpu-0-mig-7g80gb-0-0"}),
		allocatedClaim("both-admin", true, [3]string{migClassName, "b", "gpu-0-mig-7g80gb-0-0"}),
		{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "pending"}},
	} {
		claims[types.NamespacedName{Namespace: c.Namespace, Name: c.Name}] = c
	}
	mine, admin, others := allocations(claims, migClassName)
	type view struct {
		Mine, Admin map[string][]string
		Others      []string
	}
	list := func(m map[string]sets.Set[string]) map[string][]string {
		out := map[string][]string{}
		for k, v := range m {
			out[k] = sets.List(v)
		}
		return out
	}
	got := view{Mine: list(mine), Admin: list(admin)}
	for _, id := range others.Devices {
		got.Others = append(got.Others, id.String())
	}
	want := view{
		Mine:   map[string][]string{"a": {"gpu-0-mig-4g40gb-5-0"}, "b": {"gpu-0-mig-7g80gb-0-0"}},
		Admin:  map[string][]string{"a": {"gpu-0-mig-3g40gb-9-4"}, "b": {"gpu-0-mig-7g80gb-0-0"}},
		Others: []string{structured.MakeDeviceID(nic, "a", "nic-0").String()},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("allocations (-want +got):\n%s", diff)
	}
}

// TestAllocationsCountShares: a result with a ShareID (a share of another
// driver's device that allows multiple allocations) is a share with the
// capacity it consumes, as kube-scheduler counts it, not the device held
// whole.
func TestAllocationsCountShares(t *testing.T) {
	const nic = "nic.example.com"
	c := allocatedClaim("shares", false, [3]string{nic, "a", "nic-0"}, [3]string{nic, "a", "nic-1"})
	c.Status.Allocation.Devices.Results[0].ShareID = ptr.To(types.UID("share-1"))
	c.Status.Allocation.Devices.Results[0].ConsumedCapacity = map[resourceapi.QualifiedName]resource.Quantity{"bandwidth": resource.MustParse("4G")}
	_, _, others := allocations(map[types.NamespacedName]*resourceapi.ResourceClaim{{Namespace: c.Namespace, Name: c.Name}: c}, migClassName)
	var got []string
	for _, d := range others.Devices {
		got = append(got, "device "+d.String())
	}
	for _, d := range others.Shares {
		got = append(got, "share "+d.String())
	}
	for _, c := range others.Consumed {
		got = append(got, fmt.Sprintf("consumed %s %s", c.DeviceID, c.ConsumedCapacity["bandwidth"]))
	}
	want := []string{"device nic.example.com/a/nic-1", "share nic.example.com/a/nic-0/share-1", "consumed nic.example.com/a/nic-0 4G"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("other drivers' holds (-want +got):\n%s", diff)
	}
}

// A device a claim holds with admin access only (a monitoring pod, say)
// stays, but kube-scheduler gives it to a pending pod that asks for its
// profile: the planner plans that pod on it and changes no GPU, even where
// the agent reports the device in use (prepared for the admin claim,
// running its processes). Counted as used up, it made the planner destroy
// node b's free 7g.80gb for a 3g.40gb the scheduler then found on node a.
// A device held both with and without admin access is used up.
func TestAdminHeldDeviceServesPendingPod(t *testing.T) {
	half := migslices.MIGDeviceName(0, "3g.40gb", 9, 4)
	for name, tc := range map[string]struct {
		claims      []*resourceapi.ResourceClaim
		wantChanges []string
		wantServed  map[string][]string
	}{
		"held with admin access only": {
			claims:     []*resourceapi.ResourceClaim{allocatedClaim("monitor", true, [3]string{migClassName, "a", half})},
			wantServed: map[string][]string{"ns/p": {"a", half}},
		},
		"also allocated without admin access": {
			claims: []*resourceapi.ResourceClaim{
				allocatedClaim("monitor", true, [3]string{migClassName, "a", half}),
				allocatedClaim("user", false, [3]string{migClassName, "a", half}),
			},
			wantChanges: []string{"b/0 -> 3g.40gb@4"},
			wantServed:  map[string][]string{"ns/p": {"b", migslices.MIGDeviceName(0, "3g.40gb", 9, 4)}},
		},
	} {
		t.Run(name, func(t *testing.T) {
			ml := autoMigLayout("auto", nil)
			node := func(n string) corev1.Node {
				return corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n, Labels: map[string]string{"pool": "auto"}}}
			}
			pending := autoClaim("want-3g", profileSelector("3g.40gb"))
			claims := map[types.NamespacedName]*resourceapi.ResourceClaim{{Namespace: "ns", Name: pending.Name}: pending}
			for _, c := range tc.claims {
				claims[types.NamespacedName{Namespace: c.Namespace, Name: c.Name}] = c
			}
			in := AutoInputs{Driver: migClassName, MigLayouts: []v1alpha1.MigLayout{*ml},
				Nodes: []corev1.Node{node("a"), node("b")},
				NodeMigLayouts: map[string]*v1alpha1.NodeMigLayout{
					// a: the 4g.40gb runs a workload, the 3g.40gb the admin pod.
					"a": autoNML("a", ml, a100(0).layout("4g.40gb@0,3g.40gb@4").inUse("4g.40gb@0,3g.40gb@4")),
					"b": autoNML("b", ml, a100(0).layout("7g.80gb@0")),
				},
				Pods:    []corev1.Pod{*autoPod("p", time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), pending.Name)},
				Claims:  claims,
				Classes: []*resourceapi.DeviceClass{migDeviceClass()},
			}
			// The workload's own claim holds the 4g.40gb.
			user := allocatedClaim("workload", false, [3]string{migClassName, "a", migslices.MIGDeviceName(0, "4g.40gb", 5, 0)})
			in.Claims[types.NamespacedName{Namespace: "ns", Name: user.Name}] = user
			res, changes := planChanges(t, in)
			served := map[string][]string{}
			for _, s := range res.Served {
				served[s.Pod] = append([]string{s.Node}, s.Devices...)
			}
			if diff := cmp.Diff(tc.wantChanges, changes); diff != "" {
				t.Errorf("changes (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantServed, served); diff != "" {
				t.Errorf("served (-want +got):\n%s\nunservable: %v", diff, res.Unservable)
			}
		})
	}
}
