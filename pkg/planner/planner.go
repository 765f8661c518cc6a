package planner

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	resourcehelper "k8s.io/component-helpers/resource"

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
	// podMark numbers the pods serveSingle plans (nodeState.mark).
	podMark uint64
	// allOwned counts the nodes an All-mode pod of the plan has
	// (nodeState.allOwner).
	allOwned int
	snap     Snapshot
	match    *matcher
	nodes    []*nodeState
	// resources numbers the resources nodes list as allocatable (Room),
	// roomVectors memoises each pod's requests by it (roomVector); both
	// empty in the plans fitsWhenFree makes.
	resources   map[corev1.ResourceName]int
	roomVectors map[string][]int64
	// maxRequest is the largest request of each resource among the
	// pending pods (initRoom).
	maxRequest []int64
	gpus       []*gpuState
	classes    map[string]*class
	order      []string // class keys in creation order, for determinism
	adds       map[additionKey]*addition
	noAdd      map[additionKey]bool
	// groups are the limits of Snapshot.GroupMaxGPUs, by group;
	// ungrouped is true where some node that is not Frozen is in none.
	groups    map[string]*groupCount
	ungrouped bool
	// claimsServed maps the claims (namespace/name) of the pods served so
	// far in this plan to the pod (namespace/name) served.
	claimsServed map[string]string
	// claimsKept maps the claims of the pods a placement is kept for
	// (Result.Kept) to those pods.
	claimsKept map[string]string
	// roomLost memoises mig.Model.RoomLost by model and device, for the
	// publication order of the scheduler replays.
	roomLost map[*mig.Model]map[mig.Device][]int
	// claimCount is the number of claims of each pod served or kept for
	// so far.
	claimCount map[string]int
	// sharers are the pods whose claims are exactly those of one pod
	// served earlier in the plan (they get that pod's devices), in
	// planning order.
	sharers []sharer
	result  Result
	// free indexes GPUs by the profiles of their free devices.
	free map[string]*freeList
	// models are the GPU models of the snapshot; kinds its kinds of GPU
	// (gpuKind), each with a stand-in GPU.
	models []*mig.Model
	kinds  []gpuKindInfo
	// feasibleBy caches node feasibility by the pod's scheduling
	// constraints (node selector, affinity, tolerations).
	feasibleBy map[string][]*nodeState
	// servedAt indexes result.Served by pod.
	servedAt map[string]int
	// otherHeld is what claims hold of other drivers' devices
	// (Snapshot.OtherHeld);
	// otherPlanned what pods served by this plan count on (no later pod
	// of the plan gets a device, or a share's capacity, they take).
	otherHeld, otherPlanned otherTotal
	// othersAdmitting caches othersAdmit by claim shape, othersVerdicts
	// its verdicts by claim shape and device signature, deviceSigs
	// deviceSignature by device.
	othersAdmitting map[string]map[*nodeState][]admitted
	othersVerdicts  map[string]bool
	deviceSigs      map[*resourceapi.Device]string
	// fitsFree caches fitsWhenFree by kind of node and pod; nodeKinds
	// numbers the kinds of node (nodeState.kind); classesNameGPU whether a
	// DeviceClass may select one GPU (nil: not looked at yet).
	fitsFree map[fitsKey]bool
	// refused are the node states where the allocator refused a kind of
	// pod of several devices (serveMulti); agreeRuns counts the
	// scheduler's replays (nodeAgrees), to tell such a refusal.
	refused   map[refusal]bool
	agreeRuns int
	// podKinds memoises claimsKind by the pod's claims (their addresses).
	podKinds map[string]string
	// planned memoises plannedDevice.
	planned map[plannedKey]resourceapi.Device
	// fitsFreeReason is the reason of each of fitsFree's plans that did
	// not serve the pod.
	fitsFreeReason map[fitsKey]freeReason
	nodeKinds      map[string]int
	classesNameGPU *bool
	// nested: this plan is fitsWhenFree's (no fitsWhenFree inside).
	nested bool
	// coming maps a pod to the GPUs whose change in flight names it
	// (GPU.Serves), on nodes that are not Frozen or carry on (CarriesOn).
	coming map[string][]*gpuState
	// podOf are the pods planned, by key; restOf the other drivers'
	// devices of the pods served.
	podOf  map[string]Pod
	restOf map[string]OtherHolds
	// accepts are, for pods of one device judged on a stand-in GPU
	// (serveSingle), the profiles that satisfy it by kind of GPU.
	accepts map[string]map[string][]string
}

// Plan computes the changes that serve snap.Pending. It returns an error only
// for input it cannot read (a CEL expression that does not compile, a GPU
// without a catalog model). Every pending pod ends in Result.Served,
// Result.Kept (no GPU can take it now; a placement is kept for it) or
// Result.Unservable (with the reason).
func Plan(ctx context.Context, snap Snapshot) (Result, error) {
	pl, err := NewPlanner(ctx, snap)
	if err != nil {
		return Result{}, err
	}
	return pl.Result(), nil
}

// Planner is a plan that grows: NewPlanner plans a snapshot's pending pods,
// Add plans one more pod on top without revisiting earlier decisions, for a
// caller that keeps a plan between arrivals. The controller does not: each
// of its passes plans the batch whole (Plan), the changes in flight given as
// GPUs that are Changing and the pods they serve (GPU.Serves), so that the
// order of pods, spares and idle GPUs given back are decided again on what
// the cluster is now.
type Planner struct{ p *planner }

// NewPlanner plans snap.Pending.
func NewPlanner(ctx context.Context, snap Snapshot) (*Planner, error) {
	return newPlanner(ctx, snap, false)
}

// newPlanner plans snap.Pending; nested is set for the plans fitsWhenFree
// makes, which report a pod nothing serves without asking again.
func newPlanner(ctx context.Context, snap Snapshot, nested bool) (*Planner, error) {
	p := &planner{nested: nested, snap: snap, match: newMatcher(snap.Driver, snap.Classes), classes: map[string]*class{},
		adds: map[additionKey]*addition{}, noAdd: map[additionKey]bool{},
		free: map[string]*freeList{}, feasibleBy: map[string][]*nodeState{}, servedAt: map[string]int{},
		otherPlanned: newOtherTotal(), othersAdmitting: map[string]map[*nodeState][]admitted{}, othersVerdicts: map[string]bool{}, deviceSigs: map[*resourceapi.Device]string{}, groups: map[string]*groupCount{}, refused: map[refusal]bool{}, podKinds: map[string]string{}, planned: map[plannedKey]resourceapi.Device{}, claimsServed: map[string]string{}, claimsKept: map[string]string{}, claimCount: map[string]int{},
		podOf: map[string]Pod{}, restOf: map[string]OtherHolds{}, accepts: map[string]map[string][]string{}}
	p.otherHeld = newOtherTotal()
	p.otherHeld.add(snap.OtherHeld)
	p.result.Unservable = map[string]string{}
	p.result.Kept = map[string]Kept{}
	if !nested {
		// The plans fitsWhenFree makes ask whether devices could serve
		// a pod at all, whatever the nodes' pods use.
		p.resources, p.roomVectors = resourceIndex(snap.Nodes), map[string][]int64{}
	}
	if err := p.load(); err != nil {
		return nil, err
	}
	pods, err := p.orderPods(ctx, snap.Pending)
	if err != nil {
		return nil, err
	}
	p.initRoom(pods)
	// The pods changes in flight are for keep the devices they bring
	// (GPU.Serves), before the queue's order gives them to others.
	rest := make([]Pod, 0, len(pods))
	for _, pod := range pods {
		served, err := p.serveComing(ctx, pod)
		if err != nil {
			if err := p.podFailed(ctx, pod, err); err != nil {
				return nil, err
			}
			continue
		}
		if !served {
			rest = append(rest, pod)
		}
	}
	for _, pod := range rest {
		if err := p.serve(ctx, pod); err != nil {
			if err := p.podFailed(ctx, pod, err); err != nil {
				return nil, err
			}
		}
	}
	p.reclaimIdle()
	p.keepSpares()
	return &Planner{p: p}, nil
}

// keepSpares adds, on each node whose policy asks for spares, free devices
// of each such profile up to the count, but only where that destroys no
// device (spares never cost a running or free device) and within the
// limits on GPUs changed at once.
func (p *planner) keepSpares() {
	for _, n := range p.nodes {
		if n.n.Frozen {
			continue
		}
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
					a := p.additionWith(g, prof, true)
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
				bestG.spares = append(bestG.spares, prof)
				if !bestG.g.Changing {
					p.reclass(bestG)
				}
				p.indexFree(bestG)
			}
			if have < want {
				if p.result.MissingSpares == nil {
					p.result.MissingSpares = map[string]map[string]int{}
				}
				if p.result.MissingSpares[n.n.Node.Name] == nil {
					p.result.MissingSpares[n.n.Node.Name] = map[string]int{}
				}
				p.result.MissingSpares[n.n.Node.Name][prof] = want - have
			}
		}
	}
}

// Add plans one more pending pod (first on the devices of the changes in
// flight that name it, see GPU.Serves), leaving the plan's earlier
// decisions, its spares and the idle GPUs it gives back as they are.
func (pl *Planner) Add(ctx context.Context, pod Pod) error {
	if served, err := pl.p.serveComing(ctx, pod); err != nil || served {
		return err
	}
	return pl.p.serve(ctx, pod)
}

// Result returns the plan so far.
func (pl *Planner) Result() Result {
	r := pl.p.result
	r.Served = slices.Clone(r.Served)
	r.Unservable = maps.Clone(r.Unservable)
	r.Kept = maps.Clone(r.Kept)
	if r.MissingSpares != nil {
		r.MissingSpares = make(map[string]map[string]int, len(pl.p.result.MissingSpares))
		for n, m := range pl.p.result.MissingSpares {
			r.MissingSpares[n] = maps.Clone(m)
		}
	}
	r.Changes = pl.p.changes()
	// A pod whose claims another served pod holds is served by the same
	// devices (and changes, see changes).
	for _, s := range pl.p.sharers {
		host := r.Served[pl.p.servedAt[s.host]]
		host.Pod, host.Devices = s.pod, slices.Clone(host.Devices)
		r.Served = append(r.Served, host)
	}
	return r
}

// sharer is a pod served with the devices of the pod (host) that holds all
// of its claims.
type sharer struct{ pod, host string }

func (p *planner) load() error {
	for i := range p.snap.Nodes {
		n := &p.snap.Nodes[i]
		ns := &nodeState{n: n, order: i, maxGPUs: max(1, n.Policy.MaxGPUsPerNode)}
		if len(p.resources) > 0 {
			ns.room = newRoom(*n, p.resources)
		}
		if limit := p.snap.GroupMaxGPUs[n.Policy.Group]; n.Policy.Group != "" && limit > 0 {
			if p.groups[n.Policy.Group] == nil {
				p.groups[n.Policy.Group] = &groupCount{max: limit}
			}
			ns.group = p.groups[n.Policy.Group]
		} else if !n.Frozen {
			p.ungrouped = true
		}
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
			k := kindOf(g.Info)
			gs := &gpuState{node: ns, order: len(p.gpus), g: g, model: g.Info.Model, kind: k.key, kindInfo: k, layout: g.Layout.Canonical(), fixed: g.Pinned.Canonical()}
			for _, d := range g.Shared.Canonical() {
				if gs.layout.Contains(d) && !gs.fixed.Contains(d) && !gs.shared.Contains(d) {
					gs.shared = append(gs.shared, d)
				}
			}
			if g.Changing && !g.Retrying {
				ns.touch()
			}
			ns.gpus = append(ns.gpus, gs)
			p.gpus = append(p.gpus, gs)
			if !slices.Contains(ns.gpuKinds, gs.kind) {
				ns.gpuKinds = append(ns.gpuKinds, gs.kind)
			}
			if n.Frozen {
				if n.CarriesOn {
					p.comes(gs) // its own pods' devices still come, or wait for them
				}
				continue // counted, never used otherwise
			}
			if !g.Changing {
				p.reclass(gs)
			}
			p.indexFree(gs)
			if g.Changing {
				p.comes(gs)
			}
			if !slices.Contains(p.models, gs.model) {
				p.models = append(p.models, gs.model)
			}
			if !slices.ContainsFunc(p.kinds, func(k gpuKindInfo) bool { return k.key == gs.kind }) {
				p.kinds = append(p.kinds, k)
			}
		}
		p.nodes = append(p.nodes, ns)
	}
	return nil
}

// comes records the pods g names (GPU.Serves) as served by the devices its
// change in flight brings, or, on a Frozen node that carries on, brought
// (serveComing).
func (p *planner) comes(g *gpuState) {
	for _, pod := range g.g.Serves {
		if p.coming == nil {
			p.coming = map[string][]*gpuState{}
		}
		p.coming[pod] = append(p.coming[pod], g)
	}
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
func (p *planner) feasibleNodes(pod Pod) []*nodeState {
	reqs := pendingRequests(pod)
	key := schedulingKey(pod, reqs)
	if ns, ok := p.feasibleBy[key]; ok {
		return ns
	}
	var out []*nodeState
	for _, n := range p.nodes {
		if !n.n.Frozen && feasible(pod.Pod, n.n.Node) && fitsAllocatable(reqs, n.n.Node) && allowedOn(pod, n.n.Node) && !devicePluginServes(pod, n.n.Node) {
			out = append(out, n)
		}
	}
	p.feasibleBy[key] = out
	return out
}

// feasibleOn reports whether the pod may run on node n as feasibleNodes
// and withRoom judge it, Frozen or not.
func (p *planner) feasibleOn(pod Pod, n *nodeState) bool {
	if !feasible(pod.Pod, n.n.Node) || !fitsAllocatable(pendingRequests(pod), n.n.Node) || !allowedOn(pod, n.n.Node) || devicePluginServes(pod, n.n.Node) {
		return false
	}
	return len(p.withRoom(pod, []*nodeState{n})) == 1
}

// allowedOn reports whether the node is one the pod's claims allocated
// already allow (each allocation's node selector matches it) and not one
// kube-scheduler keeps it off (Pod.Declined).
func allowedOn(pod Pod, node *corev1.Node) bool {
	if slices.Contains(pod.Declined, node.Name) {
		return false
	}
	for _, sel := range pod.AllocatedOn {
		if ok, err := nodeaffinity.NewLazyErrorNodeSelector(sel).Match(node); err != nil || !ok {
			return false
		}
	}
	return true
}

func schedulingKey(pod Pod, reqs corev1.ResourceList) string {
	b, _ := json.Marshal(struct {
		S map[string]string
		A *corev1.Affinity
		T []corev1.Toleration
		N []*corev1.NodeSelector
		D []string
		R corev1.ResourceList
		E []corev1.ResourceName
	}{pod.Pod.Spec.NodeSelector, pod.Pod.Spec.Affinity, pod.Pod.Spec.Tolerations, pod.AllocatedOn, pod.Declined, reqs, pod.ExtendedResources})
	return string(b)
}

// podRequests is what the pod asks of a node's allocatable resources, as
// kube-scheduler's NodeResourcesFit counts it (containers, init containers
// and sidecars, pod-level requests, overhead; component-helpers' resource
// helpers).
func podRequests(pod *corev1.Pod) corev1.ResourceList {
	return resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})
}

// pendingRequests is podRequests of a pending pod without the extended
// resources its claims stand for (Pod.ExtendedResources): those are
// devices, not node allocatable, where the planner plans for the pod.
func pendingRequests(pod Pod) corev1.ResourceList {
	reqs := podRequests(pod.Pod)
	for _, name := range pod.ExtendedResources {
		delete(reqs, name)
	}
	return reqs
}

// devicePluginServes reports whether the node lists one of the pod's
// DeviceClass-backed extended resources as allocatable above 0: there
// kube-scheduler leaves the resource to the node's device plugin and
// makes no claim for it (a MIG device made for the pod would not place
// it).
func devicePluginServes(pod Pod, node *corev1.Node) bool {
	for _, name := range pod.ExtendedResources {
		if q, ok := node.Status.Allocatable[name]; ok && q.Sign() > 0 {
			return true
		}
	}
	return false
}

// fitsAllocatable reports whether every resource the pod requests (reqs,
// pendingRequests: DRA-backed extended resources left out) fits in the
// node's allocatable at all, so that the pod is not planned where it could
// never run (its devices would count as serving it while it stays
// pending); what the node's pods use is judged apart (Room), since that
// changes. A resource the node does not list counts as 0 there, as in
// kube-scheduler's NodeResourcesFit (an extended resource no device plugin
// of the node serves); a node that lists no allocatable at all (its
// kubelet has not reported) is not judged.
func fitsAllocatable(reqs corev1.ResourceList, node *corev1.Node) bool {
	if len(node.Status.Allocatable) == 0 {
		return true
	}
	for name, q := range reqs {
		alloc := node.Status.Allocatable[name]
		if q.Cmp(alloc) > 0 {
			return false
		}
	}
	return true
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
	g.cls = c
	c.gpus = append(c.gpus, g)
}

func podKey(p *corev1.Pod) string { return p.Namespace + "/" + p.Name }

// feasible reports whether the pod may run on the node: required node
// affinity and nodeSelector, NoSchedule/NoExecute taints it does not
// tolerate, and a cordoned node (spec.unschedulable) unless it tolerates
// node.kubernetes.io/unschedulable, as kube-scheduler's NodeUnschedulable
// plugin decides before the node lifecycle controller taints the node.
// Numeric toleration operators (Gt, Lt) are evaluated: the API server
// admits a pod carrying one only where the scheduler's
// TaintTolerationComparisonOperators feature is on.
func feasible(pod *corev1.Pod, node *corev1.Node) bool {
	if ok, err := nodeaffinity.GetRequiredNodeAffinity(pod).Match(node); err != nil || !ok {
		return false
	}
	taints := node.Spec.Taints
	if node.Spec.Unschedulable {
		taints = append(slices.Clone(taints), corev1.Taint{Key: corev1.TaintNodeUnschedulable, Effect: corev1.TaintEffectNoSchedule})
	}
	_, untolerated := corev1helpers.FindMatchingUntoleratedTaint(klog.Background(), taints, pod.Spec.Tolerations, func(t *corev1.Taint) bool {
		return t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute
	}, true)
	return !untolerated
}

// podFailed records a pod whose claims the allocator could not evaluate (a
// selector's CEL fails at run time on miglayout's devices, a DeviceClass is
// missing) as unservable, with the allocator's error: one pod's bad claim
// does not stop the plan of the others, and the pod's event says what is
// wrong. It returns the error itself when ctx is done.
func (p *planner) podFailed(ctx context.Context, pod Pod, err error) error {
	if ctx.Err() != nil {
		return err
	}
	p.result.Unservable[podKey(pod.Pod)] = "evaluating the pod's claims: " + err.Error()
	return nil
}

// serve plans for one pod.
func (p *planner) serve(ctx context.Context, pod Pod) error {
	key := podKey(pod.Pod)
	p.podOf[key] = pod
	// A claim shared with a pod served earlier in this plan gets its
	// devices with that pod's allocation, rather than devices made a
	// second time for one claim. A pod with exactly that pod's claims is
	// served with it; any other waits for the shared claims' allocation
	// (and is planned, with them as AllocatedOn, once it exists).
	hosts := sets.New[string]()
	own := false
	for _, c := range pod.Claims {
		if h, ok := p.claimsServed[claimKey(c)]; ok {
			hosts.Insert(h)
		} else {
			own = true
		}
	}
	if hosts.Len() > 0 {
		host := sets.List(hosts)[0]
		node := p.result.Served[p.servedAt[host]].Node
		on := func(n *nodeState) bool { return n.n.Node.Name == node }
		switch {
		case !slices.ContainsFunc(p.feasibleNodes(pod), on):
			// The shared claims will be allocated on that node.
			p.result.Unservable[key] = fmt.Sprintf("the pod shares claims with pod %s, which this plan serves on node %s, where this pod may not run (node selector, affinity, tolerations, claims allocated already, or kube-scheduler did not bind it there)", host, node)
		case !slices.ContainsFunc(p.withRoom(pod, p.feasibleNodes(pod)), on):
			// Its node is the host's: it waits for room there.
			p.result.Unservable[key] = WaitsForNodeResources
		case !own && hosts.Len() == 1 && p.claimCount[host] == len(pod.Claims):
			p.sharers = append(p.sharers, sharer{pod: key, host: host})
			if n := p.nodes[slices.IndexFunc(p.nodes, on)]; n.room.alloc != nil {
				n.room.add(p.roomVector(pod), p.maxRequest)
			}
		default:
			p.result.Unservable[key] = WaitsForSharedClaim
			// Once the host's allocation lands, kube-scheduler
			// allocates the pod's other claims on that node.
			if w, ok := newWaiter(pod, slices.DeleteFunc(slices.Clone(pod.Claims), func(c *resourceapi.ResourceClaim) bool {
				_, shared := p.claimsServed[claimKey(c)]
				return shared
			})); ok {
				n := p.nodes[slices.IndexFunc(p.nodes, on)]
				n.waiting = append(n.waiting, w)
			}
		}
		if _, unserved := p.result.Unservable[key]; unserved {
			p.keepNominatedRoom(pod)
		}
		return nil
	}
	// A claim shared with a pod planned earlier that waits with a
	// placement kept for it: one placement for the claim, which is
	// allocated once. A pod with exactly that pod's claims waits on the
	// same placement; any other waits for the shared claims.
	keepers := sets.New[string]()
	for _, c := range pod.Claims {
		if k, ok := p.claimsKept[claimKey(c)]; ok {
			keepers.Insert(k)
		}
	}
	if keepers.Len() > 0 {
		keeper := sets.List(keepers)[0]
		kept := p.result.Kept[keeper]
		switch {
		case !slices.ContainsFunc(p.feasibleNodes(pod), func(n *nodeState) bool { return n.n.Node.Name == kept.Node }):
			p.result.Unservable[key] = fmt.Sprintf("the pod shares claims with pod %s, which waits for a placement kept on node %s, where this pod may not run (node selector, affinity, tolerations, claims allocated already, or kube-scheduler did not bind it there)", keeper, kept.Node)
		case keepers.Len() == 1 && p.claimCount[keeper] == len(pod.Claims) && !slices.ContainsFunc(pod.Claims, func(c *resourceapi.ResourceClaim) bool {
			return p.claimsKept[claimKey(c)] != keeper
		}):
			p.result.Kept[key] = kept
		default:
			p.result.Unservable[key] = WaitsForSharedClaim
		}
		p.keepNominatedRoom(pod)
		return nil
	}
	defer func() {
		record := p.claimsServed
		if _, ok := p.servedAt[key]; !ok {
			p.keepNominatedRoom(pod)
			if _, ok := p.result.Kept[key]; !ok {
				return
			}
			record = p.claimsKept
		}
		p.recordClaims(pod, record)
	}()
	if len(p.nodes) == 0 {
		p.result.Unservable[key] = NoAutoNode
		return nil
	}
	if err := p.serveOnLive(ctx, pod); err != nil {
		return err
	}
	// A pod that no live node can serve but a frozen one could, were its
	// GPUs free, waits for that node's agent rather than being told it
	// cannot be served. Where every node is frozen, one no node could
	// serve even then is told why, not only that the nodes cannot be
	// changed now (resuming them would not serve it).
	if why, ok := p.result.Unservable[key]; ok && why != NoRoom {
		frozen := p.frozenNodes(pod)
		if len(frozen) == 0 {
			return nil
		}
		fits, never, err := p.fitsFreeWhy(ctx, pod, frozen, false)
		if err != nil {
			return fmt.Errorf("planning pod %s: %w", key, err)
		}
		switch {
		case fits:
			p.result.Unservable[key] = WaitsForLostNode
		case strings.HasPrefix(why, noNodeChangeable):
			p.result.Unservable[key] = neverReason(pod, frozen, never) + " (nor can any Auto-mode node be changed now: " + frozenReasons(p.nodes) + ")"
		}
	}
	return nil
}

// neverReason is the reason no node of nodes could serve pod even with
// every GPU free, from never, what the plan of the pod alone on the first
// node so freed gave (fitsFreeWhy): told of the GPU models of every node.
func neverReason(pod Pod, nodes []*nodeState, never string) string {
	switch {
	case strings.HasPrefix(never, noProfile):
		var models []*mig.Model
		for _, n := range nodes {
			for _, g := range n.gpus {
				if !slices.Contains(models, g.model) {
					models = append(models, g.model)
				}
			}
		}
		return noProfileReason(models, pod.Claims[0].Name)
	case never == "" || never == "no room" || never == NoRoom || never == ExceedsChangeLimits:
		return "no Auto-mode node can hold all of the pod's claims at once, even with every GPU free"
	}
	return never
}

// noNodeChangeable starts the reason of a pod no Auto-mode node can be
// changed for now: every one is Frozen.
const noNodeChangeable = "no Auto-mode node can be changed now"

// keepNominatedRoom counts, on the node a preemption nominated the pod to
// (status.nominatedNodeName), the resources the pod requests, where the
// plan does not serve it: kube-scheduler keeps them there for it from the
// pods of its priority or lower, which the plan takes after it, whether or
// not its devices exist yet (another pod took its free device, or the
// limits on GPUs changed at once keep it from being made).
func (p *planner) keepNominatedRoom(pod Pod) {
	name := pod.Pod.Status.NominatedNodeName
	if name == "" {
		return
	}
	for _, n := range p.nodes {
		if n.n.Node.Name == name && n.room.alloc != nil {
			n.room.add(p.roomVector(pod), p.maxRequest)
			return
		}
	}
}

// serveOnLive serves the pod on the nodes that are not Frozen.
func (p *planner) serveOnLive(ctx context.Context, pod Pod) error {
	key := podKey(pod.Pod)
	feasibleNodes := p.feasibleNodes(pod)
	if len(feasibleNodes) == 0 {
		p.result.Unservable[key] = "no Auto-mode node matches the pod's node selector, affinity and tolerations and has the resources it requests allocatable at all (and matches the node selectors of its claims allocated already)"
		if !slices.ContainsFunc(p.nodes, func(n *nodeState) bool { return !n.n.Frozen }) {
			p.result.Unservable[key] = noNodeChangeable + ": " + frozenReasons(p.nodes)
		} else if len(pod.Declined) > 0 {
			undeclined := pod
			undeclined.Declined = nil
			if len(p.feasibleNodes(undeclined)) > 0 {
				p.result.Unservable[key] = DeclinedEverywhere
			}
		} else if len(pod.ExtendedResources) > 0 {
			withoutPlugin := pod
			withoutPlugin.ExtendedResources = nil
			if len(p.feasibleNodes(withoutPlugin)) > 0 {
				p.result.Unservable[key] = ServedByDevicePlugin
			}
		}
		return nil
	}
	if feasibleNodes = p.withRoom(pod, feasibleNodes); len(feasibleNodes) == 0 {
		p.result.Unservable[key] = WaitsForNodeResources
		return nil
	}
	// Nodes an All-mode pod has, and for such a pod the nodes others
	// use, are left out (looked for only where there may be some).
	if all := asksAll(pod); !adminOnly(pod) && (all || p.allOwned > 0) {
		if open := slices.DeleteFunc(slices.Clone(feasibleNodes), func(n *nodeState) bool { return !n.opensToAll(all) }); len(open) < len(feasibleNodes) {
			if len(open) == 0 {
				p.result.Unservable[key] = WaitsForAllModeNode
				if w, ok := newWaiter(pod, pod.Claims); ok {
					for _, n := range feasibleNodes {
						n.waiting = append(n.waiting, w)
					}
				}
				return nil
			}
			feasibleNodes = open
		}
	}
	if singleDevice(pod) {
		// Where its class also admits devices the plan does not make,
		// a free one may serve it.
		if done, err := p.serveSingleBesideOthers(ctx, pod, feasibleNodes); err != nil || done {
			return err
		}
		// A claim that reads a per-GPU attribute is judged on each
		// GPU's own devices.
		if p.match.perGPU(pod.Claims[0]) {
			return p.servePinned(ctx, pod, feasibleNodes)
		}
		return p.serveSingle(ctx, pod, feasibleNodes)
	}
	return p.serveMulti(ctx, pod, feasibleNodes)
}

// frozenReasons says why the nodes are Frozen: "node a: its agent is
// lost; node b: another MigLayout selects it too", the first three and how
// many more.
func frozenReasons(nodes []*nodeState) string {
	var out []string
	for _, n := range nodes {
		why := n.n.FrozenReason
		if why == "" {
			why = "its MigLayout is paused, its agent is lost, another MigLayout selects it too, or a DeviceTaintRule takes all its devices out of scheduling"
		}
		out = append(out, "node "+n.n.Node.Name+": "+why)
	}
	return strings.Join(firstN(out, 3), "; ")
}

// frozenNodes are the Frozen nodes the pod may run on.
func (p *planner) frozenNodes(pod Pod) []*nodeState {
	var out []*nodeState
	for _, n := range p.nodes {
		if n.n.Frozen && feasible(pod.Pod, n.n.Node) && fitsAllocatable(pendingRequests(pod), n.n.Node) && allowedOn(pod, n.n.Node) && !devicePluginServes(pod, n.n.Node) {
			out = append(out, n)
		}
	}
	return out
}

func claimKey(c *resourceapi.ResourceClaim) string { return c.Namespace + "/" + c.Name }

// recordClaims records the pod's claims in record (claimsServed or
// claimsKept), for the pods that share them.
func (p *planner) recordClaims(pod Pod, record map[string]string) {
	key := podKey(pod.Pod)
	for _, c := range pod.Claims {
		record[claimKey(c)] = key
	}
	p.claimCount[key] = len(pod.Claims)
}

// applyAddition makes a the planned layout of g and moves the soft
// reservations (devices of this plan's pods that do not exist yet) where a
// put them, updating those pods' placements.
func (p *planner) applyAddition(g *gpuState, a *addition) {
	if !g.touched {
		g.touched = true
		g.node.touch()
	}
	g.layout = a.layout
	if len(g.soft) == 0 {
		return
	}
	soft := map[mig.Device]string{}
	// The reservations that stay where they are (not g.hard(): shared
	// devices stay too, but are not used up).
	var fixed mig.Layout
	for _, d := range g.fixed {
		if _, ok := g.soft[d]; !ok {
			fixed = append(fixed, d)
		}
	}
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
	gr := g.node.group
	return gr == nil || gr.touched < gr.max
}

// plannedKey is a device of a GPU of the plan.
type plannedKey struct {
	g *gpuState
	d mig.Device
}

// plannedDevice is the device d of GPU g as its agent would publish it
// (slices.PlannedMIGDevice of the GPU's info, which does not change while
// the plan is made), made once per plan: the allocator and the scheduler's
// replay read the devices of a node for every pod tried there, and only
// read them.
func (p *planner) plannedDevice(g *gpuState, d mig.Device) (resourceapi.Device, error) {
	k := plannedKey{g, d}
	if dev, ok := p.planned[k]; ok {
		return dev, nil
	}
	dev, err := migslices.PlannedMIGDevice(g.g.Info, d)
	if err != nil {
		return dev, err
	}
	p.planned[k] = dev
	return dev, nil
}

// neverChanges reports whether GPU g may not change for the rest of the
// plan (mayChange): a change is in flight on it, or it is not changed yet
// and its node or group has changed all the GPUs it may.
func (p *planner) neverChanges(g *gpuState) bool {
	if g.g.Changing {
		return true
	}
	if g.touched {
		return false
	}
	return g.node.touched >= g.node.maxGPUs || g.node.group != nil && g.node.group.touched >= g.node.group.max
}

// untouchedMayChange reports whether a GPU the plan has not changed may
// still be changed somewhere (mayChange): on a node of no group, or of a
// group whose limit (Snapshot.GroupMaxGPUs) is not reached. Where it may
// not, only the GPUs changed already may change, and a walk of a class of
// others looking for one it may change can stop: at the CRD's default of 8
// GPUs per MigLayout, the thousands of pods left after the eighth change
// each walked every GPU of every class.
func (p *planner) untouchedMayChange() bool {
	if p.ungrouped {
		return true
	}
	for _, g := range p.groups {
		if g.touched < g.max {
			return true
		}
	}
	return false
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

// addition is the best way to add a device of prof to g (see add), nil
// where there is none.
func (p *planner) addition(g *gpuState, prof string) *addition {
	return p.additionWith(g, prof, false)
}

// additionWith is addition, keeping every free device when keepFree.
func (p *planner) additionWith(g *gpuState, prof string, keepFree bool) *addition {
	soft := g.softLayout()
	avoid := g.avoid()
	k := additionKey{model: g.model.Key(), orig: g.g.Layout.String(), layout: g.layout.String(), fixed: g.fixed.String(), soft: soft.String(), shared: g.shared.String(), tainted: g.g.Tainted.String(), profile: prof, keepFree: keepFree}
	if avoid != nil {
		k.avoid = avoid[0]
	}
	if a, ok := p.adds[k]; ok {
		return a
	}
	if p.noAdd[k] {
		return nil
	}
	a, ok := add(g.model, g.g.Layout, g.layout, g.hard(), soft, prof, avoid, g.g.Tainted, keepFree)
	if !ok {
		p.noAdd[k] = true
		return nil
	}
	p.adds[k] = &a
	return &a
}

// roomLostOf is m.RoomLost(d), memoised.
func (p *planner) roomLostOf(m *mig.Model, d mig.Device) []int {
	byDev := p.roomLost[m]
	if byDev == nil {
		if p.roomLost == nil {
			p.roomLost = map[*mig.Model]map[mig.Device][]int{}
		}
		byDev = map[mig.Device][]int{}
		p.roomLost[m] = byDev
	}
	r, ok := byDev[d]
	if !ok {
		r = m.RoomLost(d)
		byDev[d] = r
	}
	return r
}

// reserve records that pod will use device d of g.
func (p *planner) reserve(g *gpuState, d mig.Device, pod string, change bool) {
	g.node.servedHere++ // a pod of one device: never an All-mode one
	p.recordPlanned(g.node, pod, OtherHolds{})
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
	if g.node.n.Frozen {
		return // its GPUs are in no class nor free list (CarriesOn)
	}
	if !g.g.Changing {
		p.reclass(g)
	}
	p.indexFree(g)
}

// changes turns touched GPUs into Changes. A change serves, besides the
// pods it was planned for, the pods that share all their claims with one
// of them.
func (p *planner) changes() []Change {
	shared := map[string][]string{}
	for _, s := range p.sharers {
		shared[s.host] = append(shared[s.host], s.pod)
	}
	var out []Change
	for _, g := range p.gpus {
		if !g.touched || g.g.Changing {
			continue
		}
		plan := g.model.Diff(g.g.Layout, g.layout)
		if plan.Empty() {
			continue
		}
		serves := slices.Clone(g.serves)
		for _, pod := range g.serves {
			serves = append(serves, shared[pod]...)
		}
		var why []string
		if len(serves) > 0 {
			why = append(why, fmt.Sprintf("serves %d pending pod(s): %s", len(serves), strings.Join(firstN(serves, 5), ", ")))
		}
		if len(g.spares) > 0 {
			why = append(why, "keeps spare "+strings.Join(g.spares, ", "))
		}
		if g.reclaimed && len(serves) == 0 {
			why = append(why, fmt.Sprintf("gives the GPU, idle for %s, back whole", g.node.n.Policy.ReclaimIdleAfter))
		}
		out = append(out, Change{
			Node: g.node.n.Node.Name, GPU: g.g.Info.Index,
			From: g.g.Layout.Canonical(), To: g.layout, Destroyed: plan.Destroy, Created: plan.Create,
			Serves: serves, Spares: slices.Clone(g.spares), Reclaims: g.reclaimed && len(serves) == 0,
			Reason: strings.Join(why, "; "),
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
