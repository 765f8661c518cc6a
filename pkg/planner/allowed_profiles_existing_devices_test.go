package planner

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	resourceapi "k8s.io/api/resource/v1"
)

// TestExistingDeviceOutsideAllowedProfilesServesAPodThatNamesItsGPU:
// allowedProfiles limits the profiles the planner may create; a free device
// of another profile that exists already serves a pod that claims it, and
// so it does for a pod whose claim names the GPU (a per-GPU attribute), as
// for one that does not (TestExistingDeviceOutsideAllowedProfilesServes).
func TestExistingDeviceOutsideAllowedProfilesServesAPodThatNamesItsGPU(t *testing.T) {
	only1g := Policy{AllowedProfiles: []string{"1g.10gb"}}
	tests := map[string]struct {
		claim string
		want  trace
	}{
		"any GPU": {
			claim: profileIs("3g.40gb"),
			want:  trace{Served: []string{"default/p -> n1 gpu-0-mig-3g40gb-9-4"}},
		},
		"the GPU of index 0": {
			claim: profileIs("3g.40gb") + " && device.attributes['mig.miglayout.io'].parentIndex == 0",
			want:  trace{Served: []string{"default/p -> n1 gpu-0-mig-3g40gb-9-4"}},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			n := node("n1").policy(only1g).gpu("A100-SXM4-80GB", "3g.40gb@4", "").build()
			res, err := Plan(context.Background(), Snapshot{Driver: driver, Nodes: []Node{n},
				Pending: []Pod{pod("p", 1).claim(tc.claim, 1).build()}, Classes: []*resourceapi.DeviceClass{migClass()}})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, toTrace(res), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("plan (-want +got):\n%s", diff)
			}
		})
	}
}

// TestChangeInFlightKeepsItsDeviceForItsPodOutsideAllowedProfiles: the pod a
// change in flight was made for gets the device it brings, also once the
// policy no longer allows that profile (allowedProfiles limits what is
// created): no pod planned ahead of it in the queue takes it.
func TestChangeInFlightKeepsItsDeviceForItsPodOutsideAllowedProfiles(t *testing.T) {
	only1g := Policy{AllowedProfiles: []string{"1g.10gb"}}
	n := node("n1").policy(only1g).gpu("A100-SXM4-80GB", "3g.40gb@4", "").changingFor("default/p").build()
	pods := []Pod{
		pod("p", 2).claim(profileIs("3g.40gb"), 1).build(),
		pod("urgent", 1).priority(1000).claim(profileIs("3g.40gb"), 1).build(),
	}
	res, err := Plan(context.Background(), Snapshot{Driver: driver, Nodes: []Node{n}, Pending: pods, Classes: []*resourceapi.DeviceClass{migClass()}})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"default/p -> n1 gpu-0-mig-3g40gb-9-4"}, toTrace(res).Served); diff != "" {
		t.Errorf("served (-want +got):\n%s\nunservable: %v", diff, res.Unservable)
	}
}
