package controller

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	resourcehelper "k8s.io/component-helpers/resource"
	"k8s.io/utils/ptr"

	"github.com/miglayout/miglayout/api/v1alpha1"
	"github.com/miglayout/miglayout/pkg/mig"
	"github.com/miglayout/miglayout/pkg/planner"
)

// AutoInputs are the cluster objects the Auto planner reads.
type AutoInputs struct {
	MigLayouts     []v1alpha1.MigLayout
	Nodes          []corev1.Node
	NodeMigLayouts map[string]*v1alpha1.NodeMigLayout
	Pods           []corev1.Pod
	Claims         map[types.NamespacedName]*resourceapi.ResourceClaim
	Classes        []*resourceapi.DeviceClass
	// Slices are the cluster's ResourceSlices; those of other drivers on
	// Auto nodes are passed to the planner (pods that also ask for, say, a
	// NIC are planned with the node's NICs).
	Slices []resourceapi.ResourceSlice
	// TaintRules are the cluster's DeviceTaintRules (none where the API
	// server does not serve them): see taintedByRules.
	TaintRules []resourceapi.DeviceTaintRule
	Driver     string
	// LostAgents are the nodes whose agent stopped renewing its heartbeat
	// Lease (AgentHealth.Lost): they are planner.Node.Frozen, since no
	// change written for them would be carried out; a change in flight
	// there no longer serves its pods, which are planned elsewhere, but
	// still counts toward the MigLayout's maxGPUs.
	LostAgents sets.Set[string]
	// SchedulerNames are the schedulers (spec.schedulerName) whose pending
	// pods are Auto demand: those whose unschedulable pods the planner, which
	// allocates as kube-scheduler's DRA plugin does, plans for. Empty:
	// kube-scheduler's default profile alone (default-scheduler). Pods of
	// another scheduler (one that may not handle DRA, or not so) are no
	// demand: a GPU changed for one would wait for a binding that may never
	// come.
	SchedulerNames sets.Set[string]
}

// ValidateSchedulerNames refuses a list of AutoInputs.SchedulerNames with a
// name the API server would refuse as a pod's spec.schedulerName (a DNS
// subdomain; "" included) or a name given twice, and an empty one.
func ValidateSchedulerNames(names []string) error {
	if len(names) == 0 {
		return errors.New("no scheduler named: name at least one, e.g. default-scheduler")
	}
	for i, n := range names {
		if errs := validation.IsDNS1123Subdomain(n); len(errs) > 0 {
			return fmt.Errorf("%q is no scheduler name (a pod's spec.schedulerName): %s", n, strings.Join(errs, "; "))
		}
		if slices.Contains(names[:i], n) {
			return fmt.Errorf("%q is given twice", n)
		}
	}
	return nil
}

// plansFor reports whether the pod's scheduler is one whose pods are Auto
// demand (AutoInputs.SchedulerNames).
func (in AutoInputs) plansFor(pod *corev1.Pod) bool {
	name := pod.Spec.SchedulerName
	if name == "" {
		name = corev1.DefaultSchedulerName // as the API server defaults it
	}
	if in.SchedulerNames.Len() == 0 {
		return name == corev1.DefaultSchedulerName
	}
	return in.SchedulerNames.Has(name)
}

// defaultMaxGPUs is the limit on GPUs changing at once across an Auto
// MigLayout's nodes when it sets no policy.maxGPUs (the CRD's default).
const defaultMaxGPUs = 8

// AutoSnapshot is the snapshot the Auto planner plans: BuildSnapshot of in,
// at now, with pods passed over for agingAfter taken by age (0: never), and
// only the pending pods that ask for a MIG device (planner.Demand; those
// waiting for other drivers' devices alone are left to them). The
// controller and kubectl miglayout plan both plan it, so that a dry run
// decides as the controller does, but for what the running controller
// remembers: the nodes kube-scheduler declined for a pod (declineTracker)
// and since when GPUs it has seen are idle.
func AutoSnapshot(ctx context.Context, in AutoInputs, catalog *mig.Catalog, now time.Time, agingAfter time.Duration) planner.Snapshot {
	snap := BuildSnapshot(in, catalog)
	snap.Now, snap.AgingAfter = now, agingAfter
	snap.Pending = planner.Demand(ctx, snap.Driver, snap.Classes, catalog.Models(), snap.Pending)
	extended := newExtendedResources(in.Classes, in.Claims)
	keepNominatedRoom(in.Pods, &snap, func(pod *corev1.Pod) bool { return asksForDevices(pod, extended, in.Claims) })
	return snap
}

// keepNominatedRoom adds to the room used on each Auto node
// (planner.Node.Requested) the unbound pods a preemption nominated to it
// that ask for devices but are not Auto demand (snap.Pending): a pod
// asking only for a NIC or another driver's device, or whose claims are all
// allocated. nodeRequests leaves every nominated pod asking for devices to
// the planner, which plans the room of Auto demand only; kube-scheduler
// keeps room for all of them.
func keepNominatedRoom(pods []corev1.Pod, snap *planner.Snapshot, asksForDevices func(*corev1.Pod) bool) {
	demand := sets.New[types.UID]()
	for _, p := range snap.Pending {
		demand.Insert(p.Pod.UID)
	}
	nodes := map[string]*planner.Node{}
	for i := range snap.Nodes {
		nodes[snap.Nodes[i].Node.Name] = &snap.Nodes[i]
	}
	for i := range pods {
		pod := &pods[i]
		n := nodes[pod.Status.NominatedNodeName]
		if n == nil || pod.Spec.NodeName != "" || pod.DeletionTimestamp != nil || demand.Has(pod.UID) || !asksForDevices(pod) ||
			pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
			continue
		}
		n.Requested = addPodRequests(n.Requested, pod)
	}
}

// asksForDevices reports whether pod asks for devices: ResourceClaims, or
// extended resources a DeviceClass backs.
func asksForDevices(pod *corev1.Pod, extended *extendedResources, claims map[types.NamespacedName]*resourceapi.ResourceClaim) bool {
	claim, _ := extendedResourceClaim(pod, extended, claims)
	return len(pod.Spec.ResourceClaims) > 0 || claim != nil
}

// addPodRequests is byPrio (sorted by priority) with what pod requests
// added at its priority, one more under "pods"; byPrio's lists are not
// changed.
func addPodRequests(byPrio []planner.PriorityRequests, pod *corev1.Pod) []planner.PriorityRequests {
	prio := ptr.Deref(pod.Spec.Priority, 0)
	i, found := slices.BinarySearchFunc(byPrio, prio, func(r planner.PriorityRequests, p int32) int { return cmp.Compare(r.Priority, p) })
	out := slices.Clone(byPrio)
	if !found {
		out = slices.Insert(out, i, planner.PriorityRequests{Priority: prio, Requests: corev1.ResourceList{}})
	}
	sum := out[i].Requests.DeepCopy()
	addRequestsOf(sum, pod)
	out[i].Requests = sum
	return out
}

// addRequestsOf adds to sum what pod requests of a node's allocatable
// resources, as kube-scheduler's NodeResourcesFit counts them
// (component-helpers' PodRequests; while an in-place resize is in progress,
// the larger of spec and status, for the containers' requests and for the
// pod-level ones, spec.resources: InPlacePodLevelResourcesVerticalScaling,
// beta and on from Kubernetes 1.36), and one more under "pods".
func addRequestsOf(sum corev1.ResourceList, pod *corev1.Pod) {
	opts := resourcehelper.PodResourcesOptions{UseStatusResources: true, InPlacePodLevelResourcesVerticalScalingEnabled: true}
	for name, q := range resourcehelper.PodRequests(pod, opts) {
		total := sum[name]
		total.Add(q)
		sum[name] = total
	}
	count := sum[corev1.ResourcePods]
	count.Add(*resource.NewQuantity(1, resource.DecimalSI))
	sum[corev1.ResourcePods] = count
}

// BuildSnapshot turns cluster objects into the planner's input: the nodes of
// Auto MigLayouts (Frozen where the MigLayout is paused, the agent is lost
// or another MigLayout selects the node too) with the GPUs their agents
// report, and
// the pods the scheduler found unschedulable with their unallocated claims.
//
// A GPU whose desired layout differs from its actual one, or that is not
// Ready, is Changing: its Layout is the desired one (its free devices are
// coming and can serve pods) and the planner does not change it again;
// except that a GPU Blocked because a device the change destroys is in use
// (allocated after the plan was made) has its actual Layout: that change
// is cancelled (BlockedChanges). A device is pinned when the agent reports
// it in use or a ResourceClaim's allocation names it, whichever is seen
// first; releasing (planner.GPU.Releasing) when the claims that hold it
// end soon (releasingDevices).
func BuildSnapshot(in AutoInputs, catalog *mig.Catalog) planner.Snapshot {
	snap := planner.Snapshot{Driver: in.Driver, Classes: in.Classes}
	labels := make(map[string]map[string]string, len(in.Nodes))
	byName := make(map[string]*corev1.Node, len(in.Nodes))
	for i := range in.Nodes {
		n := &in.Nodes[i]
		if n.DeletionTimestamp == nil {
			labels[n.Name] = n.Labels
			byName[n.Name] = n
		}
	}
	others := otherSlices(withRuleTaints(in.Slices, in.TaintRules, in.Driver), in.Driver)
	variants := modelVariants{}
	allocated, adminHeld, otherHeld := allocations(in.Claims, in.Driver)
	// Only GPU nodes a MigLayout selects (those with a NodeMigLayout)
	// can be Auto nodes: the other nodes' pods are not summed.
	extended := newExtendedResources(in.Classes, in.Claims)
	requested := nodeRequests(in.Pods, func(node string) bool { return in.NodeMigLayouts[node] != nil }, func(pod *corev1.Pod) bool {
		return asksForDevices(pod, extended, in.Claims)
	})
	releasing := releasingDevices(in.Claims, in.Pods, in.Driver)
	// autoNodes are the nodes whose NodeMigLayout an Auto MigLayout
	// controls: the pods nominated to one are its demand. A node being
	// handed over is not one yet: a pod nominated there (on the old
	// owner's layout) is no Auto demand until it is adopted.
	autoNodes := sets.New[string]()
	for i := range in.MigLayouts {
		ml := &in.MigLayouts[i]
		if !plansAuto(*ml) {
			continue
		}
		sel, err := SelectNodes(ml, in.MigLayouts, labels)
		if err != nil {
			continue
		}
		// A node a MigLayout whose selector does not parse holds is in
		// conflict, as the reconciler sees it: not handed over.
		sel = HeldByInvalidSelectors(ml, sel, in.MigLayouts, in.NodeMigLayouts)
		policy := planner.Policy{MaxGPUsPerNode: 1, ReclaimIdleAfter: defaultReclaimIdleAfter}
		maxGPUs := defaultMaxGPUs
		if p := ml.Spec.Policy; p != nil {
			if p.ReclaimIdleGPUsAfterSeconds != nil {
				policy.ReclaimIdleAfter = time.Duration(*p.ReclaimIdleGPUsAfterSeconds) * time.Second
			}
			for _, a := range p.AllowedProfiles {
				policy.AllowedProfiles = append(policy.AllowedProfiles, string(a))
			}
			// A zero count keeps no spare: such a node gives idle GPUs
			// back as one without spares does.
			for k, v := range p.Spares {
				if v <= 0 {
					continue
				}
				if policy.Spares == nil {
					policy.Spares = map[string]int{}
				}
				policy.Spares[k] = int(v)
			}
			if p.MaxGPUsPerNode > 0 {
				policy.MaxGPUsPerNode = int(p.MaxGPUsPerNode)
			}
			if p.MaxGPUs > 0 {
				maxGPUs = int(p.MaxGPUs)
			}
		}
		// maxGPUs limits the GPUs changing at once across this
		// MigLayout's nodes (node selection keeps each node in one).
		policy.Group = ml.Name
		if snap.GroupMaxGPUs == nil {
			snap.GroupMaxGPUs = map[string]int{}
		}
		snap.GroupMaxGPUs[ml.Name] = maxGPUs
		for _, name := range sel.Nodes {
			nml, node := in.NodeMigLayouts[name], byName[name]
			if nml == nil || node == nil {
				continue
			}
			// A node ml alone selects whose NodeMigLayout another
			// MigLayout still controls (or none does) is being handed
			// over to ml: its changes in flight, which ml's reconciler
			// keeps when it adopts it, count toward ml's limits from now
			// on, and nothing is planned there until then.
			handedOver := ""
			if !metav1.IsControlledBy(nml, ml) {
				if sel.Conflicted(name) {
					continue
				}
				handedOver = "MigLayout " + ml.Name + " has not adopted its NodeMigLayout yet"
				if ref := metav1.GetControllerOf(nml); ref != nil {
					handedOver += " from MigLayout " + ref.Name
				}
			}
			// Devices a DeviceTaintRule takes out of scheduling are
			// kept as they are, like allocated ones; a node whose every
			// device is taken out is left as it is.
			wholePool, taintedDevs := taintedByRules(in.TaintRules, in.Driver, name)
			// So are devices an Xid hit (the agent publishes them
			// tainted, and lists them in the status, which holds where
			// the API server drops taints), and nothing new is made on
			// their GPUs.
			xidDevs := xidTainted(others.own[name], name).Union(statusXidDevices(nml))
			taintedDevs = taintedDevs.Union(xidDevs)
			n := planner.Node{Node: node, Policy: policy, OtherSlices: others.forNode(node), Requested: requested[name]}
			// A node in conflict is left as it is: its change in flight
			// goes on and counts toward the limits, nothing else is
			// planned there.
			switch {
			case handedOver != "":
				n.FrozenReason = handedOver
			case ml.Spec.Paused:
				n.FrozenReason = "its MigLayout " + ml.Name + " is paused (spec.paused)"
			case in.LostAgents.Has(name):
				n.FrozenReason = "its agent is lost (it stopped renewing its heartbeat Lease)"
			case sel.Conflicted(name):
				n.FrozenReason = "another MigLayout selects it too"
			case wholePool:
				n.FrozenReason = "a DeviceTaintRule takes all its devices out of scheduling"
			}
			if n.FrozenReason != "" {
				n.Frozen, n.Policy.Spares = true, nil
				// Its agent carries out the changes under way but for a
				// lost agent's, or one every device of which a
				// DeviceTaintRule keeps from the scheduler.
				n.CarriesOn = !in.LostAgents.Has(name) && !wholePool
			}
			// A reclaim in flight is one also where the policy no longer
			// gives idle GPUs back (reclaimIdleGPUsAfterSeconds turned
			// off since): the planner does not make it again, and
			// ReclaimCancels cancels it while nothing is destroyed.
			reclaims := !n.Frozen
			held := allocated[name].Union(taintedDevs)
			n.GPUs = autoGPUs(nml, catalog, variants, held, adminHeld[name], reclaims)
			if n.Frozen {
				keepBlockedSlots(nml, n.GPUs)
				servedOnFrozen(nml, n.GPUs)
			}
			if slice, taken := unplannedDevices(others.own[name], in.Driver, name, n.GPUs, held); slice != nil {
				n.OtherSlices = append(n.OtherSlices, slice)
				otherHeld.Devices = append(otherHeld.Devices, taken...)
			}
			markTainted(n.GPUs, taintedDevs)
			markXidGPUs(n.GPUs, xidDevs, nml)
			markReleasing(n.GPUs, releasing[name].Difference(taintedDevs))
			if len(n.GPUs) > 0 {
				snap.Nodes = append(snap.Nodes, n)
				if handedOver == "" {
					autoNodes.Insert(name)
				}
			}
		}
	}
	slices.SortFunc(snap.Nodes, func(a, b planner.Node) int { return strings.Compare(a.Node.Name, b.Node.Name) })
	oneChangePerPod(in, &snap)
	snap.Pending = pendingPods(in.Pods, in.Claims, extended, autoNodes, in.plansFor)
	snap.OtherHeld = otherHeld
	return snap
}

// nodeRequests is, by node name and pod priority, what the pods bound to
// each node and not finished (Succeeded or Failed) request of its
// allocatable resources, as kube-scheduler's NodeResourcesFit counts them
// (component-helpers' PodRequests; while an in-place resize is in
// progress, the larger of spec and status), with their number under
// "pods" (planner.Node.Requested). A pod being deleted counts until it is
// gone, as it does for the scheduler. So does an unbound pod that a
// preemption nominated to the node (status.nominatedNodeName), for which
// kube-scheduler keeps room there while its victims leave, unless it asks
// for devices (demand: ResourceClaims, or extended resources a DeviceClass
// backs): such a pod is Auto demand, planned on that node with its room.
// (One asking only for a device plugin's extended resources counts.)
// (kube-scheduler keeps a nominated pod's room from pods of its priority or
// lower only; counted as bound, it is kept from a higher-priority pod that
// may not preempt too.) Only the nodes of which on is true are summed
// (PodRequests per pod is the cost, every plan).
func nodeRequests(pods []corev1.Pod, on func(node string) bool, demand func(*corev1.Pod) bool) map[string][]planner.PriorityRequests {
	sums := map[string]map[int32]corev1.ResourceList{}
	for i := range pods {
		pod := &pods[i]
		node := pod.Spec.NodeName
		if node == "" && pod.Status.NominatedNodeName != "" && pod.DeletionTimestamp == nil && !demand(pod) {
			node = pod.Status.NominatedNodeName
		}
		if node == "" || pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed || !on(node) {
			continue
		}
		byPrio := sums[node]
		if byPrio == nil {
			byPrio = map[int32]corev1.ResourceList{}
			sums[node] = byPrio
		}
		prio := ptr.Deref(pod.Spec.Priority, 0)
		sum := byPrio[prio]
		if sum == nil {
			sum = corev1.ResourceList{}
			byPrio[prio] = sum
		}
		addRequestsOf(sum, pod)
	}
	out := make(map[string][]planner.PriorityRequests, len(sums))
	for node, byPrio := range sums {
		for _, prio := range slices.Sorted(maps.Keys(byPrio)) {
			out[node] = append(out[node], planner.PriorityRequests{Priority: prio, Requests: byPrio[prio]})
		}
	}
	return out
}
