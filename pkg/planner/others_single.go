package planner

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/structured"
)

// serveSingleBesideOthers serves pod, a pod of one device, where its
// claim's class also admits devices the plan does not make
// (Node.OtherSlices: another driver's, or one of miglayout's GPUs with MIG
// off, published whole) on a node of nodes (othersAdmit): with a free one
// where kube-scheduler would give it one now and no free MIG device of a
// node serves it (freeMIGServes: a MIG device is left for the pod rather
// than a whole GPU another pod may need), so that no GPU is repartitioned
// for a pod a device already there serves (serveOnOthers); else as any pod
// of one device (servePinned, serveSingle). A pod those find no profile
// for waits for an admitted device claims hold, where there is one
// (NoRoom), rather than being told nothing can serve it. It reports false
// where the class admits no such device: the caller plans the pod.
func (p *planner) serveSingleBesideOthers(ctx context.Context, pod Pod, nodes []*nodeState) (bool, error) {
	admit, err := p.othersAdmit(ctx, pod.Claims[0])
	if err != nil {
		return false, err
	}
	if !slices.ContainsFunc(nodes, func(n *nodeState) bool { return len(admit[n]) > 0 }) {
		return false, nil
	}
	// The free MIG devices are looked for only where an admitted device
	// may be free.
	if slices.ContainsFunc(nodes, func(n *nodeState) bool { return p.anyFree(admit[n]) }) {
		free, err := p.freeMIGServes(ctx, pod.Claims[0], nodes)
		if err != nil {
			return false, err
		}
		if !free {
			served, err := p.serveOnOthers(ctx, pod, nodes, admit)
			if err != nil || served {
				return true, err
			}
		}
	}
	if p.match.perGPU(pod.Claims[0]) {
		err = p.servePinned(ctx, pod, nodes)
	} else {
		err = p.serveSingle(ctx, pod, nodes)
	}
	key := podKey(pod.Pod)
	held := slices.ContainsFunc(nodes, func(n *nodeState) bool { return p.anyHeld(admit[n]) })
	if why, ok := p.result.Unservable[key]; ok && held && strings.HasPrefix(why, noProfile) {
		p.result.Unservable[key] = NoRoom
	}
	return true, err
}

// freeMIGServes reports whether a free MIG device that exists (on a GPU
// no change is in flight on) of a node of nodes satisfies the one-device
// claim c: one of a profile the claim accepts on the GPU's kind (on the
// GPU itself, where the claim reads a per-GPU attribute).
func (p *planner) freeMIGServes(ctx context.Context, c *resourceapi.ResourceClaim, nodes []*nodeState) (bool, error) {
	perGPU := p.match.perGPU(c)
	accepted := map[string]sets.Set[string]{} // by kind of GPU
	for _, n := range nodes {
		for _, g := range n.gpus {
			if g.g.Changing {
				continue
			}
			profiles, ok := accepted[g.kindInfo.key]
			if !ok && !perGPU {
				ps, err := p.match.singleProfiles(ctx, c, g.kindInfo)
				if err != nil {
					return false, err
				}
				profiles = sets.New(ps...)
				accepted[g.kindInfo.key] = profiles
			}
			for _, d := range g.layout {
				if g.fixed.Contains(d) || !g.offered(d) {
					continue
				}
				if !perGPU {
					if profiles.Has(d.Profile) {
						return true, nil
					}
					continue
				}
				fits, err := p.match.deviceFits(ctx, c, g.g.Info, d)
				if err != nil || fits {
					return fits, err
				}
			}
		}
	}
	return false, nil
}

// serveOnOthers serves pod, a pod of one device, with a free device the
// plan does not make where kube-scheduler would give it one now. It tries,
// in order, the nodes of nodes whose other devices the claim admits by
// their selectors alone (admit, othersAdmit's): on each, the allocator
// with the node's devices as planned so far and the other devices with
// what claims hold and this plan counts on of them; the pod is served
// there where the allocation takes another device and the scheduler-order
// replay agrees (nodeAgrees). A node whose admitted devices claims hold,
// or pods this plan serves count on, whole (anyFree) costs no allocator
// run. It reports false, with nothing planned, otherwise; an allocation
// that takes a free MIG device is left to serveSingle, which plans the
// same.
func (p *planner) serveOnOthers(ctx context.Context, pod Pod, nodes []*nodeState, admit map[*nodeState][]admitted) (bool, error) {
	for _, n := range nodes {
		if !p.anyFree(admit[n]) {
			continue
		}
		devs, admin, rest, ok, err := p.allocateOn(ctx, pod, n, nil)
		if err != nil {
			return false, fmt.Errorf("planning pod %s on the devices the plan does not make: %w", podKey(pod.Pod), err)
		}
		if !ok || rest.empty() {
			continue
		}
		agrees, err := p.nodeAgrees(ctx, n, pod, nil)
		if err != nil {
			return false, fmt.Errorf("planning pod %s on the devices the plan does not make: %w", podKey(pod.Pod), err)
		}
		if agrees {
			p.commitMulti(pod, n, devs, admin, rest)
			return true, nil
		}
	}
	return false, nil
}

// othersAdmit returns, by node, the devices of its Node.OtherSlices that
// the one-device claim c admits by its class's and request's selectors alone
// (what claims hold of them, taints, and which nodes a shared pool reaches
// are left to the allocator). Memoised by the claim's shape, and each
// device's verdict by its driver, attributes and capacity, so that a
// fleet of nodes with alike devices (a NIC per node) costs one evaluation
// per claim shape. A selector that fails on a device (a CEL runtime error)
// counts as not admitting it: such a pod is planned on MIG devices alone.
func (p *planner) othersAdmit(ctx context.Context, c *resourceapi.ResourceClaim) (map[*nodeState][]admitted, error) {
	shape := p.match.shape(c)
	if out, ok := p.othersAdmitting[shape]; ok {
		return out, nil
	}
	var out map[*nodeState][]admitted
	selectors, err := p.claimSelectors(c)
	if err != nil {
		return nil, err
	}
	for _, n := range p.nodes {
		for _, s := range n.n.OtherSlices {
			for i := range s.Spec.Devices {
				d := &s.Spec.Devices[i]
				key := shape + "\x00" + p.deviceSignature(s.Spec.Driver, d)
				admits, ok := p.othersVerdicts[key]
				if !ok {
					admits = selectorsMatch(ctx, selectors, cel.Device{Driver: s.Spec.Driver, AllowMultipleAllocations: d.AllowMultipleAllocations,
						Attributes: d.Attributes, Capacity: d.Capacity})
					p.othersVerdicts[key] = admits
				}
				if admits {
					if out == nil {
						out = map[*nodeState][]admitted{}
					}
					out[n] = append(out[n], admitted{id: structured.MakeDeviceID(s.Spec.Driver, s.Spec.Pool.Name, d.Name),
						shared: d.AllowMultipleAllocations != nil && *d.AllowMultipleAllocations})
				}
			}
		}
	}
	p.othersAdmitting[shape] = out
	return out, nil
}

// admitted is a device othersAdmit found a claim admits: its ID, and
// whether it may be allocated to several claims (shared).
type admitted struct {
	id     structured.DeviceID
	shared bool
}

// anyHeld reports whether one of devs is held by a claim, or counted on by
// a pod this plan serves, whole or in shares: one a pod may wait for.
func (p *planner) anyHeld(devs []admitted) bool {
	for _, d := range devs {
		for _, t := range []otherTotal{p.otherHeld, p.otherPlanned} {
			if t.devices.Has(d.id) || d.shared && t.hasShareOf(d.id) {
				return true
			}
		}
	}
	return false
}

// anyFree reports whether one of devs may be free: not held whole by a
// claim or counted on whole by a pod this plan serves (one allocated in
// shares may have capacity left: the allocator tells).
func (p *planner) anyFree(devs []admitted) bool {
	for _, d := range devs {
		if d.shared || !p.otherHeld.devices.Has(d.id) && !p.otherPlanned.devices.Has(d.id) {
			return true
		}
	}
	return false
}

// claimSelectors are the compiled CEL selectors of the one request of the
// one-device claim c: its DeviceClass's, then its own. A class that does
// not exist, or an expression that does not compile, is an error, as for
// the allocator.
func (p *planner) claimSelectors(c *resourceapi.ResourceClaim) ([]cel.CompilationResult, error) {
	r := c.Spec.Devices.Requests[0].Exactly
	class, ok := p.match.classes[r.DeviceClassName]
	if !ok {
		return nil, fmt.Errorf("claim %s: DeviceClass %q not found", claimKey(c), r.DeviceClassName)
	}
	var out []cel.CompilationResult
	for _, sels := range [][]resourceapi.DeviceSelector{class.Spec.Selectors, r.Selectors} {
		for _, s := range sels {
			if s.CEL == nil {
				continue
			}
			res := p.match.cel.GetOrCompile(s.CEL.Expression)
			if res.Error != nil {
				return nil, fmt.Errorf("claim %s: compiling selector %q: %w", claimKey(c), s.CEL.Expression, res.Error)
			}
			out = append(out, res)
		}
	}
	return out, nil
}

// selectorsMatch reports whether every selector matches d; one that fails
// on it does not.
func selectorsMatch(ctx context.Context, selectors []cel.CompilationResult, d cel.Device) bool {
	for _, s := range selectors {
		ok, _, err := s.DeviceMatches(ctx, d)
		if err != nil || !ok {
			return false
		}
	}
	return true
}

// deviceSignature is what of device d of driver a selector can read: its
// driver, attributes, capacity and whether it allows several allocations
// (not its name). Memoised by device.
func (p *planner) deviceSignature(driver string, d *resourceapi.Device) string {
	if sig, ok := p.deviceSigs[d]; ok {
		return sig
	}
	b, _ := json.Marshal(struct {
		Driver   string
		Multiple *bool
		Attrs    map[resourceapi.QualifiedName]resourceapi.DeviceAttribute
		Capacity map[resourceapi.QualifiedName]resourceapi.DeviceCapacity
	}{driver, d.AllowMultipleAllocations, d.Attributes, d.Capacity})
	p.deviceSigs[d] = string(b)
	return string(b)
}
