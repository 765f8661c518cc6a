package planner

import (
	"context"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
)

// TestPodOfSeveralDevicesLeavesDevicesReservedForOthers: a pod of several
// devices planned after a pod of one device on the same GPU, whose device
// does not exist yet, is not given that device: no device serves two pods.
func TestPodOfSeveralDevicesLeavesDevicesReservedForOthers(t *testing.T) {
	snap := Snapshot{Driver: driver, Classes: []*resourceapi.DeviceClass{migClass()}, Now: t0,
		Nodes: []Node{node("n1").gpu("A100-SXM4-80GB", "", "").build()},
		Pending: []Pod{
			pod("one", 2).priority(10).claim(profileIs("1g.10gb"), 1).build(),
			pod("pair", 1).claim(profileIs("1g.10gb"), 2).build(),
		}}
	res, err := Plan(context.Background(), snap)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Served) != 2 {
		t.Fatalf("want both pods served, got %+v", toTrace(res))
	}
	owner := map[string]string{}
	for _, s := range res.Served {
		for _, d := range s.Devices {
			if o, ok := owner[d]; ok {
				t.Errorf("device %s serves both %s and %s", d, o, s.Pod)
			}
			owner[d] = s.Pod
		}
	}
}
