package planner

import (
	"context"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/miglayout/miglayout/pkg/mig"
	migslices "github.com/miglayout/miglayout/pkg/slices"
)

// TestCountsAgreeInPublicationOrder: countsAgree replays kube-scheduler's
// first fit over the node's free devices in the order the agent publishes
// them (slices.SortDevices: memory, multiprocessors, then the room each
// device's placement loses, then the GPU). 1g.10gb and 1g.10gb+me have the
// same memory and multiprocessors, so x, open to both and taken first,
// gets the one that loses the least room: the plan must not promise that
// device to y, which accepts only 1g.10gb+me. Replayed through the
// allocator on the planned pool sorted as published, every pod the plan
// serves gets a device.
func TestCountsAgreeInPublicationOrder(t *testing.T) {
	nodes := []Node{node("n").policy(Policy{MaxGPUsPerNode: 2}).
		gpu("A100-SXM4-80GB", "1g.10gb@1,2g.20gb@2,3g.40gb@4", "1g.10gb@1,2g.20gb@2,3g.40gb@4").
		gpu("A100-SXM4-80GB", "", "").build()}
	x := pod("x", 2).claim("device.attributes['mig.miglayout.io'].memory < 10000", 1).build()
	y := pod("y", 1).claim(profileIs("1g.10gb+me"), 1).build()
	snap := Snapshot{Driver: driver, Nodes: nodes, Pending: []Pod{x, y}, Classes: []*resourceapi.DeviceClass{migClass()}, Now: t0}
	res, err := Plan(context.Background(), snap)
	if err != nil {
		t.Fatal(err)
	}
	// Replay kube-scheduler on the published pool once the plan landed:
	// the agent publishes in slices.SortDevices order with mig RoomLost.
	layouts := map[int]mig.Layout{0: nodes[0].GPUs[0].Layout, 1: nodes[0].GPUs[1].Layout}
	for _, c := range res.Changes {
		layouts[c.GPU] = c.To
	}
	var devs []resourceapi.Device
	roomLost := map[string][]int{}
	taken := sets.New[string]()
	for i, g := range nodes[0].GPUs {
		for _, d := range layouts[i] {
			dev, err := migslices.PlannedMIGDevice(g.Info, d)
			if err != nil {
				t.Fatal(err)
			}
			devs = append(devs, dev)
			roomLost[dev.Name] = g.Info.Model.RoomLost(d)
			if g.Pinned.Contains(d) {
				taken.Insert(dev.Name)
			}
		}
	}
	migslices.SortDevices(devs, roomLost)
	m := newMatcher(driver, snap.Classes)
	served := map[string]bool{}
	for _, s := range res.Served {
		served[s.Pod] = true
	}
	for _, p := range []Pod{x, y} { // kube-scheduler's order: same priority, older first
		if !served[podKey(p.Pod)] {
			continue
		}
		got, _, _, err := m.allocate(context.Background(), nodes[0].Node, devs, taken, p.Claims, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got == nil {
			t.Errorf("kube-scheduler gives pod %s no device on the planned pool, but the plan serves it", p.Pod.Name)
			continue
		}
		t.Logf("kube-scheduler: %s -> %v", p.Pod.Name, got)
		taken.Insert(got...)
	}
}
