package controller

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/miglayout/miglayout/api/v1alpha1"
	"github.com/miglayout/miglayout/pkg/mig"
	"github.com/miglayout/miglayout/pkg/planner"
	migslices "github.com/miglayout/miglayout/pkg/slices"
)

// unneededCandidates are the changes in flight that UnneededChanges may
// cancel, one cancel each (back to the actual layout): on a node of the
// snapshot that is not Frozen, a GPU whose desired layout an Auto plan made
// for pods (GPUSpec.ServedPods) and whose agent has destroyed nothing of it
// yet (undestroyed). The planner runs while there is one, pending pods or
// not.
func unneededCandidates(in AutoInputs, snap planner.Snapshot) []planner.Change {
	return cancelsBy(in, snap, undestroyed)
}

// undestroyed is the change that cancels GPU idx's change in flight on nml
// while that change was planned for pods and the agent has not started its
// NVML work: it reports the GPU Draining (waiting out the settle period
// with the devices to destroy tainted) or still Ready on the layout before
// the change. Once it reports Repartitioning, Blocked, Failed or Pending (a
// pass that failed, perhaps after some NVML work) the change is carried
// out, cancelled as blocked (BlockedChanges) or retried. The agent reports
// Repartitioning before it reads the spec a last time (live) and calls
// NVML, and apply writes a cancel only on the NodeMigLayout as read, so
// either the agent sees the cancel or the cancel is not written.
func undestroyed(nml *v1alpha1.NodeMigLayout, idx int) (planner.Change, bool) {
	spec, st, ok := specAndStatus(nml, idx)
	if !ok {
		return planner.Change{}, false
	}
	switch st.Phase {
	case v1alpha1.PhaseDraining, v1alpha1.PhaseReady:
	default:
		// Pending may follow NVML work a failed pass left half done.
		return planner.Change{}, false
	}
	// A list at MaxItems may leave pods out: such a change is never
	// judged unneeded.
	if !spec.MIGEnabled || !st.MIGEnabled || len(spec.ServedPods) == 0 || len(spec.ServedPods) >= maxServedPods {
		return planner.Change{}, false
	}
	actual, err1 := mig.ParseLayout(st.Layout)
	desired, err2 := mig.ParseLayout(spec.Layout)
	if err1 != nil || err2 != nil || desired.Equal(actual) {
		return planner.Change{}, false
	}
	return planner.Change{Node: nml.Name, GPU: idx, From: desired, To: actual,
		Reason: truncate(fmt.Sprintf("cancels the change to %s before anything is destroyed: none of the pods it was for (%s) waits for its devices any more (deleted, scheduled elsewhere, or no longer asking for a MIG device Auto mode makes)",
			desired.String(), strings.Join(firstNames(spec.ServedPods, 5), ", ")), 1024)}, true
}

// inFlightReclaim is the change that cancels GPU idx's change in flight on
// nml while that change gives the GPU back as one device for no pod (no
// GPUSpec.ServedPods: an idle GPU given back whole, planner.Change.Reclaims)
// and the agent has destroyed nothing of it yet: it reports the GPU
// Draining or still Ready on the layout before the change (as undestroyed;
// autoGPUs also checks that the device is the model's whole GPU).
func inFlightReclaim(nml *v1alpha1.NodeMigLayout, idx int) (planner.Change, bool) {
	spec, st, ok := specAndStatus(nml, idx)
	if !ok || (st.Phase != v1alpha1.PhaseDraining && st.Phase != v1alpha1.PhaseReady) {
		return planner.Change{}, false
	}
	if !spec.MIGEnabled || !st.MIGEnabled || len(spec.ServedPods) > 0 {
		return planner.Change{}, false
	}
	actual, err1 := mig.ParseLayout(st.Layout)
	desired, err2 := mig.ParseLayout(spec.Layout)
	if err1 != nil || err2 != nil || len(desired) != 1 || desired.Equal(actual) {
		return planner.Change{}, false
	}
	return planner.Change{Node: nml.Name, GPU: idx, From: desired, To: actual}, true
}

// ReclaimCancels are the cancels of the idle GPUs being given back whole
// (planner.GPU.Reclaiming) that the plan res of snap neither gives back
// again nor changes otherwise: pods get their free devices as they are,
// pods' changes take the slots of GPUs changing at once, or the policy no
// longer gives the GPU back (reclaimOff). Carrying such a
// reclaim out would make the whole device only for it to be split again.
// A GPU the plan changes for pods instead gets that change written in the
// reclaim's place (apply), while nothing is destroyed yet.
func ReclaimCancels(in AutoInputs, snap planner.Snapshot, res planner.Result) []planner.Change {
	changed := map[string]bool{}
	for _, c := range res.Changes {
		changed[fmt.Sprintf("%s/%d", c.Node, c.GPU)] = true
	}
	usedBy := map[string][]string{}
	for _, s := range res.Served {
		for _, d := range s.Devices {
			if idx, isMIG, ok := migslices.DeviceGPUIndex(d); ok && isMIG {
				key := fmt.Sprintf("%s/%d", s.Node, idx)
				if !slices.Contains(usedBy[key], s.Pod) {
					usedBy[key] = append(usedBy[key], s.Pod)
				}
			}
		}
	}
	var out []planner.Change
	for _, n := range snap.Nodes {
		nml := in.NodeMigLayouts[n.Node.Name]
		for _, g := range n.GPUs {
			key := fmt.Sprintf("%s/%d", n.Node.Name, g.Info.Index)
			if !g.Reclaiming || changed[key] || nml == nil {
				continue
			}
			c, ok := inFlightReclaim(nml, g.Info.Index)
			if !ok {
				continue
			}
			why := "pods' changes take the slots of GPUs changing at once"
			if off := reclaimOff(n, g); off != "" {
				why = "the policy no longer gives it back (" + off + ")"
			}
			if pods := usedBy[key]; len(pods) > 0 {
				why = "pending pods get its free devices as they are: " + strings.Join(firstNames(pods, 5), ", ")
			}
			c.Reason = truncate(fmt.Sprintf("cancels giving the GPU back as %s before anything is destroyed: %s", c.From.String(), why), 1024)
			out = append(out, c)
		}
	}
	return out
}

// MakesReclaimAgain reports whether c, a change of the plan of snap, only
// gives back whole again a GPU already being given back
// (planner.GPU.Reclaiming): its spec holds c already, so nothing is written.
func MakesReclaimAgain(snap planner.Snapshot, c planner.Change) bool {
	if !c.Reclaims {
		return false
	}
	for _, n := range snap.Nodes {
		if n.Node.Name != c.Node {
			continue
		}
		for _, g := range n.GPUs {
			if g.Info.Index == c.GPU {
				return g.Reclaiming
			}
		}
	}
	return false
}

// UnneededChanges are the candidates (unneededCandidates) whose new devices
// no pod of the plan res waits for: the pods they were for were deleted or
// got devices elsewhere before anything was destroyed. Carrying such a
// change out would destroy free devices for nobody (and perhaps the very
// devices the next pod needs); cancelling it sets the GPU's desired layout
// back to the actual one. A change one of whose pods (as snap has them:
// servedBy) still waits outside the demand (waitsUnplanned: kube-scheduler's last try ended on an error
// of its own, or has not reported yet) is kept: the pod is back in the
// demand once the scheduler finds it unschedulable again, and a cancel
// would have its GPU drained a second time.
func UnneededChanges(in AutoInputs, snap planner.Snapshot, candidates []planner.Change, res planner.Result) []planner.Change {
	// A new device a claim holds already was made: the status lags.
	allocated, admin, _ := allocations(in.Claims, in.Driver)
	waited := map[string]bool{}
	heldOn := map[string]sets.Set[migslices.MIGDeviceKey]{} // by node, made once
	for _, c := range candidates {
		held, ok := heldOn[c.Node]
		if !ok {
			held = migKeys(allocated[c.Node].Union(admin[c.Node]))
			heldOn[c.Node] = held
		}
		for _, d := range c.From {
			if !c.To.Contains(d) && isAllocated(held, c.GPU, d) {
				waited[fmt.Sprintf("%s/%d", c.Node, c.GPU)] = true
			}
		}
	}
	for _, s := range res.Served {
		for _, d := range s.Devices {
			idx, isMIG, ok := migslices.DeviceGPUIndex(d)
			if ok && isMIG && !exists(in, s.Node, idx, d) {
				waited[fmt.Sprintf("%s/%d", s.Node, idx)] = true
			}
		}
	}
	unplanned := waitsUnplanned(in.Pods, in.Claims)
	var out []planner.Change
	for _, c := range candidates {
		if waited[fmt.Sprintf("%s/%d", c.Node, c.GPU)] {
			continue
		}
		if slices.ContainsFunc(servedBy(snap, c.Node, c.GPU), unplanned.Has) {
			continue
		}
		out = append(out, c)
	}
	return out
}

// urgentCancel says why a cancel may be due before the batching window
// closes, "" where none is: a change whose agent has not started its NVML
// work (it drains for the settle period, 5 s by default, while the window
// may last up to --auto-batch-max under a steady trickle of pods) is
// cancelled only by a plan, and carried out, for nobody, once the settle
// period ends. That is so of a change planned for pods none of which is
// pending any more, as the planner or as unplanned (UnneededChanges may
// cancel it), and of an idle GPU being given back whole while pods are
// pending (ReclaimCancels may cancel it for them). It returns such a
// change ("node/GPU: from -> to"), one not in done (those planned for
// lately), and why; "" where there is none.
func urgentCancel(in AutoInputs, snap planner.Snapshot, done sets.Set[string]) (change, why string) {
	key := func(c planner.Change) string { return fmt.Sprintf("%s/%d: %s -> %s", c.Node, c.GPU, c.To, c.From) }
	pending := sets.New[string]()
	for _, p := range snap.Pending {
		pending.Insert(p.Pod.Namespace + "/" + p.Pod.Name)
	}
	var unplanned sets.Set[string]
	for _, c := range unneededCandidates(in, snap) {
		if unplanned == nil {
			unplanned = waitsUnplanned(in.Pods, in.Claims)
		}
		if slices.ContainsFunc(servedBy(snap, c.Node, c.GPU), func(p string) bool { return pending.Has(p) || unplanned.Has(p) }) {
			continue
		}
		if !done.Has(key(c)) {
			return key(c), fmt.Sprintf("no pod the change in flight on node %s GPU %d was planned for is pending any more", c.Node, c.GPU)
		}
	}
	if len(snap.Pending) > 0 {
		for _, c := range cancelsBy(in, snap, inFlightReclaim) {
			if !done.Has(key(c)) {
				return key(c), fmt.Sprintf("pods are pending while node %s GPU %d is given back whole", c.Node, c.GPU)
			}
		}
	}
	return "", ""
}

// servedBy are the pods the change in flight on node's GPU idx serves in
// snap (planner.GPU.Serves: its spec's servedPods, less those another
// node's change keeps, oneChangePerPod).
func servedBy(snap planner.Snapshot, node string, idx int) []string {
	for _, n := range snap.Nodes {
		if n.Node.Name != node {
			continue
		}
		for _, g := range n.GPUs {
			if g.Info.Index == idx {
				return g.Serves
			}
		}
	}
	return nil
}

// waitsUnplanned are the pods ("namespace/name") that wait for devices,
// unbound and not being deleted, but are no demand the planner sees
// (pendingPods): kube-scheduler has not reported them unschedulable, its
// last try having failed on an error of its own (PodScheduled False,
// reason SchedulerError, such as a conflict writing a claim's allocation
// before binding; it retries them) or not reported yet (a pod made again
// under the same name). Pods with scheduling gates are not among them, nor
// those whose claims are all allocated (they wait for their binding, not
// for devices).
func waitsUnplanned(pods []corev1.Pod, claims map[types.NamespacedName]*resourceapi.ResourceClaim) sets.Set[string] {
	out := sets.New[string]()
	for i := range pods {
		pod := &pods[i]
		if pod.Spec.NodeName != "" || pod.DeletionTimestamp != nil || unschedulable(pod) || len(pod.Spec.SchedulingGates) > 0 ||
			pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
			continue
		}
		// A pod asking through extended resources alone has no claim
		// until the scheduler makes one: it waits.
		allocated, any := true, false
		for j := range pod.Spec.ResourceClaims {
			c, needed := podClaim(pod, &pod.Spec.ResourceClaims[j], claims)
			if !needed {
				continue
			}
			any = true
			if c == nil || c.Status.Allocation == nil {
				allocated = false
				break
			}
		}
		if !allocated || !any {
			out.Insert(pod.Namespace + "/" + pod.Name)
		}
	}
	return out
}

// AutoCancels are the changes in flight the plan res of snap cancels, as
// the AutoPlanner writes them: those the agent cannot apply
// (BlockedChanges), those no pod waits for any more (UnneededChanges) and
// the reclaims the plan does not make again (ReclaimCancels).
func AutoCancels(in AutoInputs, snap planner.Snapshot, res planner.Result) []planner.Change {
	out := append(BlockedChanges(in, snap), UnneededChanges(in, snap, unneededCandidates(in, snap), res)...)
	return append(out, ReclaimCancels(in, snap, res)...)
}

// firstNames is the first n of names (pods, nodes), with how many more
// there are.
func firstNames(names []string, n int) []string {
	if len(names) <= n {
		return names
	}
	return append(slices.Clone(names[:n]), fmt.Sprintf("and %d more", len(names)-n))
}

// stillCancels reports whether cancel x, made on before (the NodeMigLayout
// the plan read), still holds on nml as read for the write, by the same
// rule: the GPU is still blocked on the layout x keeps (BlockedChanges), or
// its change, still the one x cancels, has destroyed nothing yet
// (UnneededChanges, ReclaimCancels). A GPU blocked when the plan read it
// and draining again now is not cancelled as a reclaim: the plan did not
// weigh giving it back.
func stillCancels(before, nml *v1alpha1.NodeMigLayout, x planner.Change) bool {
	same := func(c planner.Change) bool { return c.From.Equal(x.From) && c.To.Equal(x.To) }
	for _, rule := range []func(*v1alpha1.NodeMigLayout, int) (planner.Change, bool){cancelOf, undestroyed, inFlightReclaim} {
		if c, ok := rule(before, x.GPU); ok && same(c) {
			now, ok := rule(nml, x.GPU)
			return ok && same(now)
		}
	}
	return false
}

// oneChangePerPod keeps each pod named by the changes in flight of one node
// only (planner.GPU.Serves): should changes on two nodes name it (one
// planned while the other's node was Frozen), the node of the one the
// agent carries out already (not undestroyed) keeps it, else the first;
// the other node's devices are then no longer waited for, and its changes
// are cancelled while they can be (UnneededChanges). The changes of several
// GPUs of one node that name a pod are one plan for a pod of several
// devices: all of them keep it. The changes of a Frozen node that does not
// carry on (planner.Node.CarriesOn: its agent lost, or every device taken
// out of scheduling by a DeviceTaintRule) are not counted: they
// serve no pod (the planner does not wait for such a node's devices), so
// they must not take a pod from a live node's change.
func oneChangePerPod(in AutoInputs, snap *planner.Snapshot) {
	type at struct{ node, gpu int }
	var named map[string][]at
	for ni, n := range snap.Nodes {
		if n.Frozen && !n.CarriesOn {
			continue
		}
		for gi, g := range n.GPUs {
			for _, pod := range g.Serves {
				if named == nil {
					named = map[string][]at{}
				}
				named[pod] = append(named[pod], at{ni, gi})
			}
		}
	}
	for pod, ats := range named {
		if len(ats) < 2 {
			continue
		}
		keep := 0
		for i, a := range ats {
			n := snap.Nodes[a.node]
			if nml := in.NodeMigLayouts[n.Node.Name]; nml != nil {
				if _, cancellable := undestroyed(nml, n.GPUs[a.gpu].Info.Index); !cancellable {
					keep = i
					break
				}
			}
		}
		for _, a := range ats {
			if a.node == ats[keep].node {
				continue
			}
			g := &snap.Nodes[a.node].GPUs[a.gpu]
			g.Serves = slices.DeleteFunc(slices.Clone(g.Serves), func(p string) bool { return p == pod })
		}
	}
}

// BlockedChanges cancels the changes an earlier plan made that the agent
// cannot apply because a device they destroy was allocated since (the
// scheduler took it before the drain's taint was seen), or that the agent
// refused as invalid for the GPU (blockedByUse): for each GPU of
// the snapshot's Auto nodes (MIG on, a known model) that is so blocked
// while its desired layout, MIG on, differs from its actual
// one, a change back to the actual layout. The GPU is then no longer held
// up until the claim ends (which may take days), nor are the node's other
// GPUs under the per-node limit; the pods the cancelled change was for are
// still pending and are planned again, around the device in use, once the
// agent reports the GPU Ready. apply writes a cancel only while the
// NodeMigLayout still asks for the cancelled layout and still reports the
// GPU blocked on the layout the cancel keeps.
func BlockedChanges(in AutoInputs, snap planner.Snapshot) []planner.Change {
	return cancelsBy(in, snap, cancelOf)
}

// cancelsBy returns the cancel find finds for each GPU of the snapshot's
// nodes on their NodeMigLayouts. Nothing is written for a Frozen node: an
// agent cut off from the API server may have carried the change out.
func cancelsBy(in AutoInputs, snap planner.Snapshot, find func(*v1alpha1.NodeMigLayout, int) (planner.Change, bool)) []planner.Change {
	var out []planner.Change
	for _, n := range snap.Nodes {
		nml := in.NodeMigLayouts[n.Node.Name]
		if nml == nil || n.Frozen {
			continue
		}
		for _, g := range n.GPUs {
			if c, ok := find(nml, g.Info.Index); ok {
				out = append(out, c)
			}
		}
	}
	return out
}

// specAndStatus are GPU idx's spec and status on nml; ok is false unless
// both are there.
func specAndStatus(nml *v1alpha1.NodeMigLayout, idx int) (spec v1alpha1.GPUSpec, st v1alpha1.GPUStatus, ok bool) {
	i := slices.IndexFunc(nml.Status.GPUs, func(st v1alpha1.GPUStatus) bool { return int(st.Index) == idx })
	j := slices.IndexFunc(nml.Spec.GPUs, func(sp v1alpha1.GPUSpec) bool { return int(sp.Index) == idx })
	if i < 0 || j < 0 {
		return spec, st, false
	}
	return nml.Spec.GPUs[j], nml.Status.GPUs[i], true
}

// cancelOf is the change that cancels GPU idx's blocked change on nml, if
// it has one (see BlockedChanges).
func cancelOf(nml *v1alpha1.NodeMigLayout, idx int) (planner.Change, bool) {
	spec, st, ok := specAndStatus(nml, idx)
	if !ok || !blockedByUse(st) || !spec.MIGEnabled {
		return planner.Change{}, false
	}
	if st.Reason == v1alpha1.ReasonSpecForAnotherGPU && !st.MIGEnabled {
		// Auto mode never turns MIG on: the entry is set MIG off, as the
		// GPU there holds it, by the MigLayout's reconciler
		// (asItIsForRenumbered).
		return planner.Change{}, false
	}
	actual, err1 := mig.ParseLayout(st.Layout)
	desired, err2 := mig.ParseLayout(spec.Layout)
	if err1 != nil || err2 != nil || desired.Equal(actual) {
		return planner.Change{}, false
	}
	why := "blocked by a device in use"
	if st.Reason == v1alpha1.ReasonSpecForAnotherGPU {
		why = "planned for another GPU, which NVML numbered at this index before it numbered the GPUs anew"
	}
	if st.Phase == v1alpha1.PhaseFailed {
		why = "refused by the agent, " + st.Reason
	}
	return planner.Change{Node: nml.Name, GPU: idx, From: desired, To: actual,
		Reason: truncate(fmt.Sprintf("cancels the change to %s, %s (%s); its pods are planned again", desired.String(), why, st.Message), 1024)}, true
}

// reclaimOff says why node n's policy no longer gives GPU g back whole
// ("" where it still may): reclaiming turned off, or the whole profile left
// out of allowedProfiles or named by a DeviceTaintRule.
func reclaimOff(n planner.Node, g planner.GPU) string {
	if n.Policy.ReclaimIdleAfter <= 0 {
		return "reclaimIdleGPUsAfterSeconds is 0"
	}
	if g.Info.Model == nil {
		return ""
	}
	whole, ok := g.Info.Model.Whole()
	switch {
	case !ok:
		return ""
	case len(n.Policy.AllowedProfiles) > 0 && !slices.Contains(n.Policy.AllowedProfiles, whole.Profile):
		return "allowedProfiles leave out " + whole.Profile
	case g.Tainted.Contains(whole):
		return "a DeviceTaintRule names " + whole.String()
	}
	return ""
}
