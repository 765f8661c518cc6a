package plugin

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/miglayout/miglayout/pkg/slices"
)

// TestPreparedClaimsOrder: PreparedClaims lists the prepared claims by
// namespace, then name, then UID, whatever the order they were prepared in.
func TestPreparedClaimsOrder(t *testing.T) {
	const uid3 = "1f0e9a3c-0000-4000-8000-000000000003"
	e := newEnv(t)
	p := e.plugin("")
	driver := slices.DefaultDriverName
	inTeam := func(ns string, c *resourceapi.ResourceClaim) *resourceapi.ResourceClaim { c.Namespace = ns; return c }
	for _, c := range []*resourceapi.ResourceClaim{
		inTeam("team-b", claim(uid1, "a", alloc{"mig", driver, node, "gpu-0-mig-1g10gb-19-2"})),
		inTeam("team-a", claim(uid3, "b", alloc{"mig", driver, node, "gpu-0-mig-1g10gb-19-3"})),
		inTeam("team-a", claim(uid2, "b", alloc{"mig", driver, node, "gpu-0-mig-3g40gb-9-4"})),
	} {
		if r := e.prepare(p, c); r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	var got []string
	for _, c := range p.PreparedClaims() {
		got = append(got, types.NamespacedName{Namespace: c.Namespace, Name: c.Name}.String()+" "+string(c.UID))
	}
	want := []string{"team-a/b " + uid2, "team-a/b " + uid3, "team-b/a " + uid1}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("PreparedClaims order (-want +got):\n%s", diff)
	}
}

// TestPreparedClaimsAreCopies: the claims PreparedClaims returns are the
// caller's: changing their devices changes neither the plugin's record nor
// what PreparedDevices protects.
func TestPreparedClaimsAreCopies(t *testing.T) {
	e := newEnv(t)
	p := e.plugin("")
	const dev = "gpu-0-mig-3g40gb-9-4"
	if r := e.prepare(p, claim(uid1, "train", alloc{"mig", slices.DefaultDriverName, node, dev})); r.Err != nil {
		t.Fatal(r.Err)
	}
	got := p.PreparedClaims()
	if len(got) != 1 || len(got[0].Devices) != 1 {
		t.Fatalf("PreparedClaims = %+v, want one claim with one device", got)
	}
	got[0].Devices[0].Device = "gpu-1"
	want := map[string][]types.NamespacedName{dev: {{Namespace: "team-a", Name: "train"}}}
	if diff := cmp.Diff(want, p.PreparedDevices()); diff != "" {
		t.Errorf("PreparedDevices after the caller changed its copy (-want +got):\n%s", diff)
	}
}
