package main

import (
	"strings"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	migslices "github.com/miglayout/miglayout/pkg/slices"
)

// TestPlanStaticBlockedUnderThePublishedName: a MIG device whose published
// name carries another GI profile ID than the catalog's (made outside
// miglayout) is found by its attributes: the plan names it as published,
// and a ResourceClaim allocated to it blocks the change that would destroy
// it, though the agent's last report does not have it in use yet.
func TestPlanStaticBlockedUnderThePublishedName(t *testing.T) {
	const name = "gpu-0-mig-7g80gb-99-0" // the catalog's 7g.80gb ID is 0
	nml := reportedA100("gpu-a", "7g.80gb@0")
	dev := resourceapi.Device{Name: name, Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
		migslices.AttrParentIndex:    {IntValue: ptr.To[int64](0)},
		migslices.AttrProfile:        {StringValue: ptr.To("7g.80gb")},
		migslices.AttrPlacementStart: {IntValue: ptr.To[int64](0)},
	}}
	objs := []client.Object{node("gpu-a", map[string]string{"pool": "a"}), nml,
		slice("gpu-a", migslices.DefaultDriverName, dev), allocated("team-b", "big-0", "gpu-a", name)}
	out, _, err := runWith(t, objs, "plan", "-f", staticMigLayoutFile(t, "halves", "[{profiles: {3g.40gb: 2}}]"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"           destroy:  7g.80gb@0 (" + name + ")\n",
		"           blocked until released: 7g.80gb@0: allocated to ResourceClaim team-b/big-0\n",
		"; 1 blocked by devices in use",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("plan lacks %q:\n%s", want, out)
		}
	}
}
