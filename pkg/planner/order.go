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
//  4. then the older first, then namespace/name;
//  5. except that a pod kube-scheduler takes earlier (same priority,
//     older) that accepts a profile a later pod of this order accepts
//     goes before it (schedulerFirst).
//
// A pod whose claims the allocator cannot evaluate is left out and recorded
// as unservable (podFailed); it returns an error only when ctx is done.
func (p *planner) orderPods(ctx context.Context, pods []Pod) ([]Pod, error) {
	size := make(map[*corev1.Pod]int, len(pods))
	accepts := make(map[*corev1.Pod][]kindProfile, len(pods))
	var ok []Pod
	for _, pod := range pods {
		n, acc, err := p.podSize(ctx, pod)
		if err != nil {
			if err := p.podFailed(ctx, pod, fmt.Errorf("planning pod %s: %w", podKey(pod.Pod), err)); err != nil {
				return nil, err
			}
			continue
		}
		size[pod.Pod], accepts[pod.Pod] = n, acc
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
	return schedulerFirst(out, accepts), nil
}

// schedulerFirst moves ahead of each pod of out (the planning order) the
// pods kube-scheduler takes before it that could take its devices: those
// of the same priority, older (schedulerLess), that accept a profile it
// accepts (accepts: each pod's profiles by kind of GPU, podSize) and share
// no claim with it (sharesClaim), and so on for theirs, in the scheduler's
// order. (Pods that waited AgingAfter come first, oldest first, already:
// none is younger than a pod that has not waited.) In the largest-first
// order such a pod comes later, being smaller; left unplanned (no room
// once the larger pod is served), it would still be given first, by
// kube-scheduler, the device made for the larger pod (a claim for any
// device of 4 GB or more takes a whole 7g.80gb made for a 7g claim), the
// larger pod would not get it, and the plan would have destroyed devices
// for the wrong pod. Planned first, it gets the device that spoils the
// least, as the scheduler takes the smallest first.
//
// Each pod is indexed under every profile it accepts, in the scheduler's
// order; an older pod not yet placed in an index that the pod reads is
// always such a pod (one at least as large is placed already) or one
// sharing a claim with it, so the order costs about the size of the
// index, not pods squared.
func schedulerFirst(out []Pod, accepts map[*corev1.Pod][]kindProfile) []Pod {
	byAge := slices.Clone(out)
	slices.SortStableFunc(byAge, schedulerLess)
	type key struct {
		priority int32
		accepts  kindProfile
	}
	// entries are indices in byAge, from head on not all placed.
	type entries struct {
		pods []int32
		head int
	}
	index := map[key]*entries{}
	for i, pod := range byAge {
		prio := corev1helpers.PodPriority(pod.Pod)
		for _, a := range accepts[pod.Pod] {
			e := index[key{prio, a}]
			if e == nil {
				e = &entries{}
				index[key{prio, a}] = e
			}
			e.pods = append(e.pods, int32(i))
		}
	}
	placed := make(map[*corev1.Pod]bool, len(out))
	res := make([]Pod, 0, len(out))
	var before []Pod
	// earlier adds to before the pods that take pod's devices first (and
	// theirs), marking them placed.
	var earlier func(pod Pod)
	earlier = func(pod Pod) {
		prio := corev1helpers.PodPriority(pod.Pod)
		for _, a := range accepts[pod.Pod] {
			e := index[key{prio, a}]
			if e == nil {
				continue
			}
			for i := e.head; i < len(e.pods); i++ {
				q := byAge[e.pods[i]]
				if placed[q.Pod] {
					if i == e.head {
						e.head++
					}
					continue
				}
				if schedulerLess(q, pod) >= 0 {
					break
				}
				if sharesClaim(q, pod) {
					continue
				}
				placed[q.Pod] = true
				earlier(q)
				before = append(before, q)
			}
		}
	}
	for _, pod := range out {
		if placed[pod.Pod] {
			continue
		}
		placed[pod.Pod] = true
		before = before[:0]
		earlier(pod)
		slices.SortStableFunc(before, schedulerLess)
		res = append(res, before...)
		res = append(res, pod)
	}
	return res
}

// sharesClaim reports whether pods a and b name a claim in common: its
// allocation, made once, is both pods', and the older pod takes none of
// the other's devices through it (it may take one through another of its
// claims, which the rule leaves alone).
func sharesClaim(a, b Pod) bool {
	for _, c := range a.Claims {
		if slices.ContainsFunc(b.Claims, func(d *resourceapi.ResourceClaim) bool { return claimKey(c) == claimKey(d) }) {
			return true
		}
	}
	return false
}

// kindProfile is a profile on GPUs of a kind (gpuKindInfo.key).
type kindProfile struct{ kind, profile string }

// podSize is the pod's demand in compute slices: for each device it
// requests, the compute slices of the smallest profile (of any kind of GPU
// of the snapshot) that satisfies the request alone; a request no profile
// satisfies counts 0. AllocationMode All counts one device. accepts are
// the profiles its requests accept, by kind of GPU.
//
// A request with neither exactly nor firstAvailable (the API server refuses
// it; the allocator would dereference nil) is an error.
func (p *planner) podSize(ctx context.Context, pod Pod) (int, []kindProfile, error) {
	total := 0
	var accepts []kindProfile
	for _, c := range pod.Claims {
		for _, r := range c.Spec.Devices.Requests {
			if r.Exactly == nil && len(r.FirstAvailable) == 0 {
				return 0, nil, fmt.Errorf("reading claim %s/%s: request %q has neither exactly nor firstAvailable", c.Namespace, c.Name, r.Name)
			}
			one, count := perDevice(c, r)
			smallest := 0
			for _, k := range p.kinds {
				ps, err := p.profilesOf(ctx, one, k)
				if err != nil {
					return 0, nil, err
				}
				for _, name := range ps {
					if a := (kindProfile{k.key, name}); !slices.Contains(accepts, a) {
						accepts = append(accepts, a)
					}
					if prof, err := k.standIn.Model.Profile(name); err == nil && (smallest == 0 || prof.ComputeSlices < smallest) {
						smallest = prof.ComputeSlices
					}
				}
			}
			total += count * smallest
		}
	}
	return total, accepts, nil
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
