package planner

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	resourceapi "k8s.io/api/resource/v1"
)

// TestAgedPodsArePlannedByAge: a pod that has waited AgingAfter or longer
// (exactly AgingAfter included) is planned ahead of larger pods of its
// priority, and pods that have all waited that long are planned oldest
// first, whatever their size.
func TestAgedPodsArePlannedByAge(t *testing.T) {
	// One whole free 7g.80gb: a 1g.10gb pod served first takes it apart,
	// a 7g.80gb pod served first takes it whole.
	gpu := func() []Node { return []Node{node("n1").gpu("A100-SXM4-80GB", "7g.80gb@0", "").build()} }
	smallFirst := trace{
		Changes: []string{"n1/0: 7g.80gb@0 -> 1g.10gb@6 serves default/small"},
		Served:  []string{"default/small -> n1 gpu-0-mig-1g10gb-19-6 after change"},
		Kept:    map[string]string{"default/big": "n1/gpu-0 7g.80gb@0"},
	}
	tests := map[string]struct {
		pods []Pod
		want trace
	}{
		"a pod that has waited exactly AgingAfter": {
			pods: []Pod{pod("small", 60).claim(profileIs("1g.10gb"), 1).build(), pod("big", 1).claim(profileIs("7g.80gb"), 1).build()},
			want: smallFirst,
		},
		"two aged pods: the older first, though smaller": {
			pods: []Pod{pod("small", 120).claim(profileIs("1g.10gb"), 1).build(), pod("big", 90).claim(profileIs("7g.80gb"), 1).build()},
			want: smallFirst,
		},
		"a pod just short of AgingAfter waits behind the larger one": {
			pods: []Pod{pod("small", 59).claim(profileIs("1g.10gb"), 1).build(), pod("big", 1).claim(profileIs("7g.80gb"), 1).build()},
			want: trace{
				Served:     []string{"default/big -> n1 gpu-0-mig-7g80gb-0-0"},
				Unservable: map[string]string{"default/small": NoRoom},
			},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			res, err := Plan(context.Background(), Snapshot{Driver: driver, Nodes: gpu(), Pending: tc.pods, Classes: []*resourceapi.DeviceClass{migClass()},
				Now: t0, AgingAfter: time.Hour})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, toTrace(res), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("plan (-want +got):\n%s", diff)
			}
		})
	}
}
