package planner

import (
	"context"
	"fmt"
	"slices"
)

// serveComing plans a pod that changes in flight name (GPU.Serves) on the
// free devices those changes bring: the allocator runs on the node's
// planned devices of those GPUs alone, and a pod it serves there is served
// with no other change. It reports false, with nothing planned, for a pod
// no change in flight names, one whose claims a pod planned earlier holds
// (it is served with that pod, see serve), one that may no longer run on
// the node (its labels or taints changed), or one the devices no longer fit
// (another pod named by the change took them first); serve then plans it.
func (p *planner) serveComing(ctx context.Context, pod Pod) (bool, error) {
	key := podKey(pod.Pod)
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
	feasible := p.feasibleNodes(pod)
	for _, n := range p.nodes {
		only := map[*gpuState]bool{}
		for _, g := range gpus {
			if g.node == n {
				only[g] = true
			}
		}
		if len(only) == 0 || !slices.Contains(feasible, n) {
			continue
		}
		devs, rest, ok, err := p.allocateOn(ctx, pod, n, only)
		if err != nil {
			return false, fmt.Errorf("planning pod %s on the devices its change in flight brings: %w", key, err)
		}
		if ok {
			p.commitMulti(pod, n, devs, rest)
			p.recordClaims(pod, p.claimsServed)
			return true, nil
		}
	}
	return false, nil
}
