package planner

import (
	"math"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Room is what a node has left of its allocatable resources for a pending
// pod, as kube-scheduler's NodeResourcesFit judges it: the pods bound there
// (Node.Requested) use what they request, except those of a lower priority
// than a pod that may preempt them (kube-scheduler evicts those where that
// makes the pod fit), and the pods this plan serves there use theirs. All
// quantities are in thousandths of the resource's unit (MilliValue:
// millicores, millibytes, thousandths of a pod), in vectors by the
// position of the resource's name in index. The zero Room judges nothing.
type Room struct {
	index map[corev1.ResourceName]int
	// alloc is the node's allocatable, -1 where it does not list the
	// resource; nil where it lists none.
	alloc []int64
	// levels are the priorities of the bound pods, highest first; used[i]
	// what the pods of priority levels[i] or higher request.
	levels []int32
	used   [][]int64
	// planned is what the pods this plan serves on the node request.
	planned []int64
	// loose: every pod asking no more than the plan's largest request of
	// each resource (planner.maxRoomRequest) fits, whatever its priority
	// (kept by the planner, which checks such pods no further).
	loose bool
}

// setLoose sets r.loose for max, the largest request of each resource.
func (r *Room) setLoose(max []int64) {
	r.loose = r.alloc == nil || r.fits(max, 0, false)
}

// NewRoom is the room n has for pending pods before any is planned there.
func NewRoom(n Node) Room {
	return newRoom(n, resourceIndex([]Node{n}))
}

// resourceIndex numbers the resources the nodes list as allocatable.
func resourceIndex(nodes []Node) map[corev1.ResourceName]int {
	index := map[corev1.ResourceName]int{}
	for _, n := range nodes {
		if n.Node == nil {
			continue
		}
		for name := range n.Node.Status.Allocatable {
			if _, ok := index[name]; !ok {
				index[name] = len(index)
			}
		}
	}
	return index
}

func newRoom(n Node, index map[corev1.ResourceName]int) Room {
	r := Room{index: index}
	if n.Node == nil || len(n.Node.Status.Allocatable) == 0 {
		return r
	}
	r.alloc = make([]int64, len(index))
	for i := range r.alloc {
		r.alloc[i] = -1
	}
	for name, q := range n.Node.Status.Allocatable {
		r.alloc[index[name]] = milliValue(q)
	}
	byPrio := slices.Clone(n.Requested)
	slices.SortStableFunc(byPrio, func(a, b PriorityRequests) int { return int(b.Priority) - int(a.Priority) })
	sum := make([]int64, len(index))
	for i, pr := range byPrio {
		for name, q := range pr.Requests {
			if j, ok := index[name]; ok {
				sum[j] = min(sum[j]+milliValue(q), maxMilli)
			}
		}
		if i+1 < len(byPrio) && byPrio[i+1].Priority == pr.Priority {
			continue
		}
		r.levels = append(r.levels, pr.Priority)
		r.used = append(r.used, slices.Clone(sum))
	}
	return r
}

// RoomRequest is what a pending pod asks of a node's room (Room.Fits): its
// requests and pod slot, its priority and whether it may preempt.
type RoomRequest struct {
	reqs     corev1.ResourceList
	priority int32
	preempts bool
}

// RequestOf is what a pending pod asks of a node's room (the extended
// resources its claims stand for are devices: pendingRequests).
func RequestOf(pod Pod) RoomRequest {
	reqs := pendingRequests(pod)
	reqs[corev1.ResourcePods] = *resourceOne
	return RoomRequest{reqs: reqs, priority: podPriority(pod.Pod), preempts: mayPreempt(pod.Pod)}
}

// vector is q's requests by index.
func (q RoomRequest) vector(index map[corev1.ResourceName]int) []int64 {
	v := make([]int64, len(index))
	for name, x := range q.reqs {
		if i, ok := index[name]; ok {
			v[i] = milliValue(x)
		}
	}
	return v
}

// Fits reports whether q fits the room now: each resource it requests that
// the node lists as allocatable (a request of zero is not judged, as
// kube-scheduler does not), and one more pod where the node lists how many
// it takes.
func (r Room) Fits(q RoomRequest) bool {
	if r.alloc == nil {
		return true
	}
	return r.fits(q.vector(r.index), q.priority, q.preempts)
}

func (r Room) fits(v []int64, priority int32, preempts bool) bool {
	if r.alloc == nil {
		return true
	}
	used := r.usedBy(priority, preempts)
	for i, q := range v {
		a := r.alloc[i]
		if q == 0 || a < 0 {
			continue
		}
		if r.planned != nil {
			q += r.planned[i]
		}
		if used != nil {
			q += used[i]
		}
		if q > a {
			return false
		}
	}
	return true
}

// usedBy is what the bound pods a pod of priority cannot preempt request:
// all of them where it may not preempt, else those of its priority or
// higher.
func (r Room) usedBy(priority int32, preempts bool) []int64 {
	if len(r.used) == 0 {
		return nil
	}
	if !preempts {
		return r.used[len(r.used)-1]
	}
	var out []int64
	for i, l := range r.levels {
		if l < priority {
			break
		}
		out = r.used[i]
	}
	return out
}

// Takes is how many pods asking q fit the room now, at most limit.
func (r Room) Takes(q RoomRequest, limit int) int {
	if r.alloc == nil {
		return limit
	}
	v := q.vector(r.index)
	used := r.usedBy(q.priority, q.preempts)
	n := limit
	for i, x := range v {
		a := r.alloc[i]
		if x == 0 || a < 0 {
			continue
		}
		free := a
		if r.planned != nil {
			free -= r.planned[i]
		}
		if used != nil {
			free -= used[i]
		}
		n = min(n, int(max(free, 0)/x))
	}
	return n
}

// maxMilli bounds a quantity in thousandths (milliValue): larger ones
// count as this much, a node's capacity as good as unlimited, so that sums
// of a few of them do not overflow int64.
const maxMilli = math.MaxInt64 / 8

// milliValue is q in thousandths of its unit, at most maxMilli (a negative
// quantity counts as none).
func milliValue(q resource.Quantity) int64 {
	if q.Sign() < 0 {
		return 0
	}
	if q.CmpInt64(maxMilli/1000) > 0 {
		return maxMilli
	}
	return q.MilliValue()
}

// add counts a pod this plan serves on the node (v: its requests by
// index), and sets loose again for max.
func (r *Room) add(v, max []int64) {
	if r.alloc == nil {
		return
	}
	if r.planned == nil {
		r.planned = make([]int64, len(r.alloc))
	}
	for i, q := range v {
		r.planned[i] = min(r.planned[i]+q, maxMilli)
	}
	r.setLoose(max)
}

// resourceOne is one pod (the slot RequestOf counts under "pods").
var resourceOne = resource.NewQuantity(1, resource.DecimalSI)

func podPriority(pod *corev1.Pod) int32 {
	if pod.Spec.Priority == nil {
		return 0
	}
	return *pod.Spec.Priority
}

// mayPreempt reports whether kube-scheduler may evict lower-priority pods
// for pod (its preemptionPolicy is not Never).
func mayPreempt(pod *corev1.Pod) bool {
	return pod.Spec.PreemptionPolicy == nil || *pod.Spec.PreemptionPolicy != corev1.PreemptNever
}

// roomVector is what pod asks of nodes' room (RequestOf), by the plan's
// resource index, memoised per pod.
func (p *planner) roomVector(pod Pod) []int64 {
	key := podKey(pod.Pod)
	if v, ok := p.roomVectors[key]; ok {
		return v
	}
	v := RequestOf(pod).vector(p.resources)
	p.roomVectors[key] = v
	return v
}

// withRoom returns the nodes among nodes whose room (nodeState.room) fits
// pod now.
func (p *planner) withRoom(pod Pod, nodes []*nodeState) []*nodeState {
	if len(p.resources) == 0 {
		return nodes
	}
	v := p.roomVector(pod)
	prio, preempts := podPriority(pod.Pod), mayPreempt(pod.Pod)
	small := !slices.ContainsFunc(v, func(q int64) bool { return q > 0 }) || lessEq(v, p.maxRequest)
	out := nodes
	for i, n := range nodes {
		fits := small && n.room.loose || n.room.fits(v, prio, preempts)
		switch {
		case fits && len(out) < len(nodes):
			out = append(out, n)
		case !fits && len(out) == len(nodes):
			out = slices.Clone(nodes[:i])
		}
	}
	return out
}

// lessEq reports whether a[i] <= b[i] for every i.
func lessEq(a, b []int64) bool {
	for i := range a {
		if a[i] > b[i] {
			return false
		}
	}
	return true
}

// initRoom sets the largest request of each resource among the pending
// pods (maxRequest) and each node's room against it.
func (p *planner) initRoom(pods []Pod) {
	if len(p.resources) == 0 {
		return
	}
	p.maxRequest = make([]int64, len(p.resources))
	for _, pod := range pods {
		for i, q := range p.roomVector(pod) {
			p.maxRequest[i] = max(p.maxRequest[i], q)
		}
	}
	for _, n := range p.nodes {
		n.room.setLoose(p.maxRequest)
	}
}
