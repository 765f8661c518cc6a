package plugin

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/types"

	"github.com/miglayout/miglayout/pkg/mig"
	"github.com/miglayout/miglayout/pkg/slices"
)

// TestPrepareRefusesRecreatedDevicePreparedForAnotherClaim: claim "infer"
// holds a MIG device that a GPU reset destroyed and the agent made again
// (same name, new UUID) before RefreshRecreated rewrote its record. Another
// claim allocated the device (the first one's ResourceClaim deleted, its
// unprepare not arrived yet) is refused by name: the UUIDs differ, and the
// device would otherwise be prepared for two claims at once.
func TestPrepareRefusesRecreatedDevicePreparedForAnotherClaim(t *testing.T) {
	const dev = "gpu-0-mig-1g10gb-19-3"
	d := mig.Device{Profile: "1g.10gb", Start: 3}
	e := newEnv(t)
	e.preparedThenDestroyed(dev, d)
	p := e.plugin("")
	if md := e.createMIG(d); md.UUID == p.claims[uid1].Devices[0].UUID {
		t.Fatal("the device came back with its old UUID: the test shows nothing")
	}
	r := e.prepare(p, claim(uid2, "other", alloc{"mig", slices.DefaultDriverName, node, dev}))
	if !errors.Is(r.Err, ErrAlreadyPrepared) {
		t.Fatalf("prepare of the other claim = %v, want %v", r.Err, ErrAlreadyPrepared)
	}
	want := map[string][]types.NamespacedName{dev: {{Namespace: "team-a", Name: "infer"}}}
	if diff := cmp.Diff(want, p.PreparedDevices()); diff != "" {
		t.Errorf("PreparedDevices (-want +got):\n%s", diff)
	}
}
