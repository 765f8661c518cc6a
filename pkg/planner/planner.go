package planner

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"

	"github.com/miglayout/miglayout/pkg/mig"
	migslices "github.com/miglayout/miglayout/pkg/slices"
)

// planner holds the state of one Plan call.
type planner struct {
	snap    Snapshot
	match   *matcher
	nodes   []*nodeState
	gpus    []*gpuState
	classes map[string]*class
	order   []string // class keys in creation order, for determinism
	adds    map[additionKey]*addition
	noAdd   map[additionKey]bool
	touched int
	maxGPUs int
	result  Result
	// free indexes GPUs by the profiles of their free devices.
	free map[string]*freeList
	// models are the GPU models of the snapshot.
	models []*mig.Model
	// feasibleBy caches node feasibility by the pod's scheduling
	// constraints (node selector, affinity, tolerations).
	feasibleBy map[string][]*nodeState
	// servedAt indexes result.Served by pod.
	servedAt map[string]int
}

// Plan computes the changes that serve snap.Pending. It returns an error only
// for input it cannot read (a CEL expression that does not compile, a GPU
// without a catalog model); pods no node can serve are listed in
// Result.Unservable with the reason.
func Plan(ctx context.Context, snap Snapshot) (Result, error) {
	pl, err := NewPlanner(ctx, snap)
	if err != nil {
		return Result{}, err
	}
	return pl.Result(), nil
}

// Planner is a plan that grows: NewPlanner plans a snapshot's pending pods,
// Add plans one more pod on top without revisiting earlier decisions (what
// the controller does when demand arrives while GPUs are still changing).
type Planner struct{ p *planner }

// NewPlanner plans snap.Pending.
func NewPlanner(ctx context.Context, snap Snapshot) (*Planner, error) {
	p := &planner{snap: snap, match: newMatcher(snap.Driver, snap.Classes), classes: map[string]*class{},
		adds: map[additionKey]*addition{}, noAdd: map[additionKey]bool{}, maxGPUs: snap.MaxGPUs,
		free: map[string]*freeList{}, feasibleBy: map[string][]*nodeState{}, servedAt: map[string]int{}}
	p.result.Unservable = map[string]string{}
	if err := p.load(); err != nil {
		return nil, err
	}
	pods, err := p.orderPods(ctx, snap.Pending)
	if err != nil {
		return nil, err
	}
	for _, pod := range pods {
		if err := p.serve(ctx, pod); err != nil {
			return nil, err
		}
	}
	p.keepSpares()
	return &Planner{p: p}, nil
}

// keepSpares adds, on each node whose policy asks for spares, free devices
// of each such profile up to the count, but only where that destroys no
// device (spares never cost a running or free device) and within the
// limits on GPUs changed at once.
func (p *planner) keepSpares() {
	for _, n := range p.nodes {
		for _, prof := range slices.Sorted(maps.Keys(n.n.Policy.Spares)) {
			want := n.n.Policy.Spares[prof]
			have := 0
			for _, g := range n.gpus {
				for _, d := range g.free() {
					if d.Profile == prof {
						have++
					}
				}
			}
			for ; have < want; have++ {
				var bestG *gpuState
				var bestA *addition
				for _, g := range n.gpus {
					if !p.mayChange(g) || !n.allows(prof) {
						continue
					}
					if _, err := g.model.Profile(prof); err != nil {
						continue
					}
					a := p.addition(g, prof)
					if a == nil || a.destroyed > 0 {
						continue
					}
					if bestA == nil || g.touched && !bestG.touched || slices.Compare(a.headroom, bestA.headroom) > 0 && g.touched == bestG.touched {
						bestG, bestA = g, a
					}
				}
				if bestG == nil {
					break
				}
				p.applyAddition(bestG, bestA)
				bestG.serves = append(bestG.serves, "spare "+prof)
				if !bestG.g.Changing {
					p.reclass(bestG)
				}
				p.indexFree(bestG)
			}
		}
	}
}

// Add plans one more pending pod.
func (pl *Planner) Add(ctx context.Context, pod Pod) error { return pl.p.serve(ctx, pod) }

// Result returns the plan so far.
func (pl *Planner) Result() Result {
	r := pl.p.result
	r.Served = slices.Clone(r.Served)
	r.Unservable = maps.Clone(r.Unservable)
	r.Changes = pl.p.changes()
	return r
}

func (p *planner) load() error {
	for i := range p.snap.Nodes {
		n := &p.snap.Nodes[i]
		ns := &nodeState{n: n, order: i, maxGPUs: max(1, n.Policy.MaxGPUsPerNode)}
		if len(n.Policy.AllowedProfiles) > 0 {
			ns.allowed = map[string]bool{}
			for _, a := range n.Policy.AllowedProfiles {
				ns.allowed[a] = true
			}
			ns.policyKey = strings.Join(slices.Sorted(maps.Keys(ns.allowed)), ",")
		}
		for j := range n.GPUs {
			g := n.GPUs[j]
			if g.Info.Model == nil {
				return fmt.Errorf("planning node %s: GPU %d (%s) has no catalog model", n.Node.Name, g.Info.Index, g.Info.ProductName)
			}
			gs := &gpuState{node: ns, order: len(p.gpus), g: g, model: g.Info.Model, layout: g.Layout.Canonical(), fixed: g.Pinned.Canonical()}
			if g.Changing {
				ns.touched++
				p.touched++
			}
			ns.gpus = append(ns.gpus, gs)
			p.gpus = append(p.gpus, gs)
			if !g.Changing {
				p.reclass(gs)
			}
			p.indexFree(gs)
			if !slices.Contains(p.models, gs.model) {
				p.models = append(p.models, gs.model)
			}
		}
		p.nodes = append(p.nodes, ns)
	}
	return nil
}

// indexFree adds g, while a change is in flight on it, to the free lists of
// the profiles of its free devices (other GPUs are found through their
// classes).
func (p *planner) indexFree(g *gpuState) {
	if !g.g.Changing {
		return
	}
	for _, d := range g.free() {
		if g.inFree[d.Profile] {
			continue
		}
		if g.inFree == nil {
			g.inFree = map[string]bool{}
		}
		g.inFree[d.Profile] = true
		l, ok := p.free[d.Profile]
		if !ok {
			l = &freeList{}
			p.free[d.Profile] = l
		}
		l.gpus = append(l.gpus, g)
	}
}

// firstFree returns the first GPU in the free list of profile that still
// has a free device of it and passes use.
func (p *planner) firstFree(profile string, use func(*gpuState) bool) (*gpuState, mig.Device) {
	l := p.free[profile]
	if l == nil {
		return nil, mig.Device{}
	}
	for i := l.head; i < len(l.gpus); i++ {
		g := l.gpus[i]
		d, ok := g.hasFree(profile)
		if !ok {
			g.inFree[profile] = false
			if i == l.head {
				l.head++
			}
			continue
		}
		if use(g) {
			return g, d
		}
	}
	return nil, mig.Device{}
}

// feasibleNodes returns the nodes the pod may run on, cached by the pod's
// scheduling constraints.
func (p *planner) feasibleNodes(pod *corev1.Pod) []*nodeState {
	key := schedulingKey(pod)
	if ns, ok := p.feasibleBy[key]; ok {
		return ns
	}
	var out []*nodeState
	for _, n := range p.nodes {
		if feasible(pod, n.n.Node) {
			out = append(out, n)
		}
	}
	p.feasibleBy[key] = out
	return out
}

func schedulingKey(pod *corev1.Pod) string {
	b, _ := json.Marshal(struct {
		S map[string]string
		A *corev1.Affinity
		T []corev1.Toleration
	}{pod.Spec.NodeSelector, pod.Spec.Affinity, pod.Spec.Tolerations})
	return string(b)
}

// reclass moves g to the class of its current state.
func (p *planner) reclass(g *gpuState) {
	key := g.classKey()
	g.class = key
	c, ok := p.classes[key]
	if !ok {
		c = &class{key: key}
		p.classes[key] = c
		p.order = append(p.order, key)
	}
	c.gpus = append(c.gpus, g)
}

func podKey(p *corev1.Pod) string { return p.Namespace + "/" + p.Name }

// feasible reports whether the pod may run on the node: required node
// affinity and nodeSelector, and NoSchedule/NoExecute taints it does not
// tolerate.
func feasible(pod *corev1.Pod, node *corev1.Node) bool {
	if ok, err := nodeaffinity.GetRequiredNodeAffinity(pod).Match(node); err != nil || !ok {
		return false
	}
	_, untolerated := corev1helpers.FindMatchingUntoleratedTaint(klog.Background(), node.Spec.Taints, pod.Spec.Tolerations, func(t *corev1.Taint) bool {
		return t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute
	}, false)
	return !untolerated
}

// serve plans for one pod.
func (p *planner) serve(ctx context.Context, pod Pod) error {
	key := podKey(pod.Pod)
	feasibleNodes := p.feasibleNodes(pod.Pod)
	if len(feasibleNodes) == 0 {
		p.result.Unservable[key] = "no Auto-mode node matches the pod's node selector, affinity and tolerations"
		return nil
	}
	if singleDevice(pod) {
		return p.serveSingle(ctx, pod, feasibleNodes)
	}
	return p.serveMulti(ctx, pod, feasibleNodes)
}

// serveSingle serves a pod that needs exactly one device.
func (p *planner) serveSingle(ctx context.Context, pod Pod, nodes []*nodeState) error {
	key := podKey(pod.Pod)
	ok := make(map[*nodeState]bool, len(nodes))
	for _, n := range nodes {
		ok[n] = true
	}
	// Profiles that satisfy the claim, per model, best first.
	profiles := map[string][]string{}
	rank := map[string]map[string]int{}
	anyProfile := false
	for _, m := range p.models {
		ps, err := p.match.singleProfiles(ctx, pod.Claims[0], m)
		if err != nil {
			return fmt.Errorf("planning pod %s: %w", key, err)
		}
		profiles[m.Name] = ps
		rank[m.Name] = map[string]int{}
		for i, prof := range ps {
			rank[m.Name][prof] = i
		}
		anyProfile = anyProfile || len(ps) > 0
	}
	if !anyProfile {
		names := make([]string, len(p.models))
		for i, m := range p.models {
			names[i] = m.Name
		}
		slices.Sort(names)
		p.result.Unservable[key] = fmt.Sprintf("no profile of the Auto nodes' GPU models (%s) satisfies claim %s", strings.Join(names, ", "), pod.Claims[0].Name)
		return nil
	}

	// Every way to serve the pod is compared by one rule: least room for
	// large profiles taken from the devices that stay (best fit across
	// GPUs: a small device goes where it spoils the least, whether it
	// exists already or is created), then the fewest free devices
	// destroyed, then no change over a change, then a GPU the plan changes
	// anyway, then the most room left, the preferred profile, snapshot
	// order. So a free device on an otherwise empty GPU is not taken when
	// one can be created beside devices in use elsewhere: the empty GPU
	// stays whole for a large claim.
	type choice struct {
		g         *gpuState
		add       *addition // nil: a free device that exists or is coming
		dev       mig.Device
		loss      []int
		destroyed int
		headroom  []int
		idx       int // preference index of the profile
	}
	var best *choice
	better := func(c choice) bool {
		if best == nil {
			return true
		}
		if cmp := slices.Compare(c.loss, best.loss); cmp != 0 {
			return cmp < 0
		}
		if c.destroyed != best.destroyed {
			return c.destroyed < best.destroyed
		}
		if (c.add == nil) != (best.add == nil) {
			return c.add == nil
		}
		if c.g.touched != best.g.touched {
			return c.g.touched
		}
		if cmp := slices.Compare(c.headroom, best.headroom); cmp != 0 {
			return cmp > 0
		}
		if c.idx != best.idx {
			return c.idx < best.idx
		}
		return c.g.order < best.g.order
	}
	// Free devices coming with a change in flight (such GPUs are in no
	// class): the first GPU per profile.
	names := sets.New[string]()
	for _, ps := range profiles {
		names.Insert(ps...)
	}
	for _, prof := range sets.List(names) {
		g, d := p.firstFree(prof, func(g *gpuState) bool {
			_, fits := rank[g.model.Name][prof]
			return fits && ok[g.node] && g.heldBy == ""
		})
		if g == nil {
			continue
		}
		if cand := (choice{g: g, dev: d, loss: p.freeLoss(g, d), headroom: g.model.Headroom(g.layout), idx: rank[g.model.Name][prof]}); better(cand) {
			best = &cand
		}
	}
	live := p.order[:0]
	for _, ck := range p.order {
		c := p.classes[ck]
		if c.empty() {
			delete(p.classes, ck)
			continue
		}
		live = append(live, ck)
	}
	p.order = live
	for _, ck := range p.order {
		c := p.classes[ck]
		// The first GPU of the class this pod may use, and the first it
		// may change.
		var first, firstChange *gpuState
		c.members(func(g *gpuState) bool {
			if !ok[g.node] || g.heldBy != "" {
				return true
			}
			if first == nil {
				first = g
			}
			if p.mayChange(g) {
				firstChange = g
				return false
			}
			return true
		})
		if first == nil {
			continue
		}
		for _, d := range first.free() {
			i, fits := rank[first.model.Name][d.Profile]
			if !fits {
				continue
			}
			if cand := (choice{g: first, dev: d, loss: p.classFreeLoss(c, first, d), headroom: first.model.Headroom(first.layout), idx: i}); better(cand) {
				best = &cand
			}
		}
		if firstChange == nil {
			continue
		}
		for i, prof := range profiles[firstChange.model.Name] {
			if !firstChange.node.allows(prof) {
				continue
			}
			a := p.classAddition(c, firstChange, prof)
			if a == nil {
				continue
			}
			if cand := (choice{g: firstChange, add: a, dev: a.device, loss: a.loss, destroyed: a.destroyed, headroom: a.headroom, idx: i}); better(cand) {
				best = &cand
			}
		}
	}
	if best == nil {
		why := "no Auto-mode GPU has room for a device that satisfies the claim without destroying a device in use (or the policy's limits on GPUs changed at once are reached)"
		if held := p.hold(key, profiles, ok); held != nil {
			why += fmt.Sprintf("; %s/gpu-%d is kept for it: no other pending pod gets a device there", held.node.n.Node.Name, held.g.Info.Index)
		}
		p.result.Unservable[key] = why
		return nil
	}
	g := best.g
	if best.add == nil {
		p.reserve(g, best.dev, key, false)
		return nil
	}
	p.applyAddition(g, best.add)
	p.reserve(g, best.add.device, key, true)
	return nil
}

// largeComputeSlices is where a profile counts as large (3g, 4g, 7g): a
// pending pod of such a profile that nothing can serve holds a GPU.
const largeComputeSlices = 3

// hold keeps one GPU for a pod of a large profile that no GPU can take now:
// the GPU on a feasible node whose devices that must stay block the pod's
// profile the least (fewest in the way of its best placement, then fewest
// overall). Pods planned after it (younger or of lower priority) get no
// device there, so the GPU drains as its claims end instead of filling with
// small devices: a large claim then waits for one GPU's work to end, not
// for an unlikely moment when some GPU happens to be free. It returns the
// held GPU, or nil when the pod's profiles are small or no GPU can be held.
func (p *planner) hold(pod string, profiles map[string][]string, ok map[*nodeState]bool) *gpuState {
	var best *gpuState
	bestIn, bestAll := 0, 0
	// GPUs of a class block the pod's profile equally: the first one the
	// pod may hold stands for the class (GPUs in flight are in no class).
	for _, ck := range p.order {
		c := p.classes[ck]
		var g *gpuState
		c.members(func(m *gpuState) bool {
			if ok[m.node] && m.heldBy == "" {
				g = m
				return false
			}
			return true
		})
		if g == nil {
			continue
		}
		ps := profiles[g.model.Name]
		if len(ps) == 0 {
			continue
		}
		prof, err := g.model.Profile(ps[0])
		if err != nil || prof.ComputeSlices < largeComputeSlices || !g.node.allows(prof.Name) {
			continue
		}
		in := -1
		for _, pl := range prof.Placements {
			n := 0
			for _, d := range g.fixed {
				if dp, err := g.model.Placement(d); err == nil && dp.Overlaps(pl) {
					n++
				}
			}
			if in < 0 || n < in {
				in = n
			}
		}
		if best == nil || in < bestIn || in == bestIn && (len(g.fixed) < bestAll || len(g.fixed) == bestAll && g.order < best.order) {
			best, bestIn, bestAll = g, in, len(g.fixed)
		}
	}
	if best != nil {
		best.heldBy = pod
	}
	return best
}

// applyAddition makes a the planned layout of g and moves the soft
// reservations (devices of this plan's pods that do not exist yet) where a
// put them, updating those pods' placements.
func (p *planner) applyAddition(g *gpuState, a *addition) {
	if !g.touched {
		g.touched = true
		g.node.touched++
		p.touched++
	}
	g.layout = a.layout
	if len(g.soft) == 0 {
		return
	}
	soft := map[mig.Device]string{}
	fixed := g.hard()
	for d, pod := range g.soft {
		nd, ok := a.moved[d]
		if !ok {
			nd = d // placeReserved keeps every reservation; defensive
		}
		soft[nd] = pod
		fixed = append(fixed, nd)
		if nd != d {
			if i, ok := p.servedAt[pod]; ok {
				p.result.Served[i].Devices = []string{deviceName(g.g.Info, nd)}
			}
		}
	}
	g.soft, g.fixed = soft, fixed.Canonical()
}

// mayChange reports whether the plan may change g (again).
func (p *planner) mayChange(g *gpuState) bool {
	if g.g.Changing {
		return false
	}
	if g.touched {
		return true
	}
	if g.node.touched >= g.node.maxGPUs {
		return false
	}
	return p.maxGPUs == 0 || p.touched < p.maxGPUs
}

// freeLoss is the room for large profiles (mig.Model.Headroom, largest
// profile first) that reserving the free device d of g takes from the
// devices that stay; see addition.loss.
func (p *planner) freeLoss(g *gpuState, d mig.Device) []int {
	return headroomLoss(g.model, g.fixed, append(slices.Clone(g.fixed), d))
}

// classFreeLoss is freeLoss memoised on the class.
func (p *planner) classFreeLoss(c *class, g *gpuState, d mig.Device) []int {
	if l, ok := c.freeLoss[d]; ok {
		return l
	}
	if c.freeLoss == nil {
		c.freeLoss = map[mig.Device][]int{}
	}
	l := p.freeLoss(g, d)
	c.freeLoss[d] = l
	return l
}

// classAddition is addition memoised on the class (whose members share
// what decides it).
func (p *planner) classAddition(c *class, g *gpuState, prof string) *addition {
	if a, ok := c.adds[prof]; ok {
		return a
	}
	a := p.addition(g, prof)
	if c.adds == nil {
		c.adds = map[string]*addition{}
	}
	c.adds[prof] = a
	return a
}

func (p *planner) addition(g *gpuState, prof string) *addition {
	soft := g.softLayout()
	k := additionKey{g.model.Name, g.g.Layout.String(), g.layout.String(), g.fixed.String(), soft.String(), prof}
	if a, ok := p.adds[k]; ok {
		return a
	}
	if p.noAdd[k] {
		return nil
	}
	a, ok := add(g.model, g.g.Layout, g.layout, g.hard(), soft, prof)
	if !ok {
		p.noAdd[k] = true
		return nil
	}
	p.adds[k] = &a
	return &a
}

// reserve records that pod will use device d of g.
func (p *planner) reserve(g *gpuState, d mig.Device, pod string, change bool) {
	g.fixed = append(g.fixed, d).Canonical()
	if !g.g.Layout.Contains(d) && !g.g.Changing {
		if g.soft == nil {
			g.soft = map[mig.Device]string{}
		}
		g.soft[d] = pod
	}
	p.servedAt[pod] = len(p.result.Served)
	if change || g.touched {
		g.serves = append(g.serves, pod)
	}
	p.result.Served = append(p.result.Served, Placement{Pod: pod, Node: g.node.n.Node.Name,
		Devices: []string{deviceName(g.g.Info, d)}, NeedsChange: change || g.touched && !g.g.Layout.Contains(d)})
	if !g.g.Changing {
		p.reclass(g)
	}
	p.indexFree(g)
}

// serveMulti serves a pod with several devices, claims or constraints: node
// by node, it adds devices for each request (smallest satisfying profile of
// a single-device copy of it) and checks the whole pod with the allocator on
// the node's hypothetical pool.
func (p *planner) serveMulti(ctx context.Context, pod Pod, nodes []*nodeState) error {
	key := podKey(pod.Pod)
	for _, n := range nodes {
		placed, err := p.tryNode(ctx, pod, n)
		if err != nil {
			return fmt.Errorf("planning pod %s: %w", key, err)
		}
		if placed {
			return nil
		}
	}
	p.result.Unservable[key] = "no Auto-mode node can hold all of the pod's claims at once"
	return nil
}

func (p *planner) tryNode(ctx context.Context, pod Pod, n *nodeState) (bool, error) {
	// First with the node as planned so far.
	if devs, ok, err := p.allocateOn(ctx, pod, n); err != nil || ok {
		if ok {
			p.commitMulti(pod, n, devs)
		}
		return ok, err
	}
	// Then adding, per request, one device of its best profile per count.
	saved := make([]gpuState, len(n.gpus))
	for i, g := range n.gpus {
		saved[i] = *g
	}
	savedTouched, savedNodeTouched := p.touched, n.touched
	savedServed := make([][]string, len(p.result.Served))
	for i, s := range p.result.Served {
		savedServed[i] = s.Devices
	}
	restore := func() {
		for i, g := range n.gpus {
			*g = saved[i]
			if !g.g.Changing {
				p.reclass(g)
			}
		}
		p.touched, n.touched = savedTouched, savedNodeTouched
		for i := range savedServed {
			p.result.Served[i].Devices = savedServed[i]
		}
	}
	for _, c := range pod.Claims {
		for _, r := range c.Spec.Devices.Requests {
			one := c.DeepCopy()
			one.Spec.Devices.Constraints = nil
			one.Spec.Devices.Requests = []resourceapi.DeviceRequest{r}
			if one.Spec.Devices.Requests[0].Exactly != nil {
				ex := one.Spec.Devices.Requests[0].Exactly.DeepCopy()
				ex.AllocationMode, ex.Count = resourceapi.DeviceAllocationModeExactCount, 1
				one.Spec.Devices.Requests[0].Exactly = ex
			}
			count := 1
			if r.Exactly != nil && r.Exactly.AllocationMode == resourceapi.DeviceAllocationModeExactCount && r.Exactly.Count > 1 {
				count = int(r.Exactly.Count)
			}
			for range count {
				if !p.addOnNode(ctx, one, n, podKey(pod.Pod)) {
					break
				}
			}
		}
	}
	p.releaseTentative(n, podKey(pod.Pod))
	devs, ok, err := p.allocateOn(ctx, pod, n)
	if err != nil || !ok {
		restore()
		return false, err
	}
	p.commitMulti(pod, n, devs)
	return true, nil
}

// addOnNode adds one device satisfying the single-request claim c to the
// node's best GPU; it reports whether it could.
func (p *planner) addOnNode(ctx context.Context, c *resourceapi.ResourceClaim, n *nodeState, pod string) bool {
	var bestG *gpuState
	var bestA *addition
	for _, g := range n.gpus {
		if !p.mayChange(g) {
			continue
		}
		ps, err := p.match.singleProfiles(ctx, c, g.model)
		if err != nil {
			return false
		}
		for _, prof := range ps {
			if !n.allows(prof) {
				continue
			}
			if a := p.addition(g, prof); a != nil && (bestA == nil || slices.Compare(a.loss, bestA.loss) < 0 ||
				slices.Equal(a.loss, bestA.loss) && a.destroyed < bestA.destroyed) {
				bestG, bestA = g, a
			}
		}
	}
	if bestG == nil {
		return false
	}
	p.applyAddition(bestG, bestA)
	// Held for the pod while its other devices are added (a later addition
	// may move it but not drop it); released by releaseTentative.
	if bestG.soft == nil {
		bestG.soft = map[mig.Device]string{}
	}
	bestG.soft[bestA.device] = pod
	bestG.fixed = append(bestG.fixed, bestA.device).Canonical()
	if !bestG.g.Changing {
		p.reclass(bestG)
	}
	return true
}

// releaseTentative drops the reservations addOnNode made for pod on the
// node's GPUs: the devices stay in the planned layouts, free for the
// allocator to pick.
func (p *planner) releaseTentative(n *nodeState, pod string) {
	for _, g := range n.gpus {
		changed := false
		for d, owner := range g.soft {
			if owner != pod {
				continue
			}
			delete(g.soft, d)
			if i := slices.Index(g.fixed, d); i >= 0 {
				g.fixed = slices.Delete(g.fixed, i, i+1)
			}
			changed = true
		}
		if changed && !g.g.Changing {
			p.reclass(g)
		}
	}
}

// allocateOn runs the allocator for the pod on the node's planned devices;
// it returns the devices the allocation uses.
func (p *planner) allocateOn(ctx context.Context, pod Pod, n *nodeState) (map[*gpuState][]mig.Device, bool, error) {
	var devices []resourceapi.Device
	taken := sets.New[string]()
	owner := map[string]*gpuState{}
	byName := map[string]mig.Device{}
	for _, g := range n.gpus {
		for _, d := range g.layout {
			dev, err := migslices.PlannedMIGDevice(g.g.Info, d)
			if err != nil {
				return nil, false, err
			}
			devices = append(devices, dev)
			owner[dev.Name], byName[dev.Name] = g, d
			if g.fixed.Contains(d) {
				taken.Insert(dev.Name)
			}
		}
	}
	res, err := p.match.allocate(ctx, n.n.Node.Name, devices, taken, pod.Claims, &others{slices: n.n.OtherSlices, allocated: p.snap.OtherAllocated})
	if err != nil || res == nil {
		return nil, false, err
	}
	out := map[*gpuState][]mig.Device{}
	for _, name := range res {
		out[owner[name]] = append(out[owner[name]], byName[name])
	}
	return out, true, nil
}

func (p *planner) commitMulti(pod Pod, n *nodeState, devs map[*gpuState][]mig.Device) {
	key := podKey(pod.Pod)
	pl := Placement{Pod: key, Node: n.n.Node.Name}
	for _, g := range n.gpus {
		for _, d := range devs[g] {
			g.fixed = append(g.fixed, d).Canonical()
			pl.Devices = append(pl.Devices, deviceName(g.g.Info, d))
			if !g.g.Layout.Contains(d) {
				pl.NeedsChange = true
			}
		}
		if len(devs[g]) > 0 && g.touched {
			g.serves = append(g.serves, key)
		}
		if !g.g.Changing {
			p.reclass(g)
		}
		p.indexFree(g)
	}
	p.servedAt[key] = len(p.result.Served)
	p.result.Served = append(p.result.Served, pl)
}

// changes turns touched GPUs into Changes.
func (p *planner) changes() []Change {
	var out []Change
	for _, g := range p.gpus {
		if !g.touched || g.g.Changing {
			continue
		}
		plan := g.model.Diff(g.g.Layout, g.layout)
		if plan.Empty() {
			continue
		}
		out = append(out, Change{
			Node: g.node.n.Node.Name, GPU: g.g.Info.Index,
			From: g.g.Layout.Canonical(), To: g.layout, Destroyed: plan.Destroy, Created: plan.Create,
			Serves: slices.Clone(g.serves),
			Reason: fmt.Sprintf("serves %d pending pod(s): %s", len(g.serves), strings.Join(firstN(g.serves, 5), ", ")),
		})
	}
	return out
}

func firstN(s []string, n int) []string {
	if len(s) <= n {
		return s
	}
	return append(slices.Clone(s[:n]), fmt.Sprintf("and %d more", len(s)-n))
}
