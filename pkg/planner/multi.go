package planner

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/miglayout/miglayout/pkg/mig"
	migslices "github.com/miglayout/miglayout/pkg/slices"
)

// serveMulti serves a pod with several devices, claims or constraints: node
// by node, it adds devices for each request (smallest satisfying profile of
// a single-device copy of it) and checks the whole pod with the allocator on
// the node's hypothetical pool.
func (p *planner) serveMulti(ctx context.Context, pod Pod, nodes []*nodeState) error {
	key := podKey(pod.Pod)
	// A node in the same state as one the pod failed on fails too, unless
	// a claim tells GPUs apart or other drivers' devices count.
	memo := !slices.ContainsFunc(pod.Claims, p.match.perGPU)
	failed := map[string]bool{}
	kind := ""
	if memo {
		var err error
		if kind, err = p.claimsKind(pod); err != nil {
			return fmt.Errorf("planning pod %s: %w", key, err)
		}
	}
	for _, n := range nodes {
		state := ""
		if memo && len(n.n.OtherSlices) == 0 {
			state = n.stateKey()
			if failed[state] || p.refused[refusal{kind, state}] {
				continue
			}
			// Nor can a node serve it that could not with every GPU
			// free (fitsWhenFree, memoised by kind of node): a pod no
			// node can hold is not tried node by node.
			if !p.nested {
				fits, err := p.fitsWhenFree(ctx, pod, []*nodeState{n})
				if err != nil {
					return fmt.Errorf("planning pod %s: %w", key, err)
				}
				if !fits {
					failed[state] = true
					continue
				}
			}
		}
		agreed := p.agreeRuns
		placed, err := p.tryNode(ctx, pod, n)
		if err != nil {
			return fmt.Errorf("planning pod %s: %w", key, err)
		}
		if placed {
			return nil
		}
		if state != "" {
			failed[state] = true
			if p.agreeRuns == agreed {
				// The allocator refused every way: any pod of these
				// claims is refused by a node in this state.
				p.refused[refusal{kind, state}] = true
			}
		}
	}
	if p.nested {
		p.result.Unservable[key] = "no room"
		return nil
	}
	fits, err := p.fitsWhenFree(ctx, pod, nodes)
	if err != nil {
		return fmt.Errorf("planning pod %s: %w", key, err)
	}
	if fits {
		// Within the limits on GPUs changed at once, or only above them?
		within, err := p.fitsWhenFreeWithin(ctx, pod, nodes)
		if err != nil {
			return fmt.Errorf("planning pod %s: %w", key, err)
		}
		p.result.Unservable[key] = NoRoom
		if !within {
			p.result.Unservable[key] = ExceedsChangeLimits
		}
		return nil
	}
	p.result.Unservable[key] = "no Auto-mode node can hold all of the pod's claims at once, even with every GPU free"
	return nil
}

// fitsWhenFree reports whether some node of nodes could serve the pod if
// none of its GPUs held a device and none of the other drivers' devices it
// can use were allocated: whether the pod only waits for room (NoRoom) or
// asks for what no node can hold. It plans the pod alone on such a node,
// once per kind of node and kind of pod (claim specs). Nodes are of a kind
// when their policies and GPUs (model and every attribute the devices
// publish but the GPU's own identity) are the same; the node itself is the
// kind where other drivers' slices are involved or where a selector may
// name one GPU (its uuid or PCI bus ID).
func (p *planner) fitsWhenFree(ctx context.Context, pod Pod, nodes []*nodeState) (bool, error) {
	return p.fitsFreeOn(ctx, pod, nodes, false)
}

// fitsWhenFreeWithin is fitsWhenFree within the node's limits on GPUs
// changed at once (Policy.MaxGPUsPerNode, and its group's
// Snapshot.GroupMaxGPUs) rather than with every GPU of the node changeable:
// false where the pod needs more GPUs made anew than the policy lets one
// plan change (ExceedsChangeLimits).
func (p *planner) fitsWhenFreeWithin(ctx context.Context, pod Pod, nodes []*nodeState) (bool, error) {
	return p.fitsFreeOn(ctx, pod, nodes, true)
}

// fitsFreeOn is fitsWhenFree, within the policy's limits on GPUs changed at
// once where limited is set.
func (p *planner) fitsFreeOn(ctx context.Context, pod Pod, nodes []*nodeState, limited bool) (bool, error) {
	fits, _, err := p.fitsFreeWhy(ctx, pod, nodes, limited)
	return fits, err
}

// fitsFreeWhy is fitsFreeOn with, where no node fits, why no node could
// ever serve the pod: the reason the plan of the pod alone on a node (with
// every GPU free) gave, the first node's, or the first other than no
// profile of the node's models where some node's is ("no room" from a pod
// of several devices).
func (p *planner) fitsFreeWhy(ctx context.Context, pod Pod, nodes []*nodeState, limited bool) (bool, string, error) {
	why := ""
	podKind, err := p.claimsKind(pod)
	if err != nil {
		return false, "", err
	}
	if p.classesNameGPU == nil {
		names := false
		for _, c := range p.snap.Classes {
			if spec, err := json.Marshal(c.Spec); err == nil && namesOneGPU(string(spec)) {
				names = true
			}
		}
		p.classesNameGPU = &names
	}
	perGPU := *p.classesNameGPU || slices.ContainsFunc(pod.Claims, func(c *resourceapi.ResourceClaim) bool { return namesOneGPU(p.match.claimSpec(c)) })
	for _, n := range nodes {
		if n.kind == 0 {
			kind := "policy " + n.policyKey
			for _, g := range n.gpus {
				info := g.g.Info
				info.UUID, info.PCIBusID = "", ""
				attrs, err := json.Marshal(info)
				if err != nil {
					return false, "", fmt.Errorf("encoding GPU %d of node %s: %w", info.Index, n.n.Node.Name, err)
				}
				kind += "|" + g.model.Key() + string(attrs)
			}
			if p.nodeKinds == nil {
				p.nodeKinds = map[string]int{}
			}
			if p.nodeKinds[kind] == 0 {
				p.nodeKinds[kind] = len(p.nodeKinds) + 1
			}
			n.kind = p.nodeKinds[kind]
		}
		key := fitsKey{kind: n.kind, pod: podKind}
		var groupMax map[string]int
		if limited {
			// The kind of node leaves the limits out: they are the key's.
			key.perNode, key.group = max(n.n.Policy.MaxGPUsPerNode, 1), -1
			if m, ok := p.snap.GroupMaxGPUs[n.n.Policy.Group]; ok && n.n.Policy.Group != "" {
				groupMax, key.group = map[string]int{n.n.Policy.Group: m}, m
			}
		}
		if len(n.n.OtherSlices) > 0 || perGPU {
			key.node = n.n.Node.Name
		}
		fits, ok := p.fitsFree[key]
		if !ok {
			free := Node{Node: n.n.Node, Policy: n.n.Policy, OtherSlices: n.n.OtherSlices}
			free.Policy.MaxGPUsPerNode, free.Policy.Spares = len(n.gpus), nil
			if limited {
				free.Policy.MaxGPUsPerNode = key.perNode
			}
			for _, g := range n.gpus {
				free.GPUs = append(free.GPUs, GPU{Info: g.g.Info})
			}
			pl, err := newPlanner(ctx, Snapshot{Driver: p.snap.Driver, Nodes: []Node{free}, Pending: []Pod{pod}, Classes: p.snap.Classes, GroupMaxGPUs: groupMax}, true)
			if err != nil {
				return false, "", err
			}
			fits = len(pl.p.result.Served) > 0
			if p.fitsFree == nil {
				p.fitsFree, p.fitsFreeReason = map[fitsKey]bool{}, map[fitsKey]freeReason{}
			}
			p.fitsFree[key] = fits
			p.fitsFreeReason[key] = freeReason{why: pl.p.result.Unservable[podKey(pod.Pod)], claims: claimNames(pod)}
		}
		if fits {
			return true, "", nil
		}
		// No profile of one node's models is the reason only where it is
		// every node's (neverReason names them all); another node's
		// reason (its policy leaves the profile out) is told before.
		if r := p.fitsFreeReason[key].of(pod); r != "" && (why == "" || strings.HasPrefix(why, noProfile) && !strings.HasPrefix(r, noProfile)) {
			why = r
		}
	}
	return false, why, nil
}

// freeReason is the reason a plan of a pod alone on a node with every GPU
// free gave (fitsFreeWhy), with the names of that pod's claims, which the
// reason may name.
type freeReason struct {
	why    string
	claims []string
}

// of is the reason told of pod, whose claims have the same specs, in the
// same order: each claim name of the pod it was made for replaced by
// pod's.
func (r freeReason) of(pod Pod) string {
	why := r.why
	for i, name := range claimNames(pod) {
		if i < len(r.claims) && r.claims[i] != name {
			why = strings.ReplaceAll(why, "claim "+r.claims[i], "claim "+name)
		}
	}
	return why
}

// claimNames are the names of pod's claims, in order.
func claimNames(pod Pod) []string {
	out := make([]string, len(pod.Claims))
	for i, c := range pod.Claims {
		out[i] = c.Name
	}
	return out
}

// refusal is a kind of pod (claimsKind) and a node state (stateKey) where
// the allocator refused every way tryNode tried (the scheduler's replay,
// nodeAgrees, never ran): a node in that state refuses every pod of that
// kind, whatever its priority or age (which only the replay reads).
type refusal struct{ kind, state string }

// claimsKind is what the allocator's verdict on a pod depends on, the node
// aside: its claims' specs (encoded once per set of claims and plan: a
// claim does not change while it is planned).
func (p *planner) claimsKind(pod Pod) (string, error) {
	var b strings.Builder
	for _, c := range pod.Claims {
		fmt.Fprintf(&b, "%p,", c)
	}
	key := b.String()
	if kind, ok := p.podKinds[key]; ok {
		return kind, nil
	}
	specs := make([]resourceapi.ResourceClaimSpec, len(pod.Claims))
	for i, c := range pod.Claims {
		specs[i] = c.Spec
	}
	kind, err := json.Marshal(specs)
	if err != nil {
		return "", fmt.Errorf("encoding the pod's claims: %w", err)
	}
	p.podKinds[key] = string(kind)
	return string(kind), nil
}

// fitsKey is what fitsWhenFree's verdict depends on: the kind of node
// (nodeState.kind), the node itself where other drivers' slices or a
// selector naming one GPU make it its own kind, the pod's claim specs, and
// where the policy's limits on GPUs changed at once apply
// (fitsWhenFreeWithin) those limits: per node, and the group's (-1 for
// none); both 0 where they do not apply.
type fitsKey struct {
	kind           int
	node, pod      string
	perNode, group int
}

func (p *planner) tryNode(ctx context.Context, pod Pod, n *nodeState) (bool, error) {
	// First with the node as planned so far. Either way, the devices are
	// the pod's only if the scheduler agrees (nodeAgrees).
	if devs, admin, rest, ok, err := p.allocateOn(ctx, pod, n, nil); err != nil {
		return false, err
	} else if ok {
		agrees, err := p.nodeAgrees(ctx, n, pod, nil)
		if err != nil {
			return false, err
		}
		if agrees {
			p.commitMulti(pod, n, devs, admin, rest)
			return true, nil
		}
	}
	// Then adding, per request, one device of its best profile per count.
	// The additions write into the maps and slices of a GPU's state (in
	// place, too: releaseTentative deletes from fixed): every restore
	// gets copies, so that no attempt leaves its reservations behind.
	copyOf := func(g gpuState) gpuState {
		g.layout, g.fixed, g.shared = slices.Clone(g.layout), slices.Clone(g.fixed), slices.Clone(g.shared)
		g.soft, g.inFree = maps.Clone(g.soft), maps.Clone(g.inFree)
		g.serves, g.spares = slices.Clone(g.serves), slices.Clone(g.spares)
		return g
	}
	saved := make([]gpuState, len(n.gpus))
	for i, g := range n.gpus {
		saved[i] = copyOf(*g)
	}
	savedNodeTouched := n.touched
	savedGroupTouched := 0
	if n.group != nil {
		savedGroupTouched = n.group.touched
	}
	savedServed := make([][]string, len(p.result.Served))
	for i, s := range p.result.Served {
		savedServed[i] = s.Devices
	}
	restore := func() {
		// Each GPU is back in the class it was in: its entry there
		// stands (no class is walked while a pod is tried on a node),
		// so it keeps its place and is not listed twice, unless its
		// state no longer matches that class's key.
		for i, g := range n.gpus {
			*g = copyOf(saved[i])
			if !g.g.Changing && g.class != g.classKey() {
				p.reclass(g)
			}
		}
		n.touched = savedNodeTouched
		if n.group != nil {
			n.group.touched = savedGroupTouched
		}
		for i := range savedServed {
			p.result.Served[i].Devices = savedServed[i]
		}
	}
	// attempt adds the devices of the pod's requests (choice[i] of the
	// i-th request's prioritized list), each on the GPU where it takes the least
	// room, or all on GPU only where set, and checks the pod with the
	// allocator; a failed attempt leaves the node as it was.
	// attempt returns the GPUs it added devices to, and the requests (by
	// index over the pod's claims) no GPU of the node took a device of;
	// with none added the node is as the first allocator run saw it, and
	// with only set and a device that GPU could not take the attempt is
	// not all on one GPU: the allocator is not run for either. A request
	// the spread (nowhere) placed nowhere is not for a GPU of the node
	// (another driver's device, or one no GPU here makes): all on one GPU
	// leaves it to the allocator too. With apart set each device of the
	// requests a distinctAttribute constraint names (apartRequests) goes
	// to a GPU the attempt has not added another such device to (on the
	// GPU's identity: one device per GPU); the other requests' devices go
	// where they take the least room.
	//
	// With reuse set, each request first takes free devices of the node
	// it accepts (freeAccepted), held while the other requests' devices
	// are added, and devices are added only for the rest: a pod asking
	// for a 1g.10gb and a 7g.80gb on a node with a free 1g.10gb changes
	// one GPU, not two (and does not destroy that 1g.10gb for the
	// 7g.80gb). The allocator still decides which devices the pod gets.
	apartRequests := distinctRequests(pod)
	attempt := func(choice []int, only *gpuState, nowhere map[int]bool, apart, reuse bool) (added map[*gpuState]bool, missed map[int]bool, ok bool, err error) {
		added, missed = map[*gpuState]bool{}, map[int]bool{}
		usedApart := map[*gpuState]bool{}
		reused := map[*gpuState]mig.Layout{}
		// counts are the devices to add per request: all of them, less
		// (with reuse) the free devices it takes, held (in fixed) so
		// that no later request takes them and no addition destroys
		// them. A reuse attempt that takes none is the plain one: not
		// run twice.
		var counts []int
		for _, c := range pod.Claims {
			for _, r := range c.Spec.Devices.Requests {
				one, count := perDeviceChoice(c, r, choice[len(counts)])
				if reuse {
					taken, err := p.freeAccepted(ctx, one, n, count)
					if err != nil {
						unhold(reused)
						restore()
						return added, missed, false, err
					}
					for g, ds := range taken {
						g.fixed = append(g.fixed, ds...).Canonical()
						reused[g] = append(reused[g], ds...)
						count -= len(ds)
					}
				}
				counts = append(counts, count)
			}
		}
		if reuse && len(reused) == 0 {
			return added, missed, false, nil
		}
		complete := true
		i := 0
		for _, c := range pod.Claims {
			for _, r := range c.Spec.Devices.Requests {
				one, _ := perDeviceChoice(c, r, choice[i])
				var skip map[*gpuState]bool
				if apart && apartRequests[i] {
					skip = usedApart
				}
				for range counts[i] {
					g := p.addOnNode(ctx, one, n, podKey(pod.Pod), only, skip)
					if g == nil {
						missed[i] = true
						complete = complete && nowhere[i]
						break
					}
					added[g] = true
					if skip != nil {
						usedApart[g] = true
					}
				}
				i++
			}
		}
		p.releaseTentative(n, podKey(pod.Pod))
		unhold(reused)
		if len(added) == 0 || only != nil && !complete {
			restore()
			return added, missed, false, nil
		}
		devs, admin, rest, ok, err := p.allocateOn(ctx, pod, n, nil)
		if err == nil && ok {
			ok, err = p.nodeAgrees(ctx, n, pod, nil)
		}
		if err != nil || !ok {
			restore()
			return added, missed, false, err
		}
		p.commitMulti(pod, n, devs, admin, rest)
		return added, missed, true, nil
	}
	// GPUs of a class fare alike, unless a claim tells GPUs apart.
	perGPU := slices.ContainsFunc(pod.Claims, p.match.perGPU)
	for _, v := range p.choices(ctx, pod, n) {
		if _, _, ok, err := attempt(v, nil, nil, false, true); err != nil || ok {
			return ok, err
		}
		spread, nowhere, ok, err := attempt(v, nil, nil, false, false)
		if err != nil || ok {
			return ok, err
		}
		if len(spread) == 0 {
			continue // no GPU takes any of these devices
		}
		// A distinctAttribute constraint may want the devices on as many
		// GPUs (parentUUID), which best fit does not spread them over.
		if len(apartRequests) > 0 {
			if _, _, ok, err := attempt(v, nil, nil, true, false); err != nil || ok {
				return ok, err
			}
		}
		// Devices spread over GPUs by least room lost may not serve the
		// pod where all on one would (a matchAttribute constraint, or a
		// limit on GPUs changed that the spread hits): each GPU that may
		// change alone, one per class, but the one the spread used alone
		// (that attempt was this one). Last GPU first, as additions break
		// ties towards later GPUs: pods of one device go to the first
		// GPUs among equals, and the scheduler, taking the first device a
		// request accepts in publication order (GPU index within a size
		// and room lost),
		// gives them those rather than break up a set kept together
		// further on.
		tried := map[string]bool{}
		for _, g := range slices.Backward(n.gpus) {
			if !p.mayChange(g) || len(spread) == 1 && spread[g] {
				continue
			}
			if !g.g.Changing && !perGPU {
				if k := g.classKey(); tried[k] {
					continue
				} else {
					tried[k] = true
				}
			}
			if _, _, ok, err := attempt(v, g, nowhere, false, false); err != nil || ok {
				return ok, err
			}
		}
	}
	return false, nil
}

// freeAccepted returns up to count free devices of node n (by GPU) that
// the one-device claim c accepts and that are of the profile addOnNode
// would make for it (its best profile on the GPU that the policy allows:
// the least memory, then the fewest compute slices) or of its best
// profile, so that a request open to several sizes
// does not take a larger free device another request of the pod needs:
// neither pinned nor reserved, outside a placement the GPU is kept for,
// not named by a DeviceTaintRule, in GPU order.
func (p *planner) freeAccepted(ctx context.Context, c *resourceapi.ResourceClaim, n *nodeState, count int) (map[*gpuState]mig.Layout, error) {
	out := map[*gpuState]mig.Layout{}
	for _, g := range n.gpus {
		if count == 0 {
			break
		}
		free := g.free()
		if g.g.Changing || len(free) == 0 {
			continue // a change's devices: serveComing plans them
		}
		// Judged on the GPU itself where the claim reads a per-GPU
		// attribute, on its kind's stand-in otherwise (as addOnNode).
		var ps []string
		var err error
		if p.match.perGPU(c) {
			ps, err = p.match.gpuProfiles(ctx, c, g.g.Info)
		} else {
			ps, err = p.match.singleProfiles(ctx, c, g.kindInfo)
		}
		if err != nil {
			return nil, err
		}
		// The profile addOnNode makes is the best the policy allows; a
		// free device of the best one (made before the policy changed),
		// no larger, is taken too, as kube-scheduler would give it.
		made := slices.IndexFunc(ps, n.allows)
		if len(ps) == 0 {
			continue
		}
		for _, d := range free {
			if d.Profile != ps[0] && (made < 0 || d.Profile != ps[made]) {
				continue
			}
			if count == 0 {
				break
			}
			if !g.offered(d) {
				continue
			}
			fits, err := p.match.deviceFits(ctx, c, g.g.Info, d)
			if err != nil {
				return nil, err
			}
			if fits {
				out[g] = append(out[g], d)
				count--
			}
		}
	}
	return out, nil
}

// unhold takes the devices tryNode's attempt held for reuse out of their
// GPUs' fixed devices again.
func unhold(held map[*gpuState]mig.Layout) {
	for g, ds := range held {
		g.fixed = slices.DeleteFunc(g.fixed, func(d mig.Device) bool { return ds.Contains(d) })
	}
}

// distinctRequests are the requests (by index over the pod's claims, as
// tryNode counts them) that a distinctAttribute constraint of their claim
// names: those its Requests list (a prioritized list's subrequest,
// "request/subrequest", by its request), every request of the claim where
// the list is empty.
func distinctRequests(pod Pod) map[int]bool {
	out := map[int]bool{}
	i := 0
	for _, c := range pod.Claims {
		named, all := map[string]bool{}, false
		for _, k := range c.Spec.Devices.Constraints {
			if k.DistinctAttribute == nil {
				continue
			}
			all = all || len(k.Requests) == 0
			for _, r := range k.Requests {
				request, _, _ := strings.Cut(r, "/")
				named[request] = true
			}
		}
		for _, r := range c.Spec.Devices.Requests {
			if all || named[r.Name] {
				out[i] = true
			}
			i++
		}
	}
	return out
}

// choices are the ways tryNode tries to add a pod's devices on node n: per
// request of its claims (in order), the subrequest of its prioritized list
// (firstAvailable) to add, 0 for a request without one. They come in the
// order the scheduler's allocator tries them (the first request's first
// subrequest with each choice of the next requests, then its second...),
// at most maxChoices. Where that bound leaves combinations out, up to
// maxChoices more follow, in the same order, of the subrequests that some
// MIG device of n could satisfy (workable): five lists of [7g.80gb,
// 1g.10gb] on a node whose policy allows 1g.10gb alone have 32
// combinations, and the one that fits is the last.
func (p *planner) choices(ctx context.Context, pod Pod, n *nodeState) [][]int {
	var all [][]int
	for _, c := range pod.Claims {
		for _, r := range c.Spec.Devices.Requests {
			o := []int{0}
			for v := 1; v < len(r.FirstAvailable); v++ {
				o = append(o, v)
			}
			all = append(all, o)
		}
	}
	out, cut := combinations(all, nil)
	if !cut {
		return out
	}
	var some [][]int
	i := 0
	for _, c := range pod.Claims {
		for _, r := range c.Spec.Devices.Requests {
			var ok []int
			for _, v := range all[i] {
				if len(r.FirstAvailable) <= 1 || p.workable(ctx, c, r, v, n) {
					ok = append(ok, v)
				}
			}
			if len(ok) == 0 {
				ok = all[i][:1] // tried, to fail as before
			}
			some = append(some, ok)
			i++
		}
	}
	more, _ := combinations(some, out)
	return append(out, more...)
}

// combinations returns, in order (the last request's option changing
// fastest), at most maxChoices picks of one of each request's options, none
// of those in skip, and whether more were left out.
func combinations(options [][]int, skip [][]int) ([][]int, bool) {
	at := make([]int, len(options))
	var out [][]int
	for {
		v := make([]int, len(options))
		for i, o := range options {
			v[i] = o[at[i]]
		}
		if !slices.ContainsFunc(skip, func(s []int) bool { return slices.Equal(s, v) }) {
			if len(out) == maxChoices {
				return out, true
			}
			out = append(out, v)
		}
		i := len(at) - 1
		for ; i >= 0; i-- {
			if at[i]++; at[i] < len(options[i]) {
				break
			}
			at[i] = 0
		}
		if i < 0 {
			return out, false
		}
	}
}

// workable reports whether subrequest v of request r of claim c may be
// satisfied on node n: one device of it fits a profile of a GPU of n that
// n's policy allows or that a GPU of n holds already. A claim judged per
// GPU (perGPU) is taken as workable: only the allocator on the GPU's own
// devices tells.
func (p *planner) workable(ctx context.Context, c *resourceapi.ResourceClaim, r resourceapi.DeviceRequest, v int, n *nodeState) bool {
	one, _ := perDeviceChoice(c, r, v)
	if p.match.perGPU(one) {
		return true
	}
	for _, g := range n.gpus {
		ps, err := p.match.singleProfiles(ctx, one, g.kindInfo)
		if err != nil {
			return true // the attempt reports it
		}
		for _, prof := range ps {
			if n.allows(prof) || slices.ContainsFunc(g.g.Layout, func(d mig.Device) bool { return d.Profile == prof }) {
				return true
			}
		}
	}
	return false
}

// maxChoices bounds the prioritized-list combinations tried per pod and
// node.
const maxChoices = 16

// addOnNode adds one device satisfying the single-request claim c to the
// node's best GPU (only, where set; none in skip): least room lost for
// large profiles, then fewest free devices destroyed, then the last GPU
// (see tryNode), and on that GPU the first of the claim's profiles (the
// smallest); it returns that GPU, nil where none could take one.
func (p *planner) addOnNode(ctx context.Context, c *resourceapi.ResourceClaim, n *nodeState, pod string, only *gpuState, skip map[*gpuState]bool) *gpuState {
	var bestG *gpuState
	var bestA *addition
	perGPU := p.match.perGPU(c)
	for _, g := range n.gpus {
		if only != nil && g != only || skip[g] || !p.mayChange(g) {
			continue
		}
		var ps []string
		if perGPU {
			// Judged per GPU below, and only where there is room: a
			// full GPU costs no allocator run.
			for _, pr := range byMemory(g.model) {
				ps = append(ps, pr.Name)
			}
		} else {
			var err error
			if ps, err = p.match.singleProfiles(ctx, c, g.kindInfo); err != nil {
				return nil
			}
		}
		for _, prof := range ps {
			if !n.allows(prof) {
				continue
			}
			a := p.addition(g, prof)
			if a != nil && perGPU {
				a = p.acceptedAddition(ctx, c, g, prof, a)
			}
			// Among equals the last GPU wins (see tryNode), but on one
			// GPU the first profile, the smallest: the scheduler gives
			// a claim open to several sizes the smallest device it
			// accepts, in publication order.
			if a == nil || bestA != nil && (slices.Compare(a.loss, bestA.loss) > 0 || slices.Equal(a.loss, bestA.loss) && (a.destroyed > bestA.destroyed || a.destroyed == bestA.destroyed && g == bestG)) {
				continue
			}
			bestG, bestA = g, a
		}
	}
	if bestG == nil {
		return nil
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
	return bestG
}

// acceptedAddition is best, the best addition of a device of prof to g,
// checked for a claim that reads a per-GPU attribute: best itself where
// the claim accepts its device; else, for a claim that reads the
// placement, the best addition at a placement it accepts (one it refuses
// is avoided and the next best tried); else nil.
func (p *planner) acceptedAddition(ctx context.Context, c *resourceapi.ResourceClaim, g *gpuState, prof string, best *addition) *addition {
	if fits, err := p.match.deviceFits(ctx, c, g.g.Info, best.device); err == nil && fits {
		return best
	}
	pr, err := g.model.Profile(prof)
	if err != nil || !p.match.readsPlacement(c) {
		return nil
	}
	avoid := g.avoid()
	for a := *best; len(avoid) < len(pr.Placements)+1; {
		pl, err := g.model.Placement(a.device)
		if err != nil {
			return nil
		}
		avoid = append(slices.Clone(avoid), pl)
		next, ok := add(g.model, g.g.Layout, g.layout, g.hard(), g.softLayout(), prof, avoid, g.g.Tainted, false)
		if !ok {
			return nil
		}
		if fits, err := p.match.deviceFits(ctx, c, g.g.Info, next.device); err == nil && fits {
			return &next
		}
		a = next
	}
	return nil
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

// allocateOn runs the allocator for the pod on the node's planned devices
// (only those of the GPUs in only, where set); it returns the MIG devices
// the allocation uses, by GPU, the names of those of them it uses with
// admin access only, and the other drivers' devices it uses.
func (p *planner) allocateOn(ctx context.Context, pod Pod, n *nodeState, only map[*gpuState]bool) (map[*gpuState][]mig.Device, sets.Set[string], OtherHolds, bool, error) {
	var devices []resourceapi.Device
	taken := sets.New[string]()
	owner := map[string]*gpuState{}
	byName := map[string]mig.Device{}
	roomLost := map[string][]int{}
	for _, g := range n.gpus {
		if only != nil && !only[g] {
			continue
		}
		for _, d := range g.layout {
			if !g.catalogued(d) {
				continue
			}
			dev, err := p.plannedDevice(g, d)
			if err != nil {
				return nil, nil, OtherHolds{}, false, err
			}
			devices = append(devices, dev)
			owner[dev.Name], byName[dev.Name] = g, d
			roomLost[dev.Name] = p.roomLostOf(g.model, d)
			// Reserved, or in a placement kept for a pod planned earlier.
			if g.fixed.Contains(d) || g.blocks(d) {
				taken.Insert(dev.Name)
			}
		}
	}
	// In the order the node publishes them: the allocator takes the first
	// device a request accepts, as the scheduler's does.
	migslices.SortDevices(devices, roomLost)
	res, admin, rest, err := p.match.allocate(ctx, n.n.Node, devices, taken, pod.Claims, &others{slices: n.n.OtherSlices, held: p.otherHeld, planned: p.otherPlanned})
	if err != nil || res == nil {
		return nil, nil, OtherHolds{}, false, err
	}
	out := map[*gpuState][]mig.Device{}
	for _, name := range res {
		out[owner[name]] = append(out[owner[name]], byName[name])
	}
	return out, admin, rest, true, nil
}

// commitMulti records the pod as served by devs (those named in admin
// with admin access only: kept, not used up), and the other drivers'
// devices rest as taken for the rest of the plan.
func (p *planner) commitMulti(pod Pod, n *nodeState, devs map[*gpuState][]mig.Device, admin sets.Set[string], rest OtherHolds) {
	key := podKey(pod.Pod)
	p.otherPlanned.add(rest)
	p.recordPlanned(n, key, rest)
	if n.served(pod) {
		p.allOwned++
	}
	pl := Placement{Pod: key, Node: n.n.Node.Name}
	for _, g := range n.gpus {
		for _, d := range devs[g] {
			name := deviceName(g.g.Info, d)
			if admin.Has(name) {
				if !g.shared.Contains(d) {
					g.shared = append(g.shared, d).Canonical()
				}
			} else {
				g.fixed = append(g.fixed, d).Canonical()
			}
			pl.Devices = append(pl.Devices, name)
			if !g.g.Layout.Contains(d) {
				pl.NeedsChange = true
			}
		}
		if len(devs[g]) > 0 && g.touched {
			g.serves = append(g.serves, key)
		}
		if n.n.Frozen {
			continue // its GPUs are in no class nor free list (CarriesOn)
		}
		if !g.g.Changing {
			p.reclass(g)
		}
		p.indexFree(g)
	}
	p.servedAt[key] = len(p.result.Served)
	p.result.Served = append(p.result.Served, pl)
}

// namesOneGPU reports whether a claim or class spec (JSON) may select a
// device by its GPU's identity, which differs between GPUs of one kind
// (the other per-GPU attributes, infoFlags, are in the GPU's info).
func namesOneGPU(spec string) bool {
	f := flagsOf(strings.ToLower(spec))
	return f.uuid || f.pciBusID
}
