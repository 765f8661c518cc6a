package planner

import (
	"context"
	"fmt"
	"math/rand"
	"strings"
	"testing"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/miglayout/miglayout/pkg/mig"
)

// TestPlanAroundUncataloguedGIs: on random A100 snapshots with free and
// pinned GPU instances of a profile the catalog lacks (1g.10gb-me, one
// memory slice), the planner never fails, never serves a pod with such a
// device, never destroys a pinned one, and plans only layouts the agent
// accepts and NVML can hold.
func TestPlanAroundUncataloguedGIs(t *testing.T) {
	m, _ := mig.DefaultCatalog().Model("A100-SXM4-80GB")
	all := m.MaximalLayouts()
	profiles := []string{"1g.10gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb", "1g.20gb"}
	fails := 0
	for seed := 0; seed < 1000 && fails < 10; seed++ {
		r := rand.New(rand.NewSource(int64(seed)))
		snap := Snapshot{Driver: driver, Classes: []*resourceapi.DeviceClass{migClass()}}
		for n := range 1 + r.Intn(2) {
			pol := Policy{MaxGPUsPerNode: r.Intn(3)}
			if r.Intn(3) == 0 {
				pol.Spares = map[string]int{profiles[r.Intn(3)]: 1 + r.Intn(2)}
			}
			b := node(fmt.Sprintf("n%d", n)).policy(pol)
			for range 1 + r.Intn(2) {
				full := all[r.Intn(len(all))]
				var layout, pinned mig.Layout
				for _, d := range full {
					if r.Intn(4) == 0 {
						continue
					}
					if d.Profile == "1g.10gb" && r.Intn(2) == 0 {
						d.Profile = "1g.10gb-me"
					}
					layout = append(layout, d)
					if r.Intn(3) == 0 {
						pinned = append(pinned, d)
					}
				}
				b.gpu(m.Name, layout.String(), pinned.String())
				if r.Intn(6) == 0 {
					b.changing()
				}
			}
			snap.Nodes = append(snap.Nodes, b.build())
		}
		for i := range r.Intn(5) {
			expr := profileIs(profiles[r.Intn(len(profiles))])
			switch r.Intn(5) {
			case 0:
				expr = fmt.Sprintf("device.attributes['mig.miglayout.io'].memory >= %d", r.Intn(40000))
			case 1:
				expr += fmt.Sprintf(" && device.attributes['mig.miglayout.io'].parentIndex == %d", r.Intn(2))
			}
			snap.Pending = append(snap.Pending, pod(fmt.Sprintf("p%d", i), r.Intn(100)).claim(expr, int64(1+r.Intn(2))).build())
		}
		res, err := Plan(context.Background(), snap)
		if err != nil {
			t.Errorf("seed %d: %v", seed, err)
			fails++
			continue
		}
		for pod, why := range res.Unservable {
			if strings.Contains(why, "evaluating") {
				t.Errorf("seed %d: %s unservable: %s", seed, pod, why)
				fails++
			}
		}
		for _, s := range res.Served {
			for _, d := range s.Devices {
				if d == "" { // a device of a profile the catalog lacks has no planned name
					t.Errorf("seed %d: %s served by %q", seed, s.Pod, d)
					fails++
				}
			}
		}
		for _, c := range res.Changes {
			var g *GPU
			for _, n := range snap.Nodes {
				if n.Node.Name == c.Node {
					g = &n.GPUs[c.GPU]
				}
			}
			for _, p := range g.Pinned {
				if !c.To.Contains(p) {
					t.Errorf("seed %d: change %s/%d destroys pinned %s", seed, c.Node, c.GPU, p)
					fails++
				}
			}
			held := map[mig.Device]mig.HeldInstance{}
			for _, d := range c.From {
				if d.Profile == "1g.10gb-me" {
					held[d] = mig.HeldInstance{Placement: mig.Placement{Start: d.Start, Size: 1}}
				}
			}
			real := mig.Layout{}
			for _, d := range c.To {
				if d.Profile == "1g.10gb-me" {
					d.Profile = "1g.10gb"
				}
				real = append(real, d)
			}
			// 1g.10gb-me counts like 1g.10gb for slices.
			if err := m.ValidateKeeping(c.To, held); err != nil {
				t.Errorf("seed %d: change %s/%d %s -> %s refused by agent: %v", seed, c.Node, c.GPU, c.From, c.To, err)
				fails++
			}
			if err := m.Validate(real); err != nil && !strings.Contains(err.Error(), "instances of 1g.10gb") {
				t.Errorf("seed %d: change %s/%d %s -> %s overlaps on hardware: %v", seed, c.Node, c.GPU, c.From, c.To, err)
				fails++
			}
		}
	}
}
