package controller

import (
	"fmt"
	"maps"
	"math"
	"regexp"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"

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

// maxDeclineDoublings bounds how many times a node declined again for
// the same pod doubles AutoPlanner.DeclinedFor (10 min, 20, 40, then 80).
const maxDeclineDoublings = 3

// declineTracker notices pending pods that kube-scheduler does not bind
// where free devices a plan gave them wait, and keeps those nodes out of
// the pods' plans for a while (planner.Pod.Declined). The planner judges a
// node by the pod's node selector, required node affinity, taints and
// tolerations and resources, not by what kube-scheduler's other filters
// judge (inter-pod affinity and anti-affinity, topology spread, host ports,
// volumes) nor by another scheduler's rules: without the tracker a pod one
// of those keeps off the node its devices were made on would wait there for
// good. It lives in memory, by pod UID, for the pods pending; a
// controller that starts reads the declines back from its events
// (readDeclines).
type declineTracker struct {
	// waiting: where the last plan gave the pod free devices, and for
	// how long they have been allocatable (freeWait).
	waiting map[types.UID]*freeWait
	// declined: the nodes kube-scheduler kept the pod off.
	declined map[types.UID]map[string]*declineRecord
}

// freeWait is a pod served, in plan after plan, by the same free devices
// of a node. Only the time between two plans that both found the devices
// allocatable (available: on a GPU at rest) counts, so that a change of
// another part of the GPU pauses the wait rather than restarting it.
type freeWait struct {
	node    string
	devices []string
	// waited is the time counted so far; last is the plan that last
	// saw the placement, and lastAvailable whether it found the
	// devices allocatable.
	waited        time.Duration
	last          time.Time
	lastAvailable bool
	// nominated: a preemption nominated the pod to the node, which is
	// then never declined (nor its wait due, nor counted).
	nominated bool
}

// mark counts the wait up to now, the time since the last look counting
// if the devices were allocatable then, and records whether they are now.
func (w *freeWait) mark(now time.Time, available bool) {
	if w.lastAvailable && now.After(w.last) {
		w.waited += now.Sub(w.last)
	}
	w.last, w.lastAvailable = now, available
}

// dueAt is when the wait reaches unboundAfter, if the devices stay
// allocatable; the zero time while they are not, or for a pod nominated to
// the node.
func (w *freeWait) dueAt(unboundAfter time.Duration) time.Time {
	if !w.lastAvailable || w.nominated {
		return time.Time{}
	}
	return w.last.Add(unboundAfter - w.waited)
}

// declineRecord is a node declined for a pod: until when, and how many
// times it has been (each time keeps it out twice as long, up to
// maxDeclineDoublings, so that a pod no Auto node can host does not have
// devices made for it on each node in turn every DeclinedFor).
type declineRecord struct {
	until time.Time
	times int
}

// declineLength is how long a node declined for a pod stays declined when
// it was declined times times before: keepFor, doubled for each time before
// up to maxDeclineDoublings, without overflowing.
func declineLength(keepFor time.Duration, times int) time.Duration {
	d := keepFor
	for range min(times, maxDeclineDoublings) {
		if d > math.MaxInt64/2 {
			return math.MaxInt64
		}
		d *= 2
	}
	return d
}

// declination is a node found to be kept from a pod.
type declination struct {
	pod     *corev1.Pod
	node    string
	devices []string
	waited  time.Duration
	keptFor time.Duration
}

// prepare forgets the waits of pods no longer pending and the nodes
// declined for pods that are gone or bound, counts the waits up to
// snap.Now (every pass runs it, and a GPU's change of state wakes the
// planner, so a wait counts exactly the time its devices were allocatable,
// batching windows included), and sets planner.Pod.Declined on snap's
// pending pods (the nodes declined for them until after snap.Now). It
// returns a fingerprint of the waits that have reached unboundAfter (the
// plan to run for them: the batcher plans the same inputs once) and how
// long until the next wait or declination falls due (0: none will).
func (t *declineTracker) prepare(in AutoInputs, snap *planner.Snapshot, unboundAfter time.Duration) (string, time.Duration) {
	pending := map[types.UID]int{}
	for i, p := range snap.Pending {
		pending[p.Pod.UID] = i
	}
	maps.DeleteFunc(t.waiting, func(uid types.UID, _ *freeWait) bool {
		_, ok := pending[uid]
		return !ok
	})
	for uid, w := range t.waiting {
		w.nominated = snap.Pending[pending[uid]].Pod.Status.NominatedNodeName == w.node
		w.mark(snap.Now, !w.nominated && available(in, planner.Placement{Node: w.node, Devices: w.devices}))
	}
	// A pod that leaves the demand a while (nominated to a node Auto mode
	// does not plan, a scheduling error) keeps its declined nodes, and
	// their count, until it is bound or deleted.
	unbound := sets.New[types.UID]()
	for i := range in.Pods {
		if p := &in.Pods[i]; p.Spec.NodeName == "" && p.DeletionTimestamp == nil {
			unbound.Insert(p.UID)
		}
	}
	maps.DeleteFunc(t.declined, func(uid types.UID, _ map[string]*declineRecord) bool { return !unbound.Has(uid) })
	for uid, nodes := range t.declined {
		i, ok := pending[uid]
		if !ok {
			continue
		}
		var active []string
		for node, r := range nodes {
			if snap.Now.Before(r.until) {
				active = append(active, node)
			}
		}
		slices.Sort(active)
		snap.Pending[i].Declined = active
	}
	return t.overdue(snap.Now, unboundAfter), t.due(snap.Now, unboundAfter)
}

// restore seeds the declines from the controller's own events
// (declinedEvents), as it starts: a node left out of a pod's plans before
// stays out for what remains of its length and, declined again, is left
// out twice as long as it was (times follows from the length and
// keepFor). A length beyond the longest the controller gives (keepFor
// doubled maxDeclineDoublings times: an event anyone who may write events
// in the pod's namespace could have posted) is cut to that. Events of
// ended declines count too, for that doubling; prepare forgets the pods
// that are gone or bound. It returns the records as restored, by node and
// pod.
func (t *declineTracker) restore(events []declinedEvent, keepFor time.Duration) []declinedEvent {
	if t.declined == nil {
		t.declined = map[types.UID]map[string]*declineRecord{}
	}
	longest := declineLength(keepFor, maxDeclineDoublings)
	for _, d := range events {
		if d.length > longest {
			d.until = d.until.Add(longest - d.length)
			d.length = longest
		}
		times := 1
		for times <= maxDeclineDoublings && declineLength(keepFor, times-1) < d.length {
			times++
		}
		nodes := t.declined[d.uid]
		if nodes == nil {
			nodes = map[string]*declineRecord{}
			t.declined[d.uid] = nodes
		}
		r := nodes[d.node]
		if r == nil {
			r = &declineRecord{}
			nodes[d.node] = r
		}
		if d.until.After(r.until) {
			r.until = d.until
		}
		r.times = max(r.times, times)
	}
	var out []declinedEvent
	for uid, nodes := range t.declined {
		for node, r := range nodes {
			out = append(out, declinedEvent{uid: uid, node: node, until: r.until})
		}
	}
	return out
}

// due is how long after now the next wait reaches unboundAfter or the next
// declination ends (0: none will).
func (t *declineTracker) due(now time.Time, unboundAfter time.Duration) time.Duration {
	var due time.Duration
	next := func(at time.Time) {
		if !at.IsZero() {
			due = sooner(due, at.Sub(now))
		}
	}
	for _, w := range t.waiting {
		next(w.dueAt(unboundAfter))
	}
	for _, nodes := range t.declined {
		for _, r := range nodes {
			next(r.until)
		}
	}
	return due
}

// observe records where res gives pending pods free devices that exist
// (servedByFree) and whether they are allocatable now (available). With
// decline, a pod whose devices have been allocatable for unboundAfter, in
// the plans that gave it the same ones, and that is still not bound, has
// their node declined for keepFor (doubled for each time before): it is
// added to the pod's planner.Pod.Declined in snap and returned. The node a
// preemption nominated the pod to is never declined: kube-scheduler binds
// it there once its victims are gone.
func (t *declineTracker) observe(in AutoInputs, snap *planner.Snapshot, res planner.Result, unboundAfter, keepFor time.Duration, decline bool) []declination {
	if t.waiting == nil {
		t.waiting = map[types.UID]*freeWait{}
	}
	if t.declined == nil {
		t.declined = map[types.UID]map[string]*declineRecord{}
	}
	byName := map[string]int{}
	for i, p := range snap.Pending {
		byName[p.Pod.Namespace+"/"+p.Pod.Name] = i
	}
	var out []declination
	served := map[types.UID]bool{}
	for _, s := range res.Served {
		i, ok := byName[s.Pod]
		if !ok || !servedByFree(in, s) {
			continue
		}
		pod := snap.Pending[i].Pod
		served[pod.UID] = true
		// While a preemption nominates the pod to the node, the wait
		// does not count: kube-scheduler binds it there once its
		// victims are gone.
		nominated := pod.Status.NominatedNodeName == s.Node
		now, avail := snap.Now, !nominated && available(in, s)
		w, ok := t.waiting[pod.UID]
		if !ok || w.node != s.Node || !slices.Equal(w.devices, s.Devices) {
			t.waiting[pod.UID] = &freeWait{node: s.Node, devices: s.Devices, last: now, lastAvailable: avail, nominated: nominated}
			continue
		}
		w.mark(now, avail)
		w.nominated = nominated
		if !decline || !avail || w.waited < unboundAfter || w.nominated {
			continue
		}
		delete(t.waiting, pod.UID)
		if t.declined[pod.UID] == nil {
			t.declined[pod.UID] = map[string]*declineRecord{}
		}
		r := t.declined[pod.UID][s.Node]
		if r == nil {
			r = &declineRecord{}
			t.declined[pod.UID][s.Node] = r
		}
		kept := declineLength(keepFor, r.times)
		r.times++
		r.until = now.Add(kept)
		snap.Pending[i].Declined = append(snap.Pending[i].Declined, s.Node)
		slices.Sort(snap.Pending[i].Declined)
		out = append(out, declination{pod: pod, node: s.Node, devices: s.Devices, waited: w.waited, keptFor: kept})
	}
	maps.DeleteFunc(t.waiting, func(uid types.UID, _ *freeWait) bool { return !served[uid] })
	return out
}

// overdue is prepare's fingerprint of the waits due at now.
func (t *declineTracker) overdue(now time.Time, unboundAfter time.Duration) string {
	var out []string
	for uid, w := range t.waiting {
		if at := w.dueAt(unboundAfter); !at.IsZero() && !now.Before(at) {
			// The due time tells a wait from a later one of the
			// same pod and node.
			out = append(out, fmt.Sprintf("%s %s %d", uid, w.node, at.UnixNano()))
		}
	}
	slices.Sort(out)
	return strings.Join(out, ",")
}

// servedByFree reports whether a placement gives its pod devices that
// exist: no change serves it, and each of its MIG devices is in the layout
// the node's agent reports (a device of a change in flight is in the
// planner's layout of its GPU before it is made).
func servedByFree(in AutoInputs, s planner.Placement) bool {
	if s.NeedsChange {
		return false
	}
	for _, d := range s.Devices {
		if idx, _, ok := migslices.DeviceGPUIndex(d); ok && !exists(in, s.Node, idx, d) {
			return false
		}
	}
	return true
}

// available reports whether kube-scheduler may allocate a placement's MIG
// devices now: each is in the layout its agent reports, on a GPU it reports
// Ready, whose spec (if any) keeps it. The agent taints only the devices a change destroys, but
// it lifts the taints of a change cancelled while it drains (an idle GPU
// given back whole, whose reclaim a plan cancels) only once it is done, so
// a GPU that is not Ready counts as not allocatable.
func available(in AutoInputs, s planner.Placement) bool {
	nml := in.NodeMigLayouts[s.Node]
	if nml == nil {
		return false
	}
	for _, d := range s.Devices {
		idx, _, ok := migslices.DeviceGPUIndex(d)
		if !ok {
			continue
		}
		if !exists(in, s.Node, idx, d) {
			return false
		}
		i := slices.IndexFunc(nml.Status.GPUs, func(st v1alpha1.GPUStatus) bool { return int(st.Index) == idx })
		if i < 0 || nml.Status.GPUs[i].Phase != v1alpha1.PhaseReady {
			return false
		}
		for _, spec := range nml.Spec.GPUs {
			if int(spec.Index) != idx {
				continue
			}
			desired, err := mig.ParseLayout(spec.Layout)
			if err != nil || !spec.MIGEnabled || !slices.ContainsFunc(desired, func(m mig.Device) bool {
				return migslices.IsMIGDeviceName(d, idx, m.Profile, m.Start)
			}) {
				return false
			}
		}
	}
	return true
}

// declinedNote is the note of an EventSchedulerDeclinedNode event. It
// starts with the node and how long it is left out, which DeclinedNodes
// reads back (the rest may be truncated).
func declinedNote(d declination) string {
	return fmt.Sprintf("node %s is left out of the pod's plans for %s: free devices for the pod (%s) waited there for %s and kube-scheduler did not bind it there; something miglayout does not judge keeps it off that node (pod affinity or anti-affinity, topology spread, host ports, volumes, or another scheduler)",
		d.node, d.keptFor, strings.Join(d.devices, ", "), d.waited.Round(time.Second))
}

// declinedNoteHead is what DeclinedNodes reads of a declinedNote: the
// node and how long it is left out (a time.Duration string).
var declinedNoteHead = regexp.MustCompile(`^node (\S+) is left out of the pod's plans for (\S+): `)

// DeclinedNodes returns, per pod UID, the nodes the controller has left out
// of each pod's plans at now (sorted), read from its
// EventSchedulerDeclinedNode events on the pods (declinedEvents; keepFor
// is the controller's --auto-declined-for, which bounds the lengths read
// as declineTracker.restore does). The controller keeps these in memory
// and reads them back when it starts; kubectl miglayout plan reads them so
// that its dry run leaves the same nodes out. Events expire (the API
// server's --event-ttl, 1 h by default) and may be dropped, so this is
// what the controller said, not always all it holds.
func DeclinedNodes(events []eventsv1.Event, now time.Time, keepFor time.Duration) map[types.UID][]string {
	var t declineTracker
	out := map[types.UID][]string{}
	for _, d := range t.restore(declinedEvents(events, now), keepFor) {
		if now.Before(d.until) {
			out[d.uid] = append(out[d.uid], d.node)
		}
	}
	for _, nodes := range out {
		slices.Sort(nodes)
	}
	return out
}

// declinedEvent is a node declined for a pod, read back from an
// EventSchedulerDeclinedNode event: until when, for how long in all.
type declinedEvent struct {
	uid    types.UID
	node   string
	until  time.Time
	length time.Duration
}

// declinedEvents reads the EventSchedulerDeclinedNode events on pods: each
// declines its node from the event's last time (its series' last
// observation, else its event time, else its deprecated last timestamp;
// one after now counts as now) for the length its note gives. Events of
// another reason, reported by another controller than this one (Name), on
// another kind than Pod or a pod of another namespace, or whose note does
// not parse are skipped. Anyone who may write events in a pod's namespace
// can still post one as this controller: restore bounds its length, and
// the clamp to now keeps a time set in the future from stretching it.
func declinedEvents(events []eventsv1.Event, now time.Time) []declinedEvent {
	var out []declinedEvent
	for i := range events {
		e := &events[i]
		if e.Reason != EventSchedulerDeclinedNode || e.ReportingController != Name ||
			e.Regarding.Kind != "Pod" || e.Regarding.UID == "" || e.Regarding.Namespace != e.Namespace {
			continue
		}
		m := declinedNoteHead.FindStringSubmatch(e.Note)
		if m == nil {
			continue
		}
		length, err := time.ParseDuration(m[2])
		if err != nil || length <= 0 {
			continue
		}
		last := eventLastTime(e)
		if last.After(now) {
			last = now
		}
		out = append(out, declinedEvent{uid: e.Regarding.UID, node: m[1], until: last.Add(length), length: length})
	}
	return out
}

// eventLastTime is when an event was last seen: its series' last
// observation, else its event time, else its deprecated last timestamp,
// else its deprecated first timestamp. (client-go's recorder writes a
// series' later occurrences minutes after they happen, so a decline read
// from one may end early; only identical notes make a series, which with
// the default lengths do not come close enough together.)
func eventLastTime(e *eventsv1.Event) time.Time {
	switch {
	case e.Series != nil && !e.Series.LastObservedTime.IsZero():
		return e.Series.LastObservedTime.Time
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	case !e.DeprecatedLastTimestamp.IsZero():
		return e.DeprecatedLastTimestamp.Time
	}
	return e.DeprecatedFirstTimestamp.Time
}
