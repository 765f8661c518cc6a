package main

import (
	"strings"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestPlanNamesTheFirstClaimOfASharedDevice: a device allocated to several
// claims (an admin-access claim beside the workload's) is told blocked by
// the first of them in namespace/name order, whatever order they are
// listed in.
func TestPlanNamesTheFirstClaimOfASharedDevice(t *testing.T) {
	nml := reportedA100("gpu-a", "7g.80gb@0")
	dev := deviceName(t, "A100-SXM4-80GB", 0, "7g.80gb@0")
	objs := []client.Object{node("gpu-a", map[string]string{"pool": "a"}), nml,
		allocated("team-z", "monitor", "gpu-a", dev), allocated("team-a", "train", "gpu-a", dev)}
	out, _, err := runWith(t, objs, "plan", "-f", staticMigLayoutFile(t, "halves", "[{profiles: {3g.40gb: 2}}]"))
	if err != nil {
		t.Fatal(err)
	}
	if want := "blocked until released: 7g.80gb@0: allocated to ResourceClaim team-a/train\n"; !strings.Contains(out, want) {
		t.Errorf("plan lacks %q:\n%s", want, out)
	}
}
