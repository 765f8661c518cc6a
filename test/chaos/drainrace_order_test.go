package chaos

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/miglayout/miglayout/pkg/mig"
	"github.com/miglayout/miglayout/pkg/mig/gpu/gputest"
	"github.com/miglayout/miglayout/pkg/mig/nvmlsim"
	migslices "github.com/miglayout/miglayout/pkg/slices"
)

// TestDrainRaceClaimsLandOnDestroyedDevices guards what the drain race
// measures, without a cluster: its claims ask for any MIG device, so
// kube-scheduler gives them the first devices of the node's slice in
// publication order (pkg/slices.SortDevices). The flip from raceFrom to
// raceTo must destroy those, or no allocation could ever be destroyed and
// the race's "allocated then destroyed: 0" would hold whatever the agent
// does.
func TestDrainRaceClaimsLandOnDestroyedDevices(t *testing.T) {
	_, m := gputest.Simulated(t, nvmlsim.Config{Spec: "1x" + a100})
	ctx := context.Background()
	if _, err := m.SetMIGMode(ctx, 0, true); err != nil {
		t.Fatal(err)
	}
	for _, d := range mig.MustParseLayout(raceFrom) {
		if _, err := m.CreateMIGDevice(ctx, 0, d); err != nil {
			t.Fatal(err)
		}
	}
	inv, err := migslices.ReadInventory(ctx, m)
	if err != nil {
		t.Fatal(err)
	}
	placed := map[string]string{} // device name: profile@start
	for _, s := range inv.Sources() {
		if s.MIG != nil {
			placed[s.Name] = fmt.Sprintf("%s@%d", s.MIG.Profile, s.MIG.Placement.Start)
		}
	}
	kept := map[string]bool{}
	for _, d := range mig.MustParseLayout(raceTo) {
		kept[d.String()] = true
	}
	var first []string
	for _, d := range inv.Devices(nil) {
		if p, ok := placed[d.Name]; ok && len(first) < (RaceOptions{}).withDefaults().PodsPerNode {
			first = append(first, p)
		}
	}
	if len(first) == 0 {
		t.Fatal("no MIG device published")
	}
	for _, p := range first {
		if kept[p] {
			t.Errorf("the race's claims get %v first (publication order); the flip to %s keeps %s: no allocation it races with can be destroyed", first, raceTo, p)
		}
	}
}

// TestRaceViolations: the drain race's verdict, which the chaos command
// fails on as TestDrainRace does: an allocation destroyed or withdrawn
// where the settle period covers the stall or binding conditions hold (not
// where the settle period is shorter), any device destroyed undrained,
// and a race that drained nothing.
func TestRaceViolations(t *testing.T) {
	const stall = 600 * time.Millisecond
	for name, tc := range map[string]struct {
		cells []*RaceCell
		want  int
	}{
		"clean":                     {cells: []*RaceCell{{Settle: time.Second, Drains: 3}}},
		"short settle lets through": {cells: []*RaceCell{{Settle: 0, Drains: 3, Destroyed: 2}}},
		"settle covers the stall":   {cells: []*RaceCell{{Settle: time.Second, Drains: 3, Destroyed: 1}}, want: 1},
		"binding conditions":        {cells: []*RaceCell{{Settle: 0, Binding: true, Drains: 3, Unpublished: 1}}, want: 1},
		"undrained":                 {cells: []*RaceCell{{Settle: 0, Drains: 3, Undrained: 1}}, want: 1},
		"no drain":                  {cells: []*RaceCell{{Settle: time.Second}}, want: 1},
	} {
		t.Run(name, func(t *testing.T) {
			if got := RaceViolations(tc.cells, stall); len(got) != tc.want {
				t.Errorf("violations %q, want %d", got, tc.want)
			}
		})
	}
}
