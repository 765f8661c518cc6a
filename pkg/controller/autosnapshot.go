package controller

import (
	"cmp"
	"context"
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
	resourcehelper "k8s.io/component-helpers/resource"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/dynamic-resource-allocation/deviceclass/extendedresourcecache"
	"k8s.io/dynamic-resource-allocation/resourceclaim"
	"k8s.io/dynamic-resource-allocation/structured"
	"k8s.io/utils/ptr"

	"github.com/miglayout/miglayout/api/v1alpha1"
	"github.com/miglayout/miglayout/pkg/mig"
	"github.com/miglayout/miglayout/pkg/mig/gpu"
	"github.com/miglayout/miglayout/pkg/planner"
	migslices "github.com/miglayout/miglayout/pkg/slices"
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
// and since when GPUs it has seen are idle. Errors come from
// planner.Demand (a DeviceClass it cannot read).
func AutoSnapshot(ctx context.Context, in AutoInputs, catalog *mig.Catalog, now time.Time, agingAfter time.Duration) (planner.Snapshot, error) {
	snap := BuildSnapshot(in, catalog)
	snap.Now, snap.AgingAfter = now, agingAfter
	var err error
	if snap.Pending, err = planner.Demand(ctx, snap.Driver, snap.Classes, catalog.Models(), snap.Pending); err != nil {
		return snap, fmt.Errorf("selecting the pods that ask for MIG devices: %w", err)
	}
	extended := extendedResourceClasses(in.Classes)
	keepNominatedRoom(in.Pods, &snap, func(pod *corev1.Pod) bool { return asksForDevices(pod, extended, in.Claims) })
	return snap, nil
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
func asksForDevices(pod *corev1.Pod, extended *extendedresourcecache.ExtendedResourceCache, claims map[types.NamespacedName]*resourceapi.ResourceClaim) bool {
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
// Auto MigLayouts (Frozen where the agent is lost or another MigLayout
// selects the node too) with the GPUs their agents report, and
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
	extended := extendedResourceClasses(in.Classes)
	requested := nodeRequests(in.Pods, func(node string) bool { return in.NodeMigLayouts[node] != nil }, func(pod *corev1.Pod) bool {
		return asksForDevices(pod, extended, in.Claims)
	})
	releasing := releasingDevices(in.Claims, in.Pods, in.Driver)
	for i := range in.MigLayouts {
		ml := &in.MigLayouts[i]
		if !plansAuto(*ml) {
			continue
		}
		sel, err := SelectNodes(ml, in.MigLayouts, labels)
		if err != nil {
			continue
		}
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
			if nml == nil || node == nil || !metav1.IsControlledBy(nml, ml) {
				continue
			}
			// Devices a DeviceTaintRule takes out of scheduling are
			// kept as they are, like allocated ones; a node whose every
			// device is taken out is left as it is.
			wholePool, taintedDevs := taintedByRules(in.TaintRules, in.Driver, name)
			n := planner.Node{Node: node, Policy: policy, OtherSlices: others.forNode(node), Requested: requested[name]}
			// A node in conflict is left as it is: its change in flight
			// goes on and counts toward the limits, nothing else is
			// planned there.
			switch {
			case in.LostAgents.Has(name):
				n.FrozenReason = "its agent is lost (it stopped renewing its heartbeat Lease)"
			case sel.Conflicted(name):
				n.FrozenReason = "another MigLayout selects it too"
			case wholePool:
				n.FrozenReason = "a DeviceTaintRule takes all its devices out of scheduling"
			}
			if n.FrozenReason != "" {
				n.Frozen, n.Policy.Spares = true, nil
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
			}
			if slice, taken := unplannedDevices(others.own[name], in.Driver, name, n.GPUs, held); slice != nil {
				n.OtherSlices = append(n.OtherSlices, slice)
				otherHeld.Devices = append(otherHeld.Devices, taken...)
			}
			markTainted(n.GPUs, taintedDevs)
			markReleasing(n.GPUs, releasing[name].Difference(taintedDevs))
			if len(n.GPUs) > 0 {
				snap.Nodes = append(snap.Nodes, n)
			}
		}
	}
	slices.SortFunc(snap.Nodes, func(a, b planner.Node) int { return strings.Compare(a.Node.Name, b.Node.Name) })
	oneChangePerPod(in, &snap)
	autoNodes := sets.New[string]()
	for _, n := range snap.Nodes {
		autoNodes.Insert(n.Node.Name)
	}
	snap.Pending = pendingPods(in.Pods, in.Claims, extended, autoNodes)
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

// otherDriverSlices are the ResourceSlices of drivers other than
// miglayout's: those of one node, by node name, and those shared by several
// nodes (allNodes, a nodeSelector, or per-device node selection); pools
// has every slice by pool.
type otherDriverSlices struct {
	local  map[string][]*resourceapi.ResourceSlice
	shared []*resourceapi.ResourceSlice
	pools  map[poolID][]*resourceapi.ResourceSlice
	// own are miglayout's slices, by node name.
	own map[string][]*resourceapi.ResourceSlice
}

// poolID names a pool of a driver.
type poolID struct{ driver, pool string }

func poolOf(s *resourceapi.ResourceSlice) poolID {
	return poolID{driver: s.Spec.Driver, pool: s.Spec.Pool.Name}
}

// otherSlices sorts the ResourceSlices of drivers other than driver.
func otherSlices(all []resourceapi.ResourceSlice, driver string) otherDriverSlices {
	out := otherDriverSlices{local: map[string][]*resourceapi.ResourceSlice{}, pools: map[poolID][]*resourceapi.ResourceSlice{},
		own: map[string][]*resourceapi.ResourceSlice{}}
	for i := range all {
		s := &all[i]
		switch {
		case s.Spec.Driver == driver:
			if n := ptr.Deref(s.Spec.NodeName, ""); n != "" {
				out.own[n] = append(out.own[n], s)
			}
			continue
		case s.Spec.NodeName != nil && *s.Spec.NodeName != "":
			out.local[*s.Spec.NodeName] = append(out.local[*s.Spec.NodeName], s)
		default:
			out.shared = append(out.shared, s)
		}
		out.pools[poolOf(s)] = append(out.pools[poolOf(s)], s)
	}
	return out
}

// forNode returns the slices the node can use: its own, those for all
// nodes, those whose node selector matches it, and those that select nodes
// per device (the allocator checks each device); with each of them, the
// other slices of its pool. kube-scheduler hands the allocator every slice,
// which counts a pool's slices (ResourceSliceCount) across the nodes they
// select: a pool split by node selectors (a slice per rack) is complete,
// and the allocator itself keeps to the slices the node reaches.
func (o otherDriverSlices) forNode(node *corev1.Node) []*resourceapi.ResourceSlice {
	reached := slices.Clone(o.local[node.Name])
	for _, s := range o.shared {
		if sel := s.Spec.NodeSelector; sel != nil {
			if ok, err := nodeaffinity.NewLazyErrorNodeSelector(sel).Match(node); err != nil || !ok {
				continue
			}
		}
		reached = append(reached, s)
	}
	// A pool the node reaches only part of (its slices split by node
	// selectors) is given whole; the others as reached.
	count := map[poolID]int64{}
	for _, s := range reached {
		count[poolOf(s)]++
	}
	var out []*resourceapi.ResourceSlice
	seen := map[poolID]bool{}
	for _, s := range reached {
		id := poolOf(s)
		switch {
		case count[id] >= s.Spec.Pool.ResourceSliceCount:
			out = append(out, s)
		case !seen[id]:
			seen[id] = true
			out = append(out, o.pools[id]...)
		}
	}
	return out
}

// keepBlockedSlots counts the blocked changes of a Frozen node's GPUs
// toward the limits on GPUs changing at once again: autoGPUs gives them no
// slot, as the plan cancels them (BlockedChanges), but nothing is written
// for a Frozen node, and such a change goes on once its device is free.
func keepBlockedSlots(nml *v1alpha1.NodeMigLayout, gpus []planner.GPU) {
	for i := range gpus {
		if _, st, ok := specAndStatus(nml, gpus[i].Info.Index); ok && blockedByUse(st) && gpus[i].Changing {
			gpus[i].Retrying = false
		}
	}
}

// unplannedPool names the pool under which the planner sees miglayout's
// devices of a node that it does not plan (unplannedDevices); a node name
// holds no "/", so it is no real pool's name.
func unplannedPool(node string) string { return node + "/unplanned" }

// unplannedDevices are miglayout's devices of the node that the Auto plan
// does not change, as its agent publishes them (own: the node's slices):
// those of GPUs not among gpus (MIG mode off, published whole; a model the
// catalog lacks; a MIG mode change pending). kube-scheduler may allocate
// them with the devices the plan makes (a whole GPU and a MIG device for
// one pod, a request for all matching devices), so the planner sees them,
// in a slice of the node's unplannedPool, with held those of them that
// claims hold or a DeviceTaintRule takes out of scheduling, by that pool.
// The slice is nil where there are none.
func unplannedDevices(own []*resourceapi.ResourceSlice, driver, node string, gpus []planner.GPU, held sets.Set[string]) (*resourceapi.ResourceSlice, []structured.DeviceID) {
	planned := sets.New[int]()
	for _, g := range gpus {
		planned.Insert(g.Info.Index)
	}
	pool := unplannedPool(node)
	// The pool's newest generation only, as the allocator reads a pool
	// (while the agent republishes, older slices may still be listed).
	var generation int64
	for _, s := range own {
		if s.Spec.Pool.Name == node {
			generation = max(generation, s.Spec.Pool.Generation)
		}
	}
	var devices []resourceapi.Device
	var taken []structured.DeviceID
	for _, s := range own {
		if s.Spec.Pool.Name != node || s.Spec.Pool.Generation != generation {
			continue
		}
		for _, d := range s.Spec.Devices {
			if idx, _, ok := migslices.DeviceGPUIndex(d.Name); !ok || planned.Has(idx) {
				continue
			}
			devices = append(devices, *d.DeepCopy())
			if held.Has(d.Name) {
				taken = append(taken, structured.MakeDeviceID(driver, pool, d.Name))
			}
		}
	}
	if len(devices) == 0 {
		return nil, nil
	}
	return &resourceapi.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: pool},
		Spec: resourceapi.ResourceSliceSpec{Driver: driver, NodeName: ptr.To(node),
			Pool: resourceapi.ResourcePool{Name: pool, Generation: 1, ResourceSliceCount: 1}, Devices: devices},
	}, taken
}

// allocations are the devices claims hold: driver's by pool (node name)
// and device name, and what they hold of other drivers' devices (sets for
// the allocator: the order does not matter). A device given with admin
// access is not in use for kube-scheduler, which may give it to any claim:
// driver's are in admin instead (by pool and name), other drivers' are
// left out.
func allocations(claims map[types.NamespacedName]*resourceapi.ResourceClaim, driver string) (mine, admin map[string]sets.Set[string], others planner.OtherHolds) {
	mine, admin = map[string]sets.Set[string]{}, map[string]sets.Set[string]{}
	for _, c := range claims {
		a := c.Status.Allocation
		if a == nil {
			continue
		}
		for _, r := range a.Devices.Results {
			if ptr.Deref(r.AdminAccess, false) {
				if r.Driver == driver {
					if admin[r.Pool] == nil {
						admin[r.Pool] = sets.New[string]()
					}
					admin[r.Pool].Insert(r.Device)
				}
				continue
			}
			if r.Driver != driver {
				others.Add(r)
				continue
			}
			if mine[r.Pool] == nil {
				mine[r.Pool] = sets.New[string]()
			}
			mine[r.Pool].Insert(r.Device)
		}
	}
	return mine, admin, others
}

// releasingDevices are, by pool (node name), the names of driver's devices
// that claims hold (not with admin access only) and that every claim
// holding them lets go of soon: the claim is being deleted, or each pod it
// is reserved for is terminating, has ended (Succeeded, Failed) or is gone.
// A claim reserved for no pod (allocated an instant before the scheduler
// reserves it) or for a consumer other than a pod is not ending.
func releasingDevices(claims map[types.NamespacedName]*resourceapi.ResourceClaim, pods []corev1.Pod, driver string) map[string]sets.Set[string] {
	ending := make(map[types.UID]bool, len(pods))
	for i := range pods {
		p := &pods[i]
		ending[p.UID] = p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
	}
	claimEnds := func(c *resourceapi.ResourceClaim) bool {
		if c.DeletionTimestamp != nil {
			return true
		}
		if len(c.Status.ReservedFor) == 0 {
			return false
		}
		for _, r := range c.Status.ReservedFor {
			if r.APIGroup != "" || r.Resource != "pods" {
				return false
			}
			if e, known := ending[r.UID]; known && !e {
				return false
			}
		}
		return true
	}
	out, held := map[string]sets.Set[string]{}, map[string]sets.Set[string]{}
	for _, c := range claims {
		a := c.Status.Allocation
		if a == nil {
			continue
		}
		ends := claimEnds(c)
		for _, r := range a.Devices.Results {
			if r.Driver != driver || ptr.Deref(r.AdminAccess, false) {
				continue
			}
			into := out
			if !ends {
				into = held
			}
			if into[r.Pool] == nil {
				into[r.Pool] = sets.New[string]()
			}
			into[r.Pool].Insert(r.Device)
		}
	}
	for pool, names := range out {
		out[pool] = names.Difference(held[pool])
	}
	return out
}

// markReleasing sets, on each GPU, the pinned devices whose claims all end
// soon (names, this node's; planner.GPU.Releasing).
func markReleasing(gpus []planner.GPU, names sets.Set[string]) {
	if names.Len() == 0 {
		return
	}
	held := migKeys(names)
	for i := range gpus {
		g := &gpus[i]
		g.Releasing = nil
		for _, d := range g.Pinned {
			if isAllocated(held, g.Info.Index, d) {
				g.Releasing = append(g.Releasing, d)
			}
		}
	}
}

// modelVariants are the catalog models with the profile values agents
// report from NVML (GPUStatus.NVMLProfiles), one per model and values.
type modelVariants map[string]*mig.Model

// of returns model as NVML describes it on a GPU that reports ps. Values of
// a profile the model lacks are skipped; a report the model cannot take at
// all (memory beyond the GPU's) leaves the catalog's values: the GPU is
// planned on either way.
func (v modelVariants) of(model *mig.Model, ps []v1alpha1.NVMLProfile) *mig.Model {
	if len(ps) == 0 {
		return model
	}
	values := make([]mig.NVMLProfileValues, len(ps))
	placements := map[string][]mig.Placement{}
	var refused []string
	for i, p := range ps {
		values[i] = mig.NVMLProfileValues{Profile: p.Profile, MemoryMiB: p.MemoryMiB, Multiprocessors: int(p.Multiprocessors),
			CopyEngines: int(p.CopyEngines), Decoders: int(p.Decoders), Encoders: int(p.Encoders), JPEG: int(p.JPEGEngines), OFA: int(p.OFAEngines)}
		if p.NotOffered {
			placements[p.Profile] = []mig.Placement{}
		}
		if prof, err := model.Profile(p.Profile); err == nil && len(p.PlacementStarts) > 0 {
			for _, start := range p.PlacementStarts {
				placements[p.Profile] = append(placements[p.Profile], mig.Placement{Start: int(start), Size: prof.MemorySlices})
			}
		}
		if p.GIProfileID != nil {
			refused = append(refused, p.Profile)
		}
	}
	key := fmt.Sprintf("%s %+v %v %v", model.Name, values, placements, refused)
	if m, ok := v[key]; ok {
		return m
	}
	m, err := model.WithNVMLValues(values)
	if err != nil {
		m = model
	}
	// Only NVML's placements are planned, and no profile NVML gives
	// another GI profile ID (the agent would refuse it).
	if withPlacements, err := m.WithNVMLPlacements(placements, refused); err == nil {
		m = withPlacements
	}
	v[key] = m
	return m
}

// applyAttributes sets on info what the agent reported of the GPU beyond
// its model (NodeMigLayout status), the values its devices are published
// with; a value not reported keeps PlannedGPU's stand-in.
func applyAttributes(info *gpu.GPU, a *v1alpha1.GPUAttributes) {
	if a == nil {
		return
	}
	set := func(into *string, v string) {
		if v != "" {
			*into = v
		}
	}
	set(&info.Brand, a.Brand)
	set(&info.Architecture, a.Architecture)
	set(&info.CUDAComputeCapability, a.CUDAComputeCapability)
	set(&info.DriverVersion, a.DriverVersion)
	set(&info.CUDADriverVersion, a.CUDADriverVersion)
	set(&info.PCIBusID, a.PCIBusID)
	set(&info.PCIeRoot, a.PCIeRoot)
	if a.NUMANode != nil {
		info.NUMANode = ptr.To(int(*a.NUMANode))
	}
	if a.Minor != nil {
		info.Minor = int(*a.Minor)
	}
}

// blockedByUse reports whether the agent cannot apply the GPU's desired
// layout because a device it destroys is in use (or may be: an allocation
// it cannot resolve, which also has it report every device of the GPU in
// use), or ever (the layout is invalid for the GPU, or NVML no longer
// counts it): the change is
// cancelled (BlockedChanges). A GPU
// the agent reports unknown is never an Auto GPU (autoGPUs).
func blockedByUse(st v1alpha1.GPUStatus) bool {
	switch {
	case st.Phase == v1alpha1.PhaseBlocked:
		return st.Reason == v1alpha1.ReasonDeviceInUse || st.Reason == v1alpha1.ReasonUnknownAllocation
	case st.Phase == v1alpha1.PhaseFailed:
		return st.Reason == v1alpha1.ReasonInvalidLayout || st.Reason == v1alpha1.ReasonGPUMissing
	}
	return false
}

// notComing reports whether the GPU's desired devices cannot be counted on:
// its change is cancelled (blockedByUse) or failed (an NVML error, drain
// taints the API server drops), which the agent retries with backoff. The
// planner sees the GPU's actual layout, still in flight: its free devices
// serve pods, and no other change is planned on it while the agent retries.
func notComing(st v1alpha1.GPUStatus) bool {
	return blockedByUse(st) || st.Phase == v1alpha1.PhaseFailed
}

// autoPlannable reports whether Auto mode may plan on a GPU: MIG mode on
// and no MIG mode change pending (Auto mode never changes MIG mode). A GPU
// whose MIG mode change waits for a reset is left out, and so counts toward
// no limit on GPUs changing at once: the reset may never come.
func autoPlannable(st v1alpha1.GPUStatus) bool {
	return st.MIGEnabled && st.MIGPending == st.MIGEnabled
}

// autoGPUs are the GPUs of a node the planner may use: MIG on, known model.
// allocated are the names of the node's devices that claims hold (or that
// must stay as they are for another reason), adminHeld those that claims
// hold with admin access only: they stay, but a pending pod may get them
// (planner.GPU.Shared), even where the agent reports them in use (prepared
// for those claims, running their processes). Each GPU's hypothetical
// devices carry the attributes its agent reported. Where reclaims is true
// (the node is not Frozen), a GPU being
// given back whole that has lost nothing yet is planned on its actual
// layout (planner.GPU.Reclaiming, inFlightReclaim).
func autoGPUs(nml *v1alpha1.NodeMigLayout, catalog *mig.Catalog, variants modelVariants, allocated, adminHeld sets.Set[string], reclaims bool) []planner.GPU {
	allocatedKeys, adminKeys := migKeys(allocated), migKeys(adminHeld)
	specs := map[int32]v1alpha1.GPUSpec{}
	for _, s := range nml.Spec.GPUs {
		specs[s.Index] = s
	}
	var out []planner.GPU
	for _, st := range nml.Status.GPUs {
		if !autoPlannable(st) {
			continue
		}
		name := st.Model
		if name == "" {
			name = st.Product
		}
		model, err := catalog.Model(name)
		if err != nil {
			continue
		}
		actual, err1 := mig.ParseLayout(st.Layout)
		inUse, err2 := mig.ParseLayout(st.InUse)
		if err1 != nil || err2 != nil {
			continue
		}
		// Planned devices look as NVML will make them.
		model = variants.of(model, st.NVMLProfiles)
		info := migslices.PlannedGPU(model, int(st.Index))
		info.UUID, info.ProductName = st.UUID, st.Product
		applyAttributes(&info, st.Attributes)
		for _, d := range actual {
			if isAllocated(allocatedKeys, int(st.Index), d) && !inUse.Contains(d) {
				inUse = append(inUse, d)
			}
		}
		g := planner.GPU{Info: info, Layout: actual}
		// Since when the agent has seen it idle; the AutoPlanner's
		// idleTracker takes the earlier of this and its own count.
		if st.IdleSince != nil {
			g.IdleSince = st.IdleSince.Time
		}
		g.Pinned, g.Shared = splitShared(inUse, actual, int(st.Index), allocatedKeys, adminKeys)
		if spec, ok := specs[st.Index]; ok && !spec.MIGEnabled {
			// A change turning MIG off (written in Static mode) is in
			// flight: Auto mode never changes MIG mode, no device of the
			// GPU is coming, and the GPU counts toward the limits.
			g.Layout, g.Pinned, g.Shared, g.Changing = mig.Layout{}, nil, nil, true
			// One NVML failed, which the agent retries, holds no slot
			// (as for a change of layout below).
			g.Retrying = st.Phase == v1alpha1.PhaseFailed && st.Reason == v1alpha1.ReasonNVMLError
		} else if ok {
			desired, err := mig.ParseLayout(spec.Layout)
			_, reclaim := inFlightReclaim(nml, int(st.Index))
			whole, ok := model.Whole()
			reclaim = reclaim && reclaims && ok && desired.Equal(mig.Layout{whole})
			if err == nil && spec.MIGEnabled && (!desired.Equal(actual) || st.Phase != v1alpha1.PhaseReady) {
				g.Layout, g.Changing = desired, true
				if reclaim {
					// Its free devices may still serve a pod: the
					// plan gives it back whole again, or the
					// reclaim is cancelled (ReclaimCancels).
					g.Layout, g.Changing, g.Reclaiming = actual, false, true
				} else if notComing(st) {
					g.Layout = actual
					// A change NVML failed, which the agent
					// retries, holds no slot of the limits on GPUs
					// changing at once (a GPU failing for good would
					// hold it for ever), nor does a blocked one, which
					// this plan cancels (BlockedChanges; apply writes
					// no change before every cancel is written; on a
					// Frozen node, where no cancel is written, it
					// keeps its slot: keepBlockedSlots).
					// Dropped drain taints would fail every other
					// GPU's change alike: that one keeps its slot.
					g.Retrying = blockedByUse(st) || st.Phase == v1alpha1.PhaseFailed && st.Reason == v1alpha1.ReasonNVMLError
				} else {
					// A device of the new layout a claim holds
					// already (allocated once the agent published
					// it, before its status says so) is no free
					// device to promise.
					for _, d := range desired {
						if isAllocated(allocatedKeys, int(st.Index), d) && !inUse.Contains(d) {
							inUse = append(inUse, d)
						}
					}
					g.Pinned, g.Shared = splitShared(inUse, desired, int(st.Index), allocatedKeys, adminKeys)
					// The pods the change is for keep its devices.
					g.Serves = spec.ServedPods
				}
			}
		}
		out = append(out, g)
	}
	return out
}

// splitShared divides inUse (devices of GPU index that must stay) into
// those used up and those of layout that claims hold with admin access
// only (adminHeld and not allocated: the keys, migKeys, of the names
// claims hold), which a pending pod may still get.
// Both come out canonical.
func splitShared(inUse, layout mig.Layout, index int, allocated, adminHeld sets.Set[migslices.MIGDeviceKey]) (pinned, shared mig.Layout) {
	for _, d := range layout {
		if isAllocated(adminHeld, index, d) && !isAllocated(allocated, index, d) && !shared.Contains(d) {
			shared = append(shared, d)
		}
	}
	for _, d := range inUse {
		if !shared.Contains(d) {
			pinned = append(pinned, d)
		}
	}
	return pinned.Canonical(), shared.Canonical()
}

// markTainted sets, on each GPU, the devices it lacks that
// DeviceTaintRules name (names, this node's; planner.GPU.Tainted): the
// planner makes none of them. Those the GPU has are pinned (autoGPUs).
func markTainted(gpus []planner.GPU, names sets.Set[string]) {
	if names.Len() == 0 {
		return
	}
	held := migKeys(names)
	for i := range gpus {
		g := &gpus[i]
		if g.Info.Model == nil {
			continue
		}
		for _, prof := range g.Info.Model.Profiles {
			for _, pl := range prof.Placements {
				d := mig.Device{Profile: prof.Name, Start: pl.Start}
				if !g.Layout.Contains(d) && isAllocated(held, g.Info.Index, d) {
					g.Tainted = append(g.Tainted, d)
				}
			}
		}
		g.Tainted = g.Tainted.Canonical()
	}
}

// migKeys returns the keys (migslices.ParseMIGDeviceName) of the MIG
// device names among names; other names (whole GPUs) are left out.
func migKeys(names sets.Set[string]) sets.Set[migslices.MIGDeviceKey] {
	out := make(sets.Set[migslices.MIGDeviceKey], len(names))
	for name := range names {
		if k, ok := migslices.ParseMIGDeviceName(name); ok {
			out.Insert(k)
		}
	}
	return out
}

// isAllocated reports whether a claim holds device d of GPU index: held
// are the keys (migKeys) of the names claims hold, and d's published name
// has d's key whatever GI profile ID it carries (NVML's, which may differ
// from the catalog's, or be one only NVML knows for a profile the catalog
// lacks).
func isAllocated(held sets.Set[migslices.MIGDeviceKey], index int, d mig.Device) bool {
	return held.Has(migslices.MIGDeviceKeyOf(index, d.Profile, d.Start))
}

// pendingPods returns the pods the scheduler could not place that wait for
// ResourceClaims, each with its claims not allocated yet, or for extended
// resources that DeviceClasses back (classes; the claim the scheduler
// would make for them, see extendedResourceClaim). A pod whose generated
// claims do not exist yet, or one of whose claims is being deleted or was
// made for another pod (podClaim), is left for a later pass. A claim shared by
// several pending pods is in each (the planner makes its devices once).
// A pod with a nominated node (status.nominatedNodeName: kube-scheduler
// preempts pods there to make room for it) is planned on that node only
// where it is one of autoNodes (the Auto-mode nodes planned): it runs there
// once its victims are gone, on devices free there (the scheduler's DRA
// plugin never frees a victim's device, so it nominates a node only where
// the pod's devices are free), which the plan keeps for it rather than hand
// to another pod; a change planned elsewhere would destroy free devices for
// nothing. Nominated to another node, it is no Auto demand at all. The
// scheduler clears the nomination when the room does not come; the pod is
// planned anywhere then.
func pendingPods(pods []corev1.Pod, claims map[types.NamespacedName]*resourceapi.ResourceClaim, classes *extendedresourcecache.ExtendedResourceCache, autoNodes sets.Set[string]) []planner.Pod {
	var out []planner.Pod
	for i := range pods {
		pod := &pods[i]
		if pod.Spec.NodeName != "" || pod.DeletionTimestamp != nil || !unschedulable(pod) {
			continue
		}
		extended, backed := extendedResourceClaim(pod, classes, claims)
		if len(pod.Spec.ResourceClaims) == 0 && extended == nil {
			continue
		}
		p := planner.Pod{Pod: pod}
		if n := pod.Status.NominatedNodeName; n != "" {
			if !autoNodes.Has(n) {
				continue // going to a node Auto mode does not plan
			}
			p.AllocatedOn = append(p.AllocatedOn, &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{n}}},
			}}})
		}
		if extended != nil {
			p.Claims = append(p.Claims, extended)
			p.ExtendedResources = backed
		}
		complete := true
		for j := range pod.Spec.ResourceClaims {
			c, needed := podClaim(pod, &pod.Spec.ResourceClaims[j], claims)
			if !needed {
				continue
			}
			if c == nil || c.DeletionTimestamp != nil {
				// Not made yet, another pod's, or being deleted:
				// kube-scheduler does not place the pod (its
				// PreFilter refuses it until the claim is made).
				complete = false
				break
			}
			switch a := c.Status.Allocation; {
			case a == nil:
				p.Claims = append(p.Claims, c)
			case a.NodeSelector != nil:
				p.AllocatedOn = append(p.AllocatedOn, a.NodeSelector)
			}
		}
		if complete && len(p.Claims) > 0 {
			out = append(out, p)
		}
	}
	return out
}

// podClaim is the ResourceClaim of claims a pod's entry refers to, found
// as kube-scheduler finds it (resourceclaim.Name, then, for a claim made
// from a template, resourceclaim.IsForPod): needed is false when the pod's
// status says no claim was needed for the entry (its resourceClaimName is
// unset), which is then ignored, as the scheduler and kubelet do. c is nil
// while the claim is not made yet, is not in claims, or was made for
// another pod (an earlier pod of the same name; the scheduler refuses the
// pod until the claim is made again) or an entry's API field this version
// does not know.
func podClaim(pod *corev1.Pod, rc *corev1.PodResourceClaim, claims map[types.NamespacedName]*resourceapi.ResourceClaim) (c *resourceapi.ResourceClaim, needed bool) {
	name, mustCheckOwner, err := resourceclaim.Name(pod, rc)
	switch {
	case err != nil:
		return nil, true
	case name == nil:
		return nil, false
	}
	c = claims[types.NamespacedName{Namespace: pod.Namespace, Name: *name}]
	// A claim a PodGroup owns serves the PodGroup's pods: accepted, as
	// the scheduler does with DRAWorkloadResourceClaims on (without it,
	// no PodGroup owns a claim).
	if c != nil && mustCheckOwner && resourceclaim.IsForPod(pod, c, true) != nil {
		return nil, true
	}
	return c, true
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
	actual, err1 := mig.ParseLayout(st.Layout)
	desired, err2 := mig.ParseLayout(spec.Layout)
	if err1 != nil || err2 != nil || desired.Equal(actual) {
		return planner.Change{}, false
	}
	why := "blocked by a device in use"
	if st.Phase == v1alpha1.PhaseFailed {
		why = "refused by the agent, " + st.Reason
	}
	return planner.Change{Node: nml.Name, GPU: idx, From: desired, To: actual,
		Reason: truncate(fmt.Sprintf("cancels the change to %s, %s (%s); its pods are planned again", desired.String(), why, st.Message), 1024)}, true
}

// unschedulable reports whether the scheduler tried the pod and failed.
func unschedulable(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			return true
		}
	}
	return false
}
