package chaos

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/miglayout/miglayout/pkg/mig"
	"github.com/miglayout/miglayout/pkg/mig/nvmlsim"
	migslices "github.com/miglayout/miglayout/pkg/slices"
)

// autoPod is a pod of the Auto workload as the liveness check sees it: one claim for
// one MIG device of Profile.
type autoPod struct {
	Name     string
	Profile  string
	Priority int32
}

// gpuView is one GPU of a chaos node as the liveness check sees it: the devices that
// must stay (allocated to a claim, or running a process) and whether MIG is on.
type gpuView struct {
	Node   string
	Index  int
	Model  *mig.Model
	MIGOn  bool
	Pinned mig.Layout
}

func (g gpuView) String() string {
	return fmt.Sprintf("%s gpu %d (pinned %s)", g.Node, g.Index, g.Pinned)
}

// gpuViews builds the GPUs of the nodes from NVML's state and the devices in use:
// inUse holds, per node, the names of devices a claim's allocation references; a GPU
// instance running a simulated process is in use too.
func gpuViews(states map[string]nvmlsim.State, inUse map[string]sets.Set[string]) ([]gpuView, error) {
	var out []gpuView
	for _, node := range slices.Sorted(maps.Keys(states)) {
		st := states[node]
		busy := sets.New[[2]int]() // gpu index, GI ID
		for _, p := range st.Processes {
			busy.Insert([2]int{p.GPUIndex, p.GIID})
		}
		for _, g := range st.GPUs {
			m, err := mig.DefaultCatalog().Model(g.Model)
			if err != nil {
				return nil, fmt.Errorf("finding the model of %s gpu %d: %w", node, g.Index, err)
			}
			v := gpuView{Node: node, Index: g.Index, Model: m, MIGOn: g.MIGCurrent && g.MIGPending && !g.Lost}
			for _, gi := range g.GPUInstances {
				name := migslices.MIGDeviceName(g.Index, gi.Profile, gi.ProfileID, gi.Placement.Start)
				if inUse[node].Has(name) || busy.Has([2]int{g.Index, gi.ID}) {
					v.Pinned = append(v.Pinned, mig.Device{Profile: gi.Profile, Start: gi.Placement.Start})
				}
			}
			v.Pinned = v.Pinned.Canonical()
			out = append(out, v)
		}
	}
	return out, nil
}

// fitsBeside reports whether a device of profile can be created on the GPU beside the
// devices that must stay (the free ones destroyed as needed).
func (g gpuView) fitsBeside(profile string) bool { return g.fitsAvoiding(profile, nil) }

// fitsAvoiding is fitsBeside with a device that overlaps none of the placements avoid.
func (g gpuView) fitsAvoiding(profile string, avoid []mig.Placement) bool {
	if !g.MIGOn {
		return false
	}
	if _, err := g.Model.Profile(profile); err != nil {
		return false
	}
	want := g.Pinned.Counts()
	want[profile]++
	_, err := g.Model.Fit(mig.FitRequest{Want: want, Current: g.Pinned, Pinned: g.Pinned, Avoid: avoid})
	return err == nil
}

// computeSlices is the size the planner orders pods by (largest first).
func computeSlices(profile string) int {
	n, err := mig.ParseProfileName(profile)
	if err != nil {
		return 0
	}
	return n.ComputeSlices
}

// plannedBefore reports whether the planner takes q before p: higher priority, then
// larger (pods of one priority are taken largest first; aging, an hour, never applies
// here).
func plannedBefore(q, p autoPod) bool {
	if q.Priority != p.Priority {
		return q.Priority > p.Priority
	}
	return computeSlices(q.Profile) >= computeSlices(p.Profile)
}

// judgement is the liveness verdict on the pending pods of a settled cluster.
type judgement struct {
	// Stuck: pending pods a GPU could serve now beside the devices in use, which no
	// rule of the planner keeps waiting (name → where they fit).
	Stuck map[string]string
	// Excused: pending pods no GPU can serve beside the devices in use, or that a
	// placement kept for a larger or higher-priority pod may keep out (name → why).
	Excused map[string]string
}

// keptPlacement is a placement the planner keeps for a pending pod (its last
// WaitingForCapacity event names it); Node is "" where that event says it keeps none.
type keptPlacement struct {
	Node      string
	GPU       int
	Placement mig.Placement
}

// judgePending decides, for each pending pod, whether it must be served: a pending pod
// that some GPU can take beside the devices that must stay is stuck, unless a pod the
// planner takes before it (higher priority, or as large or larger) waits for a placement
// of 3 compute slices or more that it cannot be given now: the planner keeps such a
// placement for it and gives later pods no device overlapping it. A pod cannot be given
// one now where it fits no GPU beside the devices in use, or fits only where placements
// are kept for pods planned before it (the planner then keeps it one elsewhere, on a GPU
// where it fits once devices are released). Where kept names the placement kept for
// such a pod, a later pod is stuck still if it fits beside the devices in use without
// overlapping it; where it does not, the pod is excused.
func judgePending(pending []autoPod, gpus []gpuView, kept map[string]keptPlacement) judgement {
	j := judgement{Stuck: map[string]string{}, Excused: map[string]string{}}
	// blocked: pods that cannot be given a device now, found until none is added
	// (a pod blocked by the placements kept for others may keep one that blocks more).
	fitsNowhere, blocked := map[string]bool{}, map[string]bool{}
	for _, p := range pending {
		fitsNowhere[p.Name] = !slices.ContainsFunc(gpus, func(g gpuView) bool { return g.fitsBeside(p.Profile) })
		blocked[p.Name] = fitsNowhere[p.Name]
	}
	// keptBefore is what the placements kept for the blocked pods planned before p
	// keep p from: the placements by GPU, the pods that hold them, and the blocked
	// pods whose placement is not known (their last note was not read).
	keptBefore := func(p autoPod) (avoid map[[2]string][]mig.Placement, keepers, unknown []string) {
		avoid = map[[2]string][]mig.Placement{} // node, gpu → kept placements
		for _, q := range pending {
			if q.Name == p.Name || !blocked[q.Name] || computeSlices(q.Profile) < 3 || !plannedBefore(q, p) {
				continue
			}
			k, ok := kept[q.Name]
			if ok && k.Node == "" {
				continue // its last plan keeps nothing for it
			}
			if !ok {
				unknown = append(unknown, fmt.Sprintf("%s (%s, priority %d)", q.Name, q.Profile, q.Priority))
				continue
			}
			key := [2]string{k.Node, fmt.Sprint(k.GPU)}
			avoid[key] = append(avoid[key], k.Placement)
			keepers = append(keepers, fmt.Sprintf("%s (%s@%d of %s/gpu-%d)", q.Name, q.Profile, k.Placement.Start, k.Node, k.GPU))
		}
		return avoid, keepers, unknown
	}
	fitsOn := func(p autoPod, avoid map[[2]string][]mig.Placement) []string {
		var on []string
		for _, g := range gpus {
			if g.fitsAvoiding(p.Profile, avoid[[2]string{g.Node, fmt.Sprint(g.Index)}]) {
				on = append(on, g.String())
			}
		}
		return on
	}
	for grew := true; grew; {
		grew = false
		for _, p := range pending {
			if blocked[p.Name] {
				continue
			}
			// One that a pod of unknown placement may keep out may be blocked: its
			// own kept placement, where known, is avoided.
			if avoid, _, unknown := keptBefore(p); len(unknown) > 0 || len(fitsOn(p, avoid)) == 0 {
				blocked[p.Name], grew = true, true
			}
		}
	}
	for _, p := range pending {
		if fitsNowhere[p.Name] {
			j.Excused[p.Name] = fmt.Sprintf("%s fits no GPU beside the devices in use", p.Profile)
			continue
		}
		avoid, keepers, unknown := keptBefore(p)
		if len(unknown) > 0 {
			j.Excused[p.Name] = fmt.Sprintf("%s fits, but a placement may be kept for %s", p.Profile, strings.Join(unknown, ", "))
			continue
		}
		on := fitsOn(p, avoid)
		if len(on) == 0 {
			j.Excused[p.Name] = fmt.Sprintf("%s fits only where placements are kept for %s", p.Profile, strings.Join(keepers, ", "))
			continue
		}
		why := fmt.Sprintf("%s (priority %d) fits on %s", p.Profile, p.Priority, strings.Join(on, "; "))
		if len(keepers) > 0 {
			why += ", clear of the placements kept for " + strings.Join(keepers, ", ")
		}
		j.Stuck[p.Name] = why
	}
	return j
}

// holdTogether reports whether the GPUs, every device freed, could hold every pending
// pod's device at once.
func holdTogether(pending []autoPod, gpus []gpuView) bool {
	var models []*mig.Model
	for _, g := range gpus {
		if g.MIGOn {
			models = append(models, g.Model)
		}
	}
	want := map[string]int{}
	for _, p := range pending {
		want[p.Profile]++
	}
	return mig.HoldTogether(models, want)
}

func describeVerdicts(m map[string]string) []string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		out = append(out, k+": "+m[k])
	}
	sort.Strings(out)
	return out
}
