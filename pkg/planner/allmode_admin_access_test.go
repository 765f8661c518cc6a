package planner

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/util/sets"
)

// TestAdminAccessAllModeLeavesItsNodeToOthers: a claim with admin access
// that asks for every matching device (a monitoring DaemonSet's) uses none
// of them up: kube-scheduler's allocator gives admin-access devices
// whatever holds them and counts them as held by no one. So the plan does
// not make the node that pod's alone: the other pod, served on the same
// node, is allocated too, in either order kube-scheduler tries them.
// Without admin access, every matching device includes the one in use, so
// the All-mode pod cannot be served there, and the other pod is.
func TestAdminAccessAllModeLeavesItsNodeToOthers(t *testing.T) {
	tests := map[string]struct {
		monitor    *podB
		wantServed []string
	}{
		"admin access":    {monitor: pod("monitor", 10).claim("", 0).allDevices().adminAccess(), wantServed: []string{"default/b", "default/monitor"}},
		"no admin access": {monitor: pod("monitor", 10).claim("", 0).allDevices(), wantServed: []string{"default/b"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			snap := Snapshot{Driver: driver, Classes: []*resourceapi.DeviceClass{migClass()}, Now: t0,
				Nodes:   []Node{node("n1").gpu("A100-SXM4-80GB", "3g.40gb@4", "3g.40gb@4").build()},
				Pending: []Pod{tc.monitor.build(), pod("b", 1).claim(profileIs("1g.10gb"), 1).build()}}
			res, err := Plan(context.Background(), snap)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.wantServed, sets.List(sets.New(servedPods(res)...))); diff != "" {
				t.Errorf("served pods (-want +got):\n%s\nunservable: %v", diff, res.Unservable)
			}
			for _, newestFirst := range []bool{false, true} {
				if failed := replayPending(t, snap, res, newestFirst, true); len(failed) > 0 {
					t.Errorf("newest first %v: kube-scheduler does not allocate %v, served by the plan", newestFirst, failed)
				}
			}
		})
	}
}

// TestAdminAccessAllModeBesideAllModePod: an admin-access monitor that asks
// for every device uses none up, so kube-scheduler allocates an All-mode
// pod beside it (its allocated devices leave admin-access results out), in
// either order: the plan serves both, neither waiting for the other's node.
func TestAdminAccessAllModeBesideAllModePod(t *testing.T) {
	for name, pending := range map[string][]Pod{
		"monitor older": {
			pod("monitor", 10).claim(profileIs("1g.10gb"), 0).allDevices().adminAccess().build(),
			pod("all", 5).claim(profileIs("1g.10gb"), 0).allDevices().build(),
		},
		"monitor younger": {
			pod("monitor", 1).claim(profileIs("1g.10gb"), 0).allDevices().adminAccess().build(),
			pod("all", 5).claim(profileIs("1g.10gb"), 0).allDevices().build(),
		},
	} {
		t.Run(name, func(t *testing.T) {
			snap := Snapshot{Driver: driver, Classes: []*resourceapi.DeviceClass{migClass()}, Now: t0,
				Nodes:   []Node{node("n1").gpu("A100-SXM4-80GB", "1g.10gb@0,1g.10gb@1", "").build()},
				Pending: pending}
			res, err := Plan(context.Background(), snap)
			if err != nil {
				t.Fatal(err)
			}
			if failed := replayPending(t, snap, res, false, true); len(failed) > 0 {
				t.Errorf("kube-scheduler does not allocate %v", failed)
			}
			if diff := cmp.Diff([]string{"default/all", "default/monitor"}, sets.List(sets.New(servedPods(res)...))); diff != "" {
				t.Errorf("served (-want +got):\n%s\nunservable: %v", diff, res.Unservable)
			}
		})
	}
}
