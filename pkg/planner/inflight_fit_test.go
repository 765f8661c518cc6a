package planner

import (
	"context"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
)

// TestNamedPodsKeepTheDevicesPlannedForThem: a plan repartitions n1's GPU
// for p (priority 100, a 1g.10gb or a 2g.20gb will do: best fit gives it
// the 1g.10gb) and r (a 2g.20gb only). While that change is in flight the
// next plan serves both, first, on the devices it brings; but serveComing
// runs the allocator alone on them, which hands p the first device that
// matches, the 2g.20gb r's change was made for. r no longer fits there and
// another GPU (n2's) is repartitioned for it: two GPUs change for the
// demand one covered, and the 1g.10gb coming on n1 serves nobody.
func TestNamedPodsKeepTheDevicesPlannedForThem(t *testing.T) {
	either := "device.attributes['mig.miglayout.io'].profile in ['1g.10gb', '2g.20gb']"
	pods := []Pod{
		pod("p", 10).priority(100).claim(either, 1).build(),
		pod("r", 5).claim(profileIs("2g.20gb"), 1).build(),
	}
	classes := []*resourceapi.DeviceClass{migClass()}
	first, err := Plan(context.Background(), Snapshot{Driver: driver, Classes: classes, Pending: pods,
		Nodes: []Node{node("n1").gpu("A100-SXM4-80GB", "", "").build()}})
	if err != nil {
		t.Fatal(err)
	}
	if len(first.Changes) != 1 {
		t.Fatalf("first plan: changes %+v, want one on n1", first.Changes)
	}
	c := first.Changes[0]
	res, err := Plan(context.Background(), Snapshot{Driver: driver, Classes: classes, Pending: pods, Nodes: []Node{
		node("n1").gpu("A100-SXM4-80GB", c.To.String(), "").changingFor(c.Serves...).build(),
		node("n2").gpu("A100-SXM4-80GB", "", "").build(),
	}})
	if err != nil {
		t.Fatal(err)
	}
	for _, ch := range res.Changes {
		t.Errorf("second plan changes %s/%d to %s for %v, though n1's change in flight (%s) brings devices for both p and r (served %+v)",
			ch.Node, ch.GPU, ch.To, ch.Serves, c.To, res.Served)
	}
}
