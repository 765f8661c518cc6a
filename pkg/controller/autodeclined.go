package controller

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/miglayout/miglayout/api/v1alpha1"
	"github.com/miglayout/miglayout/pkg/mig"
	"github.com/miglayout/miglayout/pkg/planner"
	migslices "github.com/miglayout/miglayout/pkg/slices"
)

// DefaultUnboundAfter is the AutoPlanner.UnboundAfter the controller uses
// unless told otherwise: how long free devices a plan gave a pending pod
// wait on a node before the node counts as one kube-scheduler keeps the
// pod off. kube-scheduler retries a pod its DRA plugin refused within
// seconds of the node's ResourceSlices changing (its backoff is at most
// 10 s by default), so a minute leaves a wide margin.
const DefaultUnboundAfter = time.Minute

// DefaultDeclinedFor is the AutoPlanner.DeclinedFor the controller uses
// unless told otherwise: how long a node kube-scheduler kept a pod off stays
// out of the pod's plans before it is tried again (what kept the pod off,
// another pod's anti-affinity say, may be gone by then).
const DefaultDeclinedFor = 10 * time.Minute

// declineTracker notices pending pods that kube-scheduler does not bind
// where free devices a plan gave them wait, and keeps those nodes out of
// the pods' plans for a while (planner.Pod.Declined). The planner judges a
// node by the pod's node selector, required node affinity, taints and
// tolerations and resources, not by what kube-scheduler's other filters
// judge (inter-pod affinity and anti-affinity, topology spread, host ports,
// volumes) nor by another scheduler's rules: without the tracker a pod one
// of those keeps off the node its devices were made on would wait there for
// good. It lives in memory, by pod UID; a restarted controller notices
// again.
type declineTracker struct {
	// waiting: where the last plan gave the pod devices that exist and
	// are free, and since when the plans have.
	waiting map[types.UID]freeWait
	// declined: the nodes kube-scheduler kept the pod off, and when that
	// was noticed.
	declined map[types.UID]map[string]time.Time
}

// freeWait is a pod served by free devices on a node since a time.
type freeWait struct {
	node    string
	devices []string
	since   time.Time
}

// declination is a node found to be kept from a pod.
type declination struct {
	pod     *corev1.Pod
	node    string
	devices []string
	waited  time.Duration
}

// prepare forgets the pods that no longer wait and the declinations older
// than keepFor, and sets planner.Pod.Declined on snap's pending pods. It
// returns a fingerprint of the pods whose free devices have waited for
// unboundAfter or longer (the plan to run for them: the batcher plans the
// same inputs once) and how long until the next wait or declination falls
// due (0: none will).
func (t *declineTracker) prepare(snap *planner.Snapshot, unboundAfter, keepFor time.Duration) (string, time.Duration) {
	pending := map[types.UID]int{}
	for i, p := range snap.Pending {
		pending[p.Pod.UID] = i
	}
	maps.DeleteFunc(t.waiting, func(uid types.UID, _ freeWait) bool {
		_, ok := pending[uid]
		return !ok
	})
	var due time.Duration
	next := func(at time.Time) {
		if d := at.Sub(snap.Now); d > 0 && (due == 0 || d < due) {
			due = d
		}
	}
	for uid, nodes := range t.declined {
		i, ok := pending[uid]
		if !ok {
			delete(t.declined, uid)
			continue
		}
		maps.DeleteFunc(nodes, func(_ string, at time.Time) bool { return !snap.Now.Before(at.Add(keepFor)) })
		if len(nodes) == 0 {
			delete(t.declined, uid)
			continue
		}
		snap.Pending[i].Declined = slices.Sorted(maps.Keys(nodes))
		for _, at := range nodes {
			next(at.Add(keepFor))
		}
	}
	var overdue []string
	for uid, w := range t.waiting {
		if snap.Now.Before(w.since.Add(unboundAfter)) {
			next(w.since.Add(unboundAfter))
			continue
		}
		overdue = append(overdue, string(uid)+" "+w.node)
	}
	slices.Sort(overdue)
	return strings.Join(overdue, ","), due
}

// observe records where res gives pending pods free devices that exist
// (waitsOnFreeDevices). With decline, a pod that the plans have given free
// devices on the same node for unboundAfter or longer, and that is still
// not bound, has that node declined: it is added to the pod's
// planner.Pod.Declined in snap and returned. The node a preemption
// nominated the pod to is never declined: kube-scheduler binds it there once
// its victims are gone.
func (t *declineTracker) observe(in AutoInputs, snap *planner.Snapshot, res planner.Result, unboundAfter time.Duration, decline bool) []declination {
	if t.waiting == nil {
		t.waiting = map[types.UID]freeWait{}
		t.declined = map[types.UID]map[string]time.Time{}
	}
	byName := map[string]int{}
	for i, p := range snap.Pending {
		byName[p.Pod.Namespace+"/"+p.Pod.Name] = i
	}
	var out []declination
	served := map[types.UID]bool{}
	for _, s := range res.Served {
		i, ok := byName[s.Pod]
		if !ok || !waitsOnFreeDevices(in, s) {
			continue
		}
		pod := snap.Pending[i].Pod
		served[pod.UID] = true
		w, ok := t.waiting[pod.UID]
		if !ok || w.node != s.Node {
			t.waiting[pod.UID] = freeWait{node: s.Node, devices: s.Devices, since: snap.Now}
			continue
		}
		if !decline || snap.Now.Before(w.since.Add(unboundAfter)) || pod.Status.NominatedNodeName == s.Node {
			continue
		}
		delete(t.waiting, pod.UID)
		if t.declined[pod.UID] == nil {
			t.declined[pod.UID] = map[string]time.Time{}
		}
		t.declined[pod.UID][s.Node] = snap.Now
		snap.Pending[i].Declined = slices.Sorted(maps.Keys(t.declined[pod.UID]))
		out = append(out, declination{pod: pod, node: s.Node, devices: s.Devices, waited: snap.Now.Sub(w.since)})
	}
	maps.DeleteFunc(t.waiting, func(uid types.UID, _ freeWait) bool { return !served[uid] })
	return out
}

// waitsOnFreeDevices reports whether a placement gives its pod devices
// that kube-scheduler may allocate now: no change serves it, and each of
// its MIG devices is in the layout the node's agent reports on a GPU at
// rest (settled). A device of a change in flight is in the planner's layout
// of its GPU before it is made, and the free devices of a GPU being drained
// (an idle GPU given back whole, whose reclaim the plan cancels) carry the
// drain taint until the agent is done with it.
func waitsOnFreeDevices(in AutoInputs, s planner.Placement) bool {
	if s.NeedsChange {
		return false
	}
	for _, d := range s.Devices {
		if idx, _, ok := migslices.DeviceGPUIndex(d); ok && (!exists(in, s.Node, idx, d) || !settled(in.NodeMigLayouts[s.Node], idx)) {
			return false
		}
	}
	return true
}

// settled reports whether GPU index of the NodeMigLayout is Ready with the
// layout its spec asks for (or no spec for it): its agent publishes its
// devices untainted.
func settled(nml *v1alpha1.NodeMigLayout, index int) bool {
	if nml == nil {
		return false
	}
	for _, st := range nml.Status.GPUs {
		if int(st.Index) != index {
			continue
		}
		if st.Phase != v1alpha1.PhaseReady {
			return false
		}
		for _, spec := range nml.Spec.GPUs {
			if spec.Index != st.Index {
				continue
			}
			desired, err1 := mig.ParseLayout(spec.Layout)
			actual, err2 := mig.ParseLayout(st.Layout)
			return spec.MIGEnabled && err1 == nil && err2 == nil && desired.Equal(actual)
		}
		return true
	}
	return false
}

// declinedNote is the note of an EventSchedulerDeclinedNode event.
func declinedNote(d declination, keepFor time.Duration) string {
	return fmt.Sprintf("free devices for the pod (%s) waited on node %s for %s and kube-scheduler did not bind it there: something miglayout does not judge keeps it off that node (pod affinity or anti-affinity, topology spread, host ports, volumes, or another scheduler); the pod is planned on other nodes for the next %s",
		strings.Join(d.devices, ", "), d.node, d.waited.Round(time.Second), keepFor)
}
