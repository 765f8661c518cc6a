package controller

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	resourcehelper "k8s.io/component-helpers/resource"
	"k8s.io/utils/ptr"

	"github.com/miglayout/miglayout/pkg/mig"
	"github.com/miglayout/miglayout/pkg/planner"
	migslices "github.com/miglayout/miglayout/pkg/slices"
)

// podEvent is the last event a pending pod heard from the planner.
type podEvent struct {
	what string // reason and note
	at   time.Time
	pod  types.NamespacedName
}

// eventRepeat is how long a pending pod's event stands before a plan with
// the same outcome records it again, and how often pods that wait are
// planned again though nothing changed: at most two of it pass between a
// pod's events, less than the API server's default --event-ttl (one hour),
// so that one is always there.
const eventRepeat = 20 * time.Minute

// nextRefresh is how long until pending pods are planned again though
// nothing changed (inputKey), 0 with none pending.
func nextRefresh(snap planner.Snapshot) time.Duration {
	if len(snap.Pending) == 0 || snap.Now.IsZero() {
		return 0
	}
	return snap.Now.Truncate(eventRepeat).Add(eventRepeat).Sub(snap.Now)
}

// maxPodEventsPerPass is the most pod events one plan records. The event
// recorder's broadcaster queues 1000 events and drops what comes past
// them, while its sink writes them one at a time: a burst of thousands of
// pending pods would otherwise leave most of them unheard, marked as told,
// until eventRepeat. The others are told by the next passes
// (eventBacklogRecheck).
const maxPodEventsPerPass = 250

// eventBacklogRecheck is how soon a plan that left pods untold
// (maxPodEventsPerPass) is made again to tell them.
const eventBacklogRecheck = time.Second

// untoldPlan is a plan that left pods untold, and the inputs it planned
// (their key, AutoPlanner.batch.planned).
type untoldPlan struct {
	key  string
	in   AutoInputs
	snap planner.Snapshot
	res  planner.Result
}

// setUntold records u, a plan of the inputs last planned, as the one whose
// pods are still to be told (nil: none).
func (a *AutoPlanner) setUntold(u *untoldPlan) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if u != nil {
		u.key = a.batch.planned
	}
	a.untold = u
}

// tellUntold tells, from the plan that left them untold, up to
// maxPodEventsPerPass more of its pods, where the inputs (key) are the ones
// it planned: a burst of thousands of pending pods is told over passes
// without the same inputs being planned once per maxPodEventsPerPass pods.
// It reports whether pods are still left untold.
func (a *AutoPlanner) tellUntold(key string) bool {
	a.mu.Lock()
	u := a.untold
	if u != nil && u.key != key {
		u, a.untold = nil, nil
	}
	a.mu.Unlock()
	if u == nil {
		return false
	}
	if a.notify(u.in, u.snap, u.res) {
		return true
	}
	a.setUntold(nil)
	return false
}

// notify records, once per pod and plan outcome, why it waits (again after
// eventRepeat), for at most maxPodEventsPerPass pods; it reports whether
// it left some untold.
func (a *AutoPlanner) notify(in AutoInputs, snap planner.Snapshot, res planner.Result) (backlog bool) {
	if a.Recorder == nil {
		return false
	}
	pods := map[string]*corev1.Pod{}
	for _, p := range snap.Pending {
		pods[p.Pod.Namespace+"/"+p.Pod.Name] = p.Pod
	}
	targets := repartitionTargets(in, snap, res)
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.events == nil {
		a.events = map[string]podEvent{}
	}
	now := a.now()
	// Keyed by UID: a pod made again under the same name hears again. A
	// pod still waiting as before hears it again once the API server may
	// have dropped the event (--event-ttl, one hour by default), so that
	// kubectl describe pod keeps saying why it waits.
	// The recorder counts an event of the same pod, reason, action
	// and related object as a repeat and drops its note, so a pod whose
	// outcome changed (planned onto another GPU; no room now, then only a
	// lost node could take it) would still read the first note: the action
	// ends in a hash of the note (eventnote.Distinct), and an event about a GPU
	// also names the GPU in its action and its node's NodeMigLayout as
	// related object.
	// same is what makes two events alike ("" = the note): for
	// WaitingForRepartition the GPU and its layout, not the device the
	// note gives as example, which the next pass may name otherwise (the
	// change in flight hands its devices out anew).
	told := 0
	emit := func(key, eventType, reason string, on *gpuRef, note, same string) {
		pod := pods[key]
		if pod == nil {
			return
		}
		if same == "" {
			same = note
		}
		last, ok := a.events[string(pod.UID)]
		if ok && last.what == reason+same && now.Sub(last.at) < eventRepeat {
			return
		}
		if told >= maxPodEventsPerPass {
			backlog = true
			return
		}
		told++
		a.events[string(pod.UID)] = podEvent{what: reason + same, at: now, pod: types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}}
		action := "Plan"
		var related runtime.Object
		if on != nil {
			action = gpuAction(action, int32(on.gpu))
			related = nodeMigLayoutRef(on.node)
		}
		note = truncate(note, maxEventNote)
		a.Recorder.Eventf(pod, related, eventType, reason, action, "%s", note)
	}
	for _, s := range res.Served {
		if target := targets[s.Pod]; target != "" {
			// The GPU of its first device still to be made.
			var on *gpuRef
			for _, d := range s.Devices {
				if idx, _, ok := migslices.DeviceGPUIndex(d); ok && !exists(in, s.Node, idx, d) {
					on = &gpuRef{node: s.Node, gpu: idx}
					break
				}
			}
			waits := "waiting for the repartition of " + target
			emit(s.Pod, corev1.EventTypeNormal, EventWaitingForRepartition, on, waits+" (a device such as "+strings.Join(s.Devices, ", ")+")", waits)
		}
	}
	const waiting = "no GPU can take it now without destroying a device in use or changing more GPUs at once than the policy allows"
	for pod, k := range res.Kept {
		emit(pod, corev1.EventTypeNormal, EventWaitingForCapacity, &gpuRef{node: k.Node, gpu: k.GPU}, waiting+"; "+k.String()+" are kept for it: miglayout makes no device there for another pod (kube-scheduler may still give one a device free there already)", "")
	}
	for pod, why := range res.Unservable {
		switch why {
		case planner.NoRoom:
			msg := waiting + "; it takes the first room that frees up"
			if anyTainted(snap) {
				msg = waiting + ", nor by making a device a DeviceTaintRule taints or on a GPU an Xid hit; it takes the first room that frees up"
			}
			emit(pod, corev1.EventTypeNormal, EventWaitingForCapacity, nil, msg, "")
			continue
		case planner.WaitsForSharedClaim:
			emit(pod, corev1.EventTypeNormal, EventWaitingForSharedClaim, nil, why, "")
			continue
		case planner.WaitsForLostNode, planner.WaitsForAllModeNode, planner.WaitsForNodeResources:
			emit(pod, corev1.EventTypeNormal, EventWaitingForCapacity, nil, why, "")
			continue
		}
		emit(pod, corev1.EventTypeWarning, EventNotServable, nil, why, "")
	}
	a.untellLocked(in, snap)
	return backlog
}

// untell forgets the pods told before that are no demand any more, and tells
// those a change was planned or a placement kept for, and that still wait
// for devices, that nothing is planned for them now (NoLongerPlanned). A
// pod kube-scheduler has not reported unschedulable again since its last
// try failed on an error of its own (waitsUnplanned) is still the
// planner's: its change is kept (UnneededChanges), and it hears nothing.
// notify does it on every pass that plans; a pass with no demand at all
// calls it alone.
func (a *AutoPlanner) untell(in AutoInputs, snap planner.Snapshot) {
	if a.Recorder == nil {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.untellLocked(in, snap)
}

func (a *AutoPlanner) untellLocked(in AutoInputs, snap planner.Snapshot) {
	pending := make(map[string]bool, len(snap.Pending))
	for _, p := range snap.Pending {
		pending[string(p.Pod.UID)] = true
	}
	var byUID map[string]*corev1.Pod
	var unplanned sets.Set[string]
	for uid, e := range a.events {
		if pending[uid] {
			continue
		}
		if byUID == nil {
			byUID = make(map[string]*corev1.Pod, len(in.Pods))
			for i := range in.Pods {
				byUID[string(in.Pods[i].UID)] = &in.Pods[i]
			}
			unplanned = waitsUnplanned(in.Pods, in.Claims)
		}
		pod := byUID[uid]
		if pod != nil && unplanned.Has(pod.Namespace+"/"+pod.Name) {
			continue
		}
		delete(a.events, uid)
		if promised(e) && pod != nil && waitsForDevices(pod, in.Claims) {
			a.Recorder.Eventf(pod, nil, corev1.EventTypeNormal, EventNoLongerPlanned, "Plan", "%s",
				"miglayout plans no GPU for this pod any more: it no longer asks for a MIG device Auto mode makes (its claims, or their DeviceClasses, changed, or a claim is missing), or it is nominated to a node Auto mode does not plan; what was planned for it may be cancelled, and the pod waits for kube-scheduler to find a device")
		}
	}
}

// promised reports whether e told a pod that a GPU is being repartitioned
// for it, or that a placement is kept for it.
func promised(e podEvent) bool {
	return strings.HasPrefix(e.what, EventWaitingForRepartition) || strings.HasPrefix(e.what, EventWaitingForCapacity)
}

// waitsForDevices reports whether pod is not bound nor being deleted and
// one of its claims is not allocated (or not there): a pod that left the
// demand that way still waits, where one whose claims kube-scheduler has
// allocated is being bound.
func waitsForDevices(pod *corev1.Pod, claims map[types.NamespacedName]*resourceapi.ResourceClaim) bool {
	if pod.Spec.NodeName != "" || pod.DeletionTimestamp != nil {
		return false
	}
	for i := range pod.Spec.ResourceClaims {
		c, needed := podClaim(pod, &pod.Spec.ResourceClaims[i], claims)
		if needed && (c == nil || c.Status.Allocation == nil) {
			return true
		}
	}
	return false
}

// repartitionTargets names, for each served pod that waits for a GPU to be
// repartitioned, that GPU and its coming layout ("node/gpu-N: layout"): a
// change of the plan serves it, or one of its devices is coming with a
// change in flight (it is not in the layout the node's agent reports now).
// Pods given devices that exist already are absent, on a GPU changing
// elsewhere, or one whose change failed and is retried, too.
func repartitionTargets(in AutoInputs, snap planner.Snapshot, res planner.Result) map[string]string {
	out := map[string]string{}
	// A pod given free devices that exist on a GPU this plan changes
	// anyway is among the change's pods but waits for nothing.
	waits := map[string]bool{}
	for _, s := range res.Served {
		waits[s.Pod] = s.NeedsChange
	}
	for _, c := range res.Changes {
		for _, pod := range c.Serves {
			if w, ok := waits[pod]; ok && !w {
				continue
			}
			out[pod] = fmt.Sprintf("%s/gpu-%d: %s", c.Node, c.GPU, c.To.String())
		}
	}
	inFlight := map[string]string{}
	for _, n := range snap.Nodes {
		for _, g := range n.GPUs {
			if g.Changing {
				inFlight[fmt.Sprintf("%s/%d", n.Node.Name, g.Info.Index)] = fmt.Sprintf("%s/gpu-%d: %s", n.Node.Name, g.Info.Index, g.Layout.String())
			}
		}
	}
	for _, s := range res.Served {
		if out[s.Pod] != "" {
			continue
		}
		for _, d := range s.Devices {
			idx, _, ok := migslices.DeviceGPUIndex(d)
			if !ok || inFlight[fmt.Sprintf("%s/%d", s.Node, idx)] == "" || exists(in, s.Node, idx, d) {
				continue
			}
			out[s.Pod] = inFlight[fmt.Sprintf("%s/%d", s.Node, idx)]
		}
	}
	return out
}

// exists reports whether MIG device name of GPU index is in the layout the
// node's agent reports now (by profile and placement, whatever GI profile
// ID the name carries).
func exists(in AutoInputs, node string, index int, name string) bool {
	nml := in.NodeMigLayouts[node]
	if nml == nil {
		return false
	}
	for _, st := range nml.Status.GPUs {
		if int(st.Index) != index {
			continue
		}
		actual, err := mig.ParseLayout(st.Layout)
		if err != nil {
			return false
		}
		return slices.ContainsFunc(actual, func(d mig.Device) bool {
			return migslices.IsMIGDeviceName(name, index, d.Profile, d.Start)
		})
	}
	return false
}

// roomShape is a kind of pending pod for nodes' room (planner.RequestOf:
// resources, priority, whether it may preempt) and how many pending pods
// are of it.
type roomShape struct {
	q     planner.RoomRequest
	count int
}

// pendingShapes are the kinds of the pending pods on nodes' room, the first
// maxRoomShapes in a fixed order, and the names of every resource the
// pending pods request (their DRA-backed extended resources included).
func pendingShapes(snap planner.Snapshot) ([]roomShape, map[corev1.ResourceName]bool) {
	byKey := map[string]*roomShape{}
	requested := map[corev1.ResourceName]bool{}
	for _, p := range snap.Pending {
		reqs := resourcehelper.PodRequests(p.Pod, resourcehelper.PodResourcesOptions{})
		for name := range reqs {
			requested[name] = true
		}
		policy := ""
		if p.Pod.Spec.PreemptionPolicy != nil {
			policy = string(*p.Pod.Spec.PreemptionPolicy)
		}
		// The extended resources its claim stands for are not asked of
		// the room (planner.RequestOf): pods that differ there differ.
		key := fmt.Sprintf("%s %d %s %v", resourcesText(reqs), ptr.Deref(p.Pod.Spec.Priority, 0), policy, p.ExtendedResources)
		if byKey[key] == nil {
			byKey[key] = &roomShape{q: planner.RequestOf(p)}
		}
		byKey[key].count++
	}
	var out []roomShape
	for _, k := range slices.Sorted(maps.Keys(byKey)) {
		if len(out) == maxRoomShapes {
			break
		}
		out = append(out, *byKey[k])
	}
	return out, requested
}

// roomBits says how many pending pods of each of shapes n's room takes now
// ("2,0" for two of the first and none of the second): what the node's
// pods use decides a plan only through it, so the pods bound there coming
// and going otherwise change no plan (nor restart the batching window).
func roomBits(n planner.Node, shapes []roomShape) string {
	if len(shapes) == 0 || n.Node == nil || len(n.Node.Status.Allocatable) == 0 {
		return ""
	}
	room := planner.NewRoom(n)
	parts := make([]string, len(shapes))
	for i, s := range shapes {
		parts[i] = strconv.Itoa(room.Takes(s.q, s.count))
	}
	return strings.Join(parts, ",")
}

// resourcesText is l as "cpu=2,memory=4Gi", by name.
func resourcesText(l corev1.ResourceList) string {
	var parts []string
	for _, name := range slices.Sorted(maps.Keys(l)) {
		q := l[name]
		parts = append(parts, string(name)+"="+q.String())
	}
	return strings.Join(parts, ",")
}
