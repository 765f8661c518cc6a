package planner

import (
	"context"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
)

// On an empty GPU, flex (older, and larger: planned first by the planner
// and taken first by kube-scheduler too) asks for two devices of at least
// 16000 (or 9000) MiB; one asks for the smallest such device alone. Once
// the change has landed, the node publishes its devices smallest first
// and the allocator gives flex the first two it accepts: the plan must
// give flex the smallest devices it accepts, so that the scheduler leaves
// one the device planned for it (given a 2g.20gb, flex would take both
// 1g.20gb and one would wait beside a 2g.20gb made for nobody).
func TestPlanMultiDevicePodGetsTheDevicesTheSchedulerGivesIt(t *testing.T) {
	for _, tc := range []struct{ model, flex, one string }{
		{"A100-SXM4-80GB", "16000", "1g.20gb"},
		{"A100-SXM4-80GB", "9000", "1g.10gb"},
		{"H100-SXM5-80GB", "9000", "1g.10gb"},
	} {
		t.Run(tc.model+"/"+tc.one, func(t *testing.T) {
			snap := Snapshot{Driver: driver, Classes: []*resourceapi.DeviceClass{migClass()}, Now: t0,
				Nodes: []Node{node("n1").gpu(tc.model, "", "").build()},
				Pending: []Pod{
					pod("flex", 60).claim("device.attributes['mig.miglayout.io'].memory >= "+tc.flex, 2).build(),
					pod("one", 30).claim(profileIs(tc.one), 1).build(),
				}}
			res, err := Plan(context.Background(), snap)
			if err != nil {
				t.Fatal(err)
			}
			if got := len(res.Served); got != 2 {
				t.Fatalf("served %d pods, want 2 (both fit the GPU)\nplan: %+v", got, toTrace(res))
			}
			// Oldest first is also the planner's own order here (flex is
			// the larger pod); newest first is checked as the project's
			// agreement tests do.
			for _, newestFirst := range []bool{false, true} {
				if failed := schedulerReplay(t, snap, res, newestFirst); len(failed) > 0 {
					t.Errorf("served by the plan, but the scheduler taking pods newest first=%t cannot allocate %v\nplan: %+v", newestFirst, failed, toTrace(res))
				}
			}
		})
	}
}
