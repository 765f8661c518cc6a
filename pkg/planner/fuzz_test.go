package planner

import (
	"context"
	"fmt"
	"testing"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/miglayout/miglayout/pkg/mig"
)

// FuzzPlan builds small snapshots from fuzz bytes (layouts taken from the
// model's maximal layouts and their subsets, pins, pods asking for profiles
// or memory) and checks that Plan never panics, never destroys a pinned
// device, only plans valid layouts, keeps the limits on GPUs changed at once
// (per node and per group), and accounts for every pending pod once.
func FuzzPlan(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9})
	f.Add([]byte{255, 0, 255, 0, 17, 33, 65, 129})
	// Seeds that plan something, so that the checks below run under plain
	// go test too (the two above give no pending pod): two nodes, one GPU
	// in use, five pods of one and two devices, a claim shared and one by
	// memory; the second is the same on a frozen node with a change in flight.
	f.Add([]byte{0, 1, 2, 1, 0, 0, 0, 1, 0, 0, 1, 0, 1, 1, 1, 0, 1, 0, 0, 1, 1,
		5, 1, 1, 10, 2, 0, 0, 1, 9, 3, 1, 4, 1, 8, 2, 0, 0, 0, 40, 7, 0, 2, 1, 6, 1, 0})
	f.Add([]byte{1, 1, 2, 1, 0, 0, 0, 0, 0, 0, 1, 0, 1, 0, 1, 0, 1, 0, 0, 1, 1,
		5, 1, 1, 10, 2, 0, 0, 1, 9, 3, 1, 4, 1, 8, 2, 0, 0, 0, 40, 7, 0, 2, 1, 6, 1, 0})
	models := []string{"A100-SXM4-80GB", "H100-SXM5-80GB", "A30"}
	f.Fuzz(func(t *testing.T, data []byte) {
		next := func() int {
			if len(data) == 0 {
				return 0
			}
			b := int(data[0])
			data = data[1:]
			return b
		}
		// One group of every node: a limit across the snapshot.
		snap := Snapshot{Driver: driver, Classes: []*resourceapi.DeviceClass{migClass()}, GroupMaxGPUs: map[string]int{"all": next() % 4}}
		for n := range 1 + next()%3 {
			b := node(fmt.Sprintf("n%d", n)).policy(Policy{MaxGPUsPerNode: next() % 3, Group: "all"})
			for range 1 + next()%3 {
				m, _ := mig.DefaultCatalog().Model(models[next()%len(models)])
				all := m.MaximalLayouts()
				full := all[next()%len(all)]
				var layout, pinned mig.Layout
				mask := next()
				for i, d := range full {
					if mask&(1<<i) != 0 {
						layout = append(layout, d)
						if next()%3 == 0 {
							pinned = append(pinned, d)
						}
					}
				}
				b.gpu(m.Name, layout.String(), pinned.String())
				if next()%5 == 0 {
					b.changing()
				}
			}
			if next()%6 == 0 {
				b.frozen()
			}
			snap.Nodes = append(snap.Nodes, b.build())
		}
		profiles := []string{"1g.10gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb", "1g.6gb", "2g.12gb"}
		for i := range next() % 6 {
			expr := profileIs(profiles[next()%len(profiles)])
			if next()%4 == 0 {
				expr = fmt.Sprintf("device.attributes['mig.miglayout.io'].memory >= %d", next()*300)
			}
			b := pod(fmt.Sprintf("p%d", i), next())
			// Some pods share a claim, alone or beside their own.
			switch next() % 4 {
			case 0:
				b.sharedClaim("shared", profileIs("2g.20gb"))
			case 1:
				b.sharedClaim("shared", profileIs("2g.20gb")).claim(expr, int64(1+next()%2))
			default:
				b.claim(expr, int64(1+next()%2))
			}
			snap.Pending = append(snap.Pending, b.build())
		}
		res, err := Plan(context.Background(), snap)
		if err != nil {
			t.Fatal(err)
		}
		// Every pending pod ends in exactly one of Served, Kept, Unservable.
		ends := map[string]int{}
		for _, s := range res.Served {
			ends[s.Pod]++
		}
		for pod := range res.Kept {
			ends[pod]++
		}
		for pod := range res.Unservable {
			ends[pod]++
		}
		for _, p := range snap.Pending {
			if n := ends[podKey(p.Pod)]; n != 1 {
				t.Errorf("pod %s is in %d of Served, Kept and Unservable, want 1", podKey(p.Pod), n)
			}
		}
		// Nothing is planned on a frozen node (agent lost).
		frozen := map[string]bool{}
		for _, n := range snap.Nodes {
			frozen[n.Node.Name] = n.Frozen
		}
		for _, s := range res.Served {
			if frozen[s.Node] {
				t.Errorf("pod %s served on frozen node %s", s.Pod, s.Node)
			}
		}
		for pod, k := range res.Kept {
			if frozen[k.Node] {
				t.Errorf("pod %s keeps a placement on frozen node %s", pod, k.Node)
			}
		}
		// A node changes at most MaxGPUsPerNode GPUs at once (at least
		// one), the group at most GroupMaxGPUs, changes in flight counted
		// (a retried change is not).
		inFlight, changed, groupChanged := map[string]int{}, map[string]int{}, 0
		for _, n := range snap.Nodes {
			for _, g := range n.GPUs {
				if g.Changing && !g.Retrying {
					inFlight[n.Node.Name]++
					groupChanged++
				}
			}
		}
		for _, c := range res.Changes {
			changed[c.Node]++
			groupChanged++
		}
		for _, n := range snap.Nodes {
			if c := changed[n.Node.Name]; c > 0 && c+inFlight[n.Node.Name] > max(1, n.Policy.MaxGPUsPerNode) {
				t.Errorf("node %s: %d GPUs changed with %d in flight, limit %d", n.Node.Name, c, inFlight[n.Node.Name], n.Policy.MaxGPUsPerNode)
			}
		}
		if limit := snap.GroupMaxGPUs["all"]; limit > 0 && len(res.Changes) > 0 && groupChanged > limit {
			t.Errorf("group: %d GPUs changing, limit %d", groupChanged, limit)
		}
		for _, c := range res.Changes {
			if frozen[c.Node] {
				t.Errorf("%s/%d changes on a frozen node", c.Node, c.GPU)
			}
			for _, n := range snap.Nodes {
				for _, g := range n.GPUs {
					if n.Node.Name != c.Node || g.Info.Index != c.GPU {
						continue
					}
					if g.Changing {
						t.Errorf("%s/%d changes while a change is in flight", c.Node, c.GPU)
					}
					for _, d := range g.Pinned {
						if !c.To.Contains(d) {
							t.Errorf("%s/%d: pinned %s destroyed (%s -> %s)", c.Node, c.GPU, d, c.From, c.To)
						}
					}
					if err := g.Info.Model.Validate(c.To); err != nil {
						t.Errorf("%s/%d: %v", c.Node, c.GPU, err)
					}
				}
			}
		}
	})
}
