package planner

import (
	"context"
	"fmt"
	"slices"
	"sort"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
)

// orderPods decides in which order pending pods are planned (each takes the
// best place left by those before it):
//
//  1. higher priority first;
//  2. among equal priorities, pods that have waited AgingAfter or longer,
//     oldest first (nothing waits forever behind larger pods);
//  3. then the larger pods first: more compute slices (the smallest
//     satisfying profile of each requested device, summed), since a large
//     device needs a whole free placement range while small ones fit the
//     holes large ones leave (first-fit decreasing over the whole queue);
//  4. then the older first, then namespace/name.
//
// A pod whose claims the allocator cannot evaluate is left out and recorded
// as unservable (podFailed); it returns an error only when ctx is done.
func (p *planner) orderPods(ctx context.Context, pods []Pod) ([]Pod, error) {
	size := make(map[*corev1.Pod]int, len(pods))
	var ok []Pod
	for _, pod := range pods {
		n, err := p.podSize(ctx, pod)
		if err != nil {
			if err := p.podFailed(ctx, pod, fmt.Errorf("planning pod %s: %w", podKey(pod.Pod), err)); err != nil {
				return nil, err
			}
			continue
		}
		size[pod.Pod] = n
		ok = append(ok, pod)
	}
	pods = ok
	aging := !p.snap.Now.IsZero() && p.snap.AgingAfter > 0
	waited := func(pod *corev1.Pod) bool {
		return aging && p.snap.Now.Sub(pod.CreationTimestamp.Time) >= p.snap.AgingAfter
	}
	out := slices.Clone(pods)
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i].Pod, out[j].Pod
		if pa, pb := corev1helpers.PodPriority(a), corev1helpers.PodPriority(b); pa != pb {
			return pa > pb
		}
		wa, wb := waited(a), waited(b)
		if wa != wb {
			return wa
		}
		if !wa && size[a] != size[b] {
			return size[a] > size[b]
		}
		if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
			return a.CreationTimestamp.Before(&b.CreationTimestamp)
		}
		return podKey(a) < podKey(b)
	})
	return out, nil
}

// podSize is the pod's demand in compute slices: for each device it
// requests, the compute slices of the smallest profile (of any kind of GPU
// of the snapshot) that satisfies the request alone; a request no profile
// satisfies counts 0. AllocationMode All counts one device.
//
// A request with neither exactly nor firstAvailable (the API server refuses
// it; the allocator would dereference nil) is an error.
func (p *planner) podSize(ctx context.Context, pod Pod) (int, error) {
	total := 0
	for _, c := range pod.Claims {
		for _, r := range c.Spec.Devices.Requests {
			if r.Exactly == nil && len(r.FirstAvailable) == 0 {
				return 0, fmt.Errorf("reading claim %s/%s: request %q has neither exactly nor firstAvailable", c.Namespace, c.Name, r.Name)
			}
			one, count := perDevice(c, r)
			smallest := 0
			for _, k := range p.kinds {
				ps, err := p.profilesOf(ctx, one, k)
				if err != nil {
					return 0, err
				}
				for _, name := range ps {
					if prof, err := k.standIn.Model.Profile(name); err == nil && (smallest == 0 || prof.ComputeSlices < smallest) {
						smallest = prof.ComputeSlices
					}
				}
			}
			total += count * smallest
		}
	}
	return total, nil
}

// profilesOf is matcher.singleProfiles on GPUs of kind k, except for a
// claim that reads a per-GPU attribute: then the profiles on the first GPU
// of that kind in the snapshot (an estimate of its size, for the order
// only).
func (p *planner) profilesOf(ctx context.Context, c *resourceapi.ResourceClaim, k gpuKindInfo) ([]string, error) {
	if !p.match.perGPU(c) {
		return p.match.singleProfiles(ctx, c, k)
	}
	for _, g := range p.gpus {
		if g.kind == k.key {
			return p.match.gpuProfiles(ctx, c, g.g.Info)
		}
	}
	return nil, nil
}
