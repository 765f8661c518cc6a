package planner

import (
	"cmp"
	"context"
	"encoding/json"
	"slices"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/miglayout/miglayout/pkg/mig"
	migslices "github.com/miglayout/miglayout/pkg/slices"
)

// schedulerLess orders pods as kube-scheduler's queue takes them, as far
// as the planner can tell: higher priority first (PrioritySort), then older,
// then by name. PrioritySort breaks a tie of priority by when each pod last
// entered the queue, a time the planner cannot read: a pod that failed
// goes back with the time of its failure, so pods pending together, tried
// and failed one after another, keep their order, which is their creation
// order unless a pod's retry came out of turn (a backoff, an event that
// woke one pod alone).
func schedulerLess(a, b Pod) int {
	pa, pb := int32(0), int32(0)
	if a.Pod.Spec.Priority != nil {
		pa = *a.Pod.Spec.Priority
	}
	if b.Pod.Spec.Priority != nil {
		pb = *b.Pod.Spec.Priority
	}
	if pa != pb {
		return cmp.Compare(pb, pa)
	}
	if c := a.Pod.CreationTimestamp.Compare(b.Pod.CreationTimestamp.Time); c != 0 {
		return c
	}
	return cmp.Compare(podKey(a.Pod), podKey(b.Pod))
}

// needsReplay reports whether serving the pod key on n needs the node's
// replay (nodeAgrees): n has GPUs of several kinds, or some pod of the
// node, or this one, is not exact. Pods that are all exact get their
// devices whichever of a profile's devices the scheduler gives each, as
// long as the plan made enough of each profile, which it does; on GPUs of
// several kinds a pod exact on each kind may still accept another profile
// on another GPU (the 1g of whichever model: a smaller 1g made for another
// pod on the other GPU comes first in publication order).
func (p *planner) needsReplay(n *nodeState, key string) bool {
	return len(n.gpuKinds) > 1 || !p.exact(key) || len(n.waiting) > 0 || slices.ContainsFunc(n.planned, func(k string) bool { return !p.exact(k) })
}

// waiter is a pod the plan leaves waiting that kube-scheduler may still
// allocate on a node (nodeState.waiting): with the claims it would
// allocate there, and what they ask (their specs, as JSON), which tells
// waiters that ask the same.
type waiter struct {
	pod  Pod
	asks string
}

// newWaiter is the waiter of pod that would allocate claims (those of pod
// not allocated with another pod's); ok is false where there are none: the
// pod takes nothing. Such a pod is one the plan leaves waiting though
// kube-scheduler may allocate it: an All-mode pod whose nodes each serve
// another pod (WaitsForAllModeNode), or a non-All-mode one whose nodes an
// All-mode pod has; a pod whose claims shared with a pod served on a node
// are allocated with that pod's (WaitsForSharedClaim), with its other
// claims. kube-scheduler tries every pending pod in its order, so such a
// pod, taken before a pod the plan serves there, may get the devices made
// for it (nodeAgrees).
func newWaiter(pod Pod, claims []*resourceapi.ResourceClaim) (waiter, bool) {
	if len(claims) == 0 {
		return waiter{}, false
	}
	specs := make([]resourceapi.ResourceClaimSpec, len(claims))
	for i, c := range claims {
		specs[i] = c.Spec
	}
	asks, err := json.Marshal(specs)
	if err != nil {
		// Told apart from every other waiter.
		asks = []byte(podKey(pod.Pod))
	}
	pod.Claims = claims
	return waiter{pod: pod, asks: string(asks)}, true
}

// exact reports whether the pod key's one device can be of one profile
// only, on any GPU of a kind (serveSingle recorded it in accepts).
func (p *planner) exact(key string) bool {
	ps, ok := p.accepts[key]
	if !ok {
		return false
	}
	for _, profiles := range ps {
		if len(profiles) > 1 {
			return false
		}
	}
	return true
}

// nodeAgrees plays kube-scheduler on node n once the plan has landed: the
// node publishes its planned devices (alt[g] instead of g's planned layout
// where set; the pinned ones allocated), and the pods the plan serves
// there, pod among them, are taken in the scheduler's order, each
// allocated by the scheduler's allocator, which knows nothing of the
// plan's reservations and gives a request the first devices it accepts in
// publication order. It reports whether every one of them gets its
// devices: where not, a device the plan made for one pod goes to another
// first (a claim open to several sizes takes a smaller one made later for
// another pod, a prioritized list its first choice made later for
// another), and the plan would promise what the scheduler does not give.
// The pods the plan leaves waiting that kube-scheduler may allocate on the
// node (n.waiting) are taken in their turn too: each one allocated takes
// its devices, one that cannot be waits.
func (p *planner) nodeAgrees(ctx context.Context, n *nodeState, pod Pod, alt map[*gpuState]mig.Layout) (bool, error) {
	p.agreeRuns++
	pods := []Pod{pod}
	for _, k := range n.planned {
		pods = append(pods, p.podOf[k])
	}
	served := len(pods)
	waiting := sets.New[string]()
	asks := map[string]string{} // by waiting pod
	for _, w := range n.waiting {
		if k := podKey(w.pod.Pod); k != podKey(pod.Pod) && !slices.Contains(n.planned, k) {
			pods = append(pods, w.pod)
			waiting.Insert(k)
			asks[k] = w.asks
		}
	}
	slices.SortStableFunc(pods, schedulerLess)
	if len(pods) > served {
		// Waiting pods after the last served one take nothing from it.
		end := len(pods)
		for end > 0 && waiting.Has(podKey(pods[end-1].Pod)) {
			end--
		}
		pods = pods[:end]
	}
	// A request for every matching device (of a pod served, or waiting
	// ahead of one) may match an allocated device of a profile the catalog
	// lacks, which the node publishes with what NVML reports of it: the
	// planner knows neither its memory nor its engines (a "-me" profile's
	// NVML values are not its base profile's catalog values either), so
	// the node is refused.
	if slices.ContainsFunc(pods, asksAll) && n.pinsUncatalogued() {
		return false, nil
	}
	if len(pods) == served {
		if agrees, ok := p.countsAgree(n, pods, alt); ok {
			return agrees, nil
		}
	}
	planned := p.otherPlanned.clone()
	for _, k := range n.planned {
		planned.remove(p.restOf[k])
	}
	var devices []resourceapi.Device
	taken := sets.New[string]()
	roomLost := map[string][]int{}
	for _, g := range n.gpus {
		layout, ok := alt[g]
		if !ok {
			layout = g.layout
		}
		for _, d := range layout {
			if !g.catalogued(d) {
				continue
			}
			dev, err := p.plannedDevice(g, d)
			if err != nil {
				return false, err
			}
			devices = append(devices, dev)
			roomLost[dev.Name] = p.roomLostOf(g.model, d)
			if g.g.Pinned.Contains(d) && !g.shared.Contains(d) {
				taken.Insert(dev.Name)
			}
		}
	}
	migslices.SortDevices(devices, roomLost)
	// What waiting pods not allocated ask: one that asks the same fails
	// again, as what is taken only grows.
	failed := sets.New[string]()
	for _, q := range pods {
		waits := waiting.Has(podKey(q.Pod))
		if waits && failed.Has(asks[podKey(q.Pod)]) {
			continue
		}
		res, admin, rest, err := p.match.allocate(ctx, n.n.Node, devices, taken, q.Claims,
			&others{slices: n.n.OtherSlices, held: p.otherHeld, planned: planned})
		if err != nil {
			return false, err
		}
		if res == nil {
			if waits {
				failed.Insert(asks[podKey(q.Pod)])
				continue
			}
			return false, nil
		}
		for _, name := range res {
			if !admin.Has(name) {
				taken.Insert(name)
			}
		}
		planned.add(rest)
	}
	return true, nil
}

// pinsUncatalogued reports whether a GPU of the node holds an allocated
// device of a profile its model's catalog lacks (catalogued).
func (n *nodeState) pinsUncatalogued() bool {
	return slices.ContainsFunc(n.gpus, func(g *gpuState) bool {
		return slices.ContainsFunc(g.g.Pinned, func(d mig.Device) bool { return !g.catalogued(d) })
	})
}

// agreesWith is nodeAgrees of pod on g's node with add (nil: none) made on
// g.
func (p *planner) agreesWith(ctx context.Context, pod Pod, g *gpuState, add *addition) (bool, error) {
	var alt map[*gpuState]mig.Layout
	if add != nil {
		alt = map[*gpuState]mig.Layout{g: add.layout}
	}
	return p.nodeAgrees(ctx, g.node, pod, alt)
}

// countsAgree is nodeAgrees without the allocator, where every pod (in
// the scheduler's order) asks for one device of some profiles on a node of
// one model of GPU, judged on a stand-in GPU (serveSingle records them in
// accepts): such a request takes the first free device in publication
// order (memory, multiprocessors, GPU index, placement start, as
// slices.SortDevices orders them) whose profile it accepts. ok is false
// where that does not hold (a pod of several devices or read per GPU, GPUs
// of several kinds): the allocator must decide.
func (p *planner) countsAgree(n *nodeState, pods []Pod, alt map[*gpuState]mig.Layout) (agrees, ok bool) {
	if len(n.gpus) == 0 {
		return false, false // a pod served by other devices: the allocator decides
	}
	kind, model := n.gpus[0].kind, n.gpus[0].model
	type freeDevice struct {
		profile  *mig.Profile
		roomLost []int
		gpu, at  int
		assigned bool
	}
	var free []freeDevice
	for _, g := range n.gpus {
		if g.kind != kind || g.model.Key() != model.Key() {
			return false, false
		}
		layout, set := alt[g]
		if !set {
			layout = g.layout
		}
		for _, d := range layout {
			pr, err := model.Profile(d.Profile)
			if err != nil || g.g.Pinned.Contains(d) && !g.shared.Contains(d) {
				continue
			}
			free = append(free, freeDevice{profile: pr, roomLost: p.roomLostOf(model, d), gpu: g.g.Info.Index, at: d.Start})
		}
	}
	// In the order the agent publishes them (slices.SortDevices), which
	// kube-scheduler's allocator tries them in: a profile's media-extension
	// twin has its memory and multiprocessors, and the room lost tells
	// them apart before the GPU index does.
	slices.SortFunc(free, func(a, b freeDevice) int {
		return cmp.Or(cmp.Compare(a.profile.MemoryMiB, b.profile.MemoryMiB), cmp.Compare(a.profile.Multiprocessors, b.profile.Multiprocessors),
			slices.Compare(a.roomLost, b.roomLost), cmp.Compare(a.gpu, b.gpu), cmp.Compare(a.at, b.at), cmp.Compare(a.profile.Name, b.profile.Name))
	})
	for _, q := range pods {
		accepted, simple := p.accepts[podKey(q.Pod)]
		if !simple {
			return false, false
		}
		i := slices.IndexFunc(free, func(d freeDevice) bool { return !d.assigned && slices.Contains(accepted[kind], d.profile.Name) })
		if i < 0 {
			return false, true
		}
		free[i].assigned = true
	}
	return true, true
}

// recordPlanned records that the plan serves the pod key on n, with the other
// drivers' devices rest.
func (p *planner) recordPlanned(n *nodeState, key string, rest OtherHolds) {
	n.planned = append(n.planned, key)
	if pod, ok := p.podOf[key]; ok && n.room.alloc != nil {
		n.room.add(p.roomVector(pod), p.maxRequest)
	}
	if !rest.empty() {
		p.restOf[key] = rest
	}
}
