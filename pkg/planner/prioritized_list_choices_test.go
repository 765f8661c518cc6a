package planner

import (
	"strings"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestPrioritizedListLaterChoicesAreTried: a pod whose prioritized list
// (firstAvailable) only its third choice can serve on the node is served
// with that choice.
func TestPrioritizedListLaterChoicesAreTried(t *testing.T) {
	// Only memory slice 6 is left: room for a 1g.10gb only.
	nodes := []Node{node("n1").gpu("A100-SXM4-80GB", "4g.40gb@0,2g.20gb@4", "4g.40gb@0,2g.20gb@4").build()}
	pods := []Pod{pod("list", 1).firstAvailableCounts([]string{"7g.80gb", "3g.40gb", "1g.10gb"}, []int64{1, 1, 1}).build()}
	want := trace{
		Changes: []string{"n1/0: 4g.40gb@0,2g.20gb@4 -> 4g.40gb@0,2g.20gb@4,1g.10gb@6 serves default/list"},
		Served:  []string{"default/list -> n1 gpu-0-mig-1g10gb-19-6 after change"},
	}
	checkTrace(t, want, planTrace(t, nodes, pods))
}

// TestDistinctSubrequestDevicesGoToGPUsOfTheirOwn: a distinctAttribute
// constraint on the GPU's UUID that names a prioritized list's subrequest
// ("gpu/s0") puts each of its devices on a GPU of its own, as one naming
// the request does.
func TestDistinctSubrequestDevicesGoToGPUsOfTheirOwn(t *testing.T) {
	nodes := []Node{withUUIDs(node("n1").policy(Policy{MaxGPUsPerNode: 2}).
		gpu("A100-SXM4-80GB", "", "").gpu("A100-SXM4-80GB", "", "").build())}
	pods := []Pod{pod("pair", 1).firstAvailableCounts([]string{"1g.10gb"}, []int64{2}).
		constrain(driver+"/parentUUID", true, "gpu/s0").build()}
	got := planTrace(t, nodes, pods)
	if len(got.Served) != 1 || !strings.Contains(got.Served[0], "gpu-0-") || !strings.Contains(got.Served[0], "gpu-1-") {
		t.Errorf("want the pod served with a device on each GPU, got %+v", got)
	}
}

// TestPrioritizedListChoicesBeyondTheBound: five claims, each a
// prioritized list [7g.80gb, 1g.10gb], on a node whose policy allows
// 1g.10gb alone: 32 combinations, of which only the last fits. The
// subrequests no device of the node can satisfy are not tried, so the
// bound on combinations does not leave the pod "impossible".
func TestPrioritizedListChoicesBeyondTheBound(t *testing.T) {
	nodes := []Node{node("n1").policy(Policy{AllowedProfiles: []string{"1g.10gb"}}).gpu("A100-SXM4-80GB", "", "").build()}
	b := pod("p", 1)
	for i := range 5 {
		b.firstAvailable(1, profileIs("7g.80gb"), profileIs("1g.10gb"))
		b.p.Claims[i].Name = "c" + itoa(i)
	}
	got := planTrace(t, nodes, []Pod{b.build()})
	if len(got.Served) != 1 || strings.Count(got.Served[0], "1g10gb") != 5 {
		t.Errorf("want the pod served with five 1g.10gb, got %+v", got)
	}
}

// TestPrioritizedListOtherDriverChoiceFirst: a prioritized list whose
// first choice is another driver's device, free on the node, and whose
// second a MIG device: the scheduler takes the other driver's device, so
// the plan makes no MIG device for the list, whichever claim comes first.
func TestPrioritizedListOtherDriverChoiceFirst(t *testing.T) {
	list := func() *resourceapi.ResourceClaim {
		c := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "p-list"}}
		c.Spec.Devices.Requests = []resourceapi.DeviceRequest{{Name: "r", FirstAvailable: []resourceapi.DeviceSubRequest{
			{Name: "nic", DeviceClassName: nicDriver, AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 1},
			{Name: "mig", DeviceClassName: "mig.miglayout.io", AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 1,
				Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: profileIs("1g.10gb")}}}},
		}}}
		return c
	}
	tests := map[string]struct {
		layout, pinned string
		listFirst      bool
		want           trace
	}{
		"list last": {
			want: trace{
				Changes: []string{"n1/0: (empty) -> 3g.40gb@4 serves default/p"},
				Served:  []string{"default/p -> n1 gpu-0-mig-3g40gb-9-4 after change"},
			},
		},
		"list first, room for the 3g.40gb alone": {
			layout: "4g.40gb@0", pinned: "4g.40gb@0", listFirst: true,
			want: trace{
				Changes: []string{"n1/0: 4g.40gb@0 -> 4g.40gb@0,3g.40gb@4 serves default/p"},
				Served:  []string{"default/p -> n1 gpu-0-mig-3g40gb-9-4 after change"},
			},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			n := node("n1").gpu("A100-SXM4-80GB", tc.layout, tc.pinned).build()
			n.OtherSlices = []*resourceapi.ResourceSlice{nicSlice("n1", "nic-0")}
			b := pod("p", 1)
			if tc.listFirst {
				b.p.Claims = append(b.p.Claims, list())
			}
			b.claim(profileIs("3g.40gb"), 1)
			if !tc.listFirst {
				b.p.Claims = append(b.p.Claims, list())
			}
			checkTrace(t, tc.want, planTrace(t, []Node{n}, []Pod{b.build()}, nicClass()))
		})
	}
}
