package planner

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	resourceapi "k8s.io/api/resource/v1"
)

// A pod of several devices takes the free devices of the node it accepts
// and has only the rest made: a 1g.10gb and a 7g.80gb on a node whose GPU 0
// holds a free 1g.10gb and whose GPU 1 is empty change GPU 1 alone, within
// the default maxGPUsPerNode of 1, and the free 1g.10gb is not destroyed
// where two GPUs may change. kube-scheduler allocates the same devices.
func TestMultiDevicePodReusesFreeDevices(t *testing.T) {
	want := trace{
		Changes: []string{"n0/1: (empty) -> 7g.80gb@0 serves default/p"},
		Served:  []string{"default/p -> n0 gpu-0-mig-1g10gb-19-2, gpu-1-mig-7g80gb-0-0 after change"},
	}
	for name, tc := range map[string]struct {
		policy Policy
		want   trace
	}{
		"one GPU changed at once":  {want: want},
		"two GPUs changed at once": {policy: Policy{MaxGPUsPerNode: 2}, want: want},
	} {
		t.Run(name, func(t *testing.T) {
			nodes := []Node{node("n0").policy(tc.policy).gpu("A100-SXM4-80GB", "1g.10gb@2", "").gpu("A100-SXM4-80GB", "", "").build()}
			pods := []Pod{pod("p", 1).claim(profileIs("1g.10gb"), 1).claim(profileIs("7g.80gb"), 1).build()}
			got := planTrace(t, nodes, pods)
			if diff := cmp.Diff(tc.want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("plan (-want +got):\n%s", diff)
			}
			snap := Snapshot{Driver: driver, Nodes: nodes, Pending: pods, Classes: []*resourceapi.DeviceClass{migClass()}, Now: t0}
			res, err := Plan(t.Context(), snap)
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Served) != 1 {
				t.Fatalf("replayed plan serves %d pods, want 1", len(res.Served))
			}
			if failed := replayPending(t, snap, res, false, true); len(failed) > 0 {
				t.Errorf("served by the plan, but kube-scheduler gives their devices to another pod: %v", failed)
			}
		})
	}
}

// A request open to any MIG device does not take a free 7g.80gb that
// another request of the pod asks for by profile: whatever the claims'
// order, the 7g.80gb request gets the free one and a 1g.10gb is made for
// the other (one compute slice, not a second whole GPU).
func TestMultiDevicePodReusesFreeDevicesWhateverTheOrder(t *testing.T) {
	want := trace{
		Changes: []string{"n0/1: (empty) -> 1g.10gb@6 serves default/p"},
		Served:  []string{"default/p -> n0 gpu-0-mig-7g80gb-0-0, gpu-1-mig-1g10gb-19-6 after change"},
	}
	for name, anyFirst := range map[string]bool{"7g.80gb first": false, "any MIG device first": true} {
		t.Run(name, func(t *testing.T) {
			nodes := []Node{node("n0").policy(Policy{MaxGPUsPerNode: 2}).gpu("A100-SXM4-80GB", "7g.80gb@0", "").gpu("A100-SXM4-80GB", "", "").build()}
			b := pod("p", 1)
			if anyFirst {
				b = b.claim("", 1).claim(profileIs("7g.80gb"), 1)
			} else {
				b = b.claim(profileIs("7g.80gb"), 1).claim("", 1)
			}
			p := b.build()
			p.Claims[1].Name = "p-second"
			if diff := cmp.Diff(want, planTrace(t, nodes, []Pod{p}), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("plan (-want +got):\n%s", diff)
			}
		})
	}
}

// Where the policy leaves a request's best profile out, the request reuses
// a free device of the profile that would be made for it instead: a
// 1g.10gb-or-2g.20gb request beside a 7g.80gb one, under allowedProfiles
// 2g.20gb and 7g.80gb, takes the free 2g.20gb and changes one GPU.
func TestMultiDevicePodReusesFreeDevicesOfTheAllowedProfile(t *testing.T) {
	nodes := []Node{node("n0").policy(Policy{AllowedProfiles: []string{"2g.20gb", "7g.80gb"}}).
		gpu("A100-SXM4-80GB", "2g.20gb@4", "").gpu("A100-SXM4-80GB", "", "").build()}
	p := pod("p", 1).claim("device.attributes['mig.miglayout.io'].profile in ['1g.10gb', '2g.20gb']", 1).claim(profileIs("7g.80gb"), 1).build()
	p.Claims[1].Name = "p-second"
	want := trace{
		Changes: []string{"n0/1: (empty) -> 7g.80gb@0 serves default/p"},
		Served:  []string{"default/p -> n0 gpu-0-mig-2g20gb-14-4, gpu-1-mig-7g80gb-0-0 after change"},
	}
	if diff := cmp.Diff(want, planTrace(t, nodes, []Pod{p}), cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("plan (-want +got):\n%s", diff)
	}
}
