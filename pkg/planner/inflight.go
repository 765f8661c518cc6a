package planner

import (
	"context"
	"fmt"
	"slices"

	"github.com/miglayout/miglayout/pkg/mig"
)

// serveComing plans a pod that changes in flight name (GPU.Serves) on the
// free devices those changes bring: a pod of one device gets the free
// device of its most preferred profile there (serveComingSingle), so that
// a pod content with several profiles leaves the one made for another pod
// of the change; for any other pod the allocator runs on the node's planned
// devices of those GPUs alone. A pod served there is served with no other
// change. It reports false, with nothing planned, for a pod
// no change in flight names, one whose claims a pod planned earlier holds
// (it is served with that pod, see serve), one that may no longer run on
// the node (its labels or taints changed), or one the devices no longer fit
// (another pod named by the change took them first); serve then plans it.
func (p *planner) serveComing(ctx context.Context, pod Pod) (bool, error) {
	key := podKey(pod.Pod)
	p.podOf[key] = pod
	gpus := p.coming[key]
	if len(gpus) == 0 {
		return false, nil
	}
	if _, done := p.servedAt[key]; done {
		return false, nil
	}
	for _, c := range pod.Claims {
		if _, ok := p.claimsServed[claimKey(c)]; ok {
			return false, nil
		}
		if _, ok := p.claimsKept[claimKey(c)]; ok {
			return false, nil
		}
	}
	feasible := p.withRoom(pod, p.feasibleNodes(pod))
	for _, n := range p.nodes {
		only := map[*gpuState]bool{}
		for _, g := range gpus {
			if g.node == n {
				only[g] = true
			}
		}
		if len(only) == 0 || !n.opensTo(pod) {
			continue
		}
		if n.n.Frozen {
			// A node that carries on (CarriesOn) is in no list of
			// feasible nodes: judged alone.
			if !p.feasibleOn(pod, n) {
				continue
			}
		} else if !slices.Contains(feasible, n) {
			continue
		}
		if singleDevice(pod) && !p.match.perGPU(pod.Claims[0]) {
			served, err := p.serveComingSingle(ctx, pod, n, only)
			if err != nil || served {
				return served, err
			}
			continue
		}
		devs, admin, rest, ok, err := p.allocateOn(ctx, pod, n, only)
		if err != nil {
			return false, fmt.Errorf("planning pod %s on the devices its change in flight brings: %w", key, err)
		}
		if ok {
			// Judged on the node's other devices too, as kube-scheduler
			// judges it: a request for all matching devices also takes
			// those elsewhere on the node, and fails where one is in use.
			if ok, err = p.nodeAgrees(ctx, n, pod, nil); err != nil {
				return false, fmt.Errorf("planning pod %s on the devices its change in flight brings: %w", key, err)
			}
		}
		if ok {
			p.commitMulti(pod, n, devs, admin, rest)
			p.recordClaims(pod, p.claimsServed)
			return true, nil
		}
	}
	return false, nil
}

// serveComingSingle serves a pod of one device with the free device of the
// GPUs only (changes in flight on node n) whose profile the pod prefers
// most (its claim's satisfying profiles, smallest first), the first GPU
// on a tie.
func (p *planner) serveComingSingle(ctx context.Context, pod Pod, n *nodeState, only map[*gpuState]bool) (bool, error) {
	var bestG *gpuState
	var bestD mig.Device
	bestRank := -1
	for _, g := range n.gpus {
		if !only[g] {
			continue
		}
		profiles, err := p.match.singleProfiles(ctx, pod.Claims[0], g.kindInfo)
		if err != nil {
			return false, fmt.Errorf("planning pod %s on the devices its change in flight brings: %w", podKey(pod.Pod), err)
		}
		// A device coming serves whatever its profile: the policy
		// (allowedProfiles) limits what is created only.
		for _, d := range g.free() {
			i := slices.Index(profiles, d.Profile)
			if i < 0 || g.blocks(d) || !g.catalogued(d) {
				continue
			}
			if bestRank < 0 || i < bestRank {
				bestG, bestD, bestRank = g, d, i
			}
		}
	}
	if bestG == nil {
		return false, nil
	}
	p.reserve(bestG, bestD, podKey(pod.Pod), false)
	p.recordClaims(pod, p.claimsServed)
	return true, nil
}
