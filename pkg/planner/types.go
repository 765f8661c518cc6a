package planner

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"

	"github.com/miglayout/miglayout/pkg/mig"
	"github.com/miglayout/miglayout/pkg/mig/gpu"
)

// DefaultAgingAfter is the Snapshot.AgingAfter the controller uses unless
// told otherwise: a pod passed over by larger pods for an hour is planned by
// age from then on.
const DefaultAgingAfter = time.Hour

// Policy bounds the planner on the nodes of one MigLayout.
type Policy struct {
	// AllowedProfiles limits the profiles the planner may create; empty
	// means every profile of the GPU's model.
	AllowedProfiles []string
	// Spares are free devices per profile the planner keeps on each node
	// when nothing pending needs the room.
	Spares map[string]int
	// MaxGPUsPerNode is the most GPUs of one node changed by one plan
	// (including GPUs already changing); 0 means 1.
	MaxGPUsPerNode int
	// Group names the nodes that share a limit of Snapshot.GroupMaxGPUs
	// (the controller: the nodes of one MigLayout); "" means none.
	Group string
	// ReclaimIdleAfter is how long a GPU stays idle (GPU.IdleSince)
	// before the plan gives it back as one device of its model's largest
	// profile (mig.Model.Whole); 0 means never. Nodes with Spares are left
	// alone, as are nodes whose AllowedProfiles lack that profile.
	ReclaimIdleAfter time.Duration
}

// GPU is one GPU of an Auto node.
type GPU struct {
	// Info is the GPU as the agent reports it; Info.Model must be set.
	Info gpu.GPU
	// Layout is the layout NVML reports now.
	Layout mig.Layout
	// Pinned are the devices of Layout that must not be destroyed:
	// allocated to a claim, prepared, or running a process.
	Pinned mig.Layout
	// Releasing are the devices of Pinned that every claim holding them
	// lets go of soon: their pods are terminating or done, or the claims
	// are being deleted. The planner never destroys them either, but a
	// pod of a large profile that waits keeps a placement they block
	// before one that devices staying in use block: after many claims
	// end at once, the room they leave goes to the large pods waiting
	// for it, not to the first small pod planned while releases land.
	Releasing mig.Layout
	// Shared are devices of Layout that must not be destroyed but that a
	// pending pod may still get: held only by claims with admin access,
	// which kube-scheduler counts as using nothing up. A device in Pinned
	// too is pinned.
	Shared mig.Layout
	// Tainted are devices the GPU does not have that DeviceTaintRules
	// (NoSchedule or NoExecute) take out of scheduling by name, or, on a
	// GPU an Xid critical error hit, every device it does not have (its
	// agent would publish it tainted): the planner never creates one,
	// since the scheduler would give it to no pod it is made for. (Devices
	// the GPU has that such a rule names, or that an Xid hit, are Pinned.)
	Tainted mig.Layout
	// Changing is true while an earlier plan's change is in flight (desired
	// differs from actual): the planner leaves the GPU alone.
	Changing bool
	// Retrying, with Changing, is true while that change has failed and
	// the agent retries it (an NVML error), or is blocked (a device it
	// destroys is in use), which the caller cancels along with this plan
	// unless the change turns MIG off (that one waits for the device):
	// the planner still leaves the GPU alone, but it does not count toward
	// the limits on GPUs changing at once (Policy.MaxGPUsPerNode,
	// Snapshot.GroupMaxGPUs), so a GPU that fails for good, or waits on a
	// claim that may last days, does not stop its node's other GPUs from
	// changing.
	Retrying bool
	// Reclaiming is true while an earlier plan's change that gives the
	// idle GPU back whole (Change.Reclaims) is in flight and has destroyed
	// nothing yet (the agent drains its devices or has not started).
	// Changing is then false and Layout is the actual layout: a pod may
	// still get its free devices, or a change made from them, rather than
	// wait for the whole device to be split again. The plan gives the GPU
	// back whole again where it leaves it alone (as it would once IdleSince
	// is old enough, within the limits on GPUs changing at once; a pod's
	// change comes first); where it does not, the caller cancels the
	// reclaim, or writes the plan's change in its place, while nothing is
	// destroyed yet.
	Reclaiming bool
	// IdleSince is when the GPU was first seen, in the run of snapshots
	// that ends with this one, with no device pinned or shared and no
	// change in flight; zero where it is not idle or not known to be.
	// With Policy.ReclaimIdleAfter and Snapshot.Now it tells whether the
	// GPU has been idle long enough to be reclaimed.
	IdleSince time.Time
	// Serves, on a GPU Changing whose devices are coming (Layout is the
	// desired one), names the pods (namespace/name) an earlier plan made
	// the change for (Change.Serves). Each of them still pending is
	// planned first, before the queue's order applies, on the free
	// devices of the GPUs whose changes name it (and only there): the
	// devices it waits for are its own, so no pod planned after it takes
	// them and no second GPU is changed for it. One they no longer fit
	// (its claims changed, a device was taken meanwhile) is planned like
	// any other pod. On a Frozen node that carries on (Node.CarriesOn), a
	// GPU whose change is done may name them too: its free devices wait
	// for them there, as they would on a node that is not Frozen, where
	// any pod may have them.
	Serves []string
}

// Node is one Auto-mode node.
type Node struct {
	Node   *corev1.Node
	GPUs   []GPU
	Policy Policy
	// OtherSlices are the ResourceSlices of other DRA drivers (a NIC, an
	// accelerator of another vendor) the node can use: its own, and those
	// shared by several nodes (allNodes, a nodeSelector or per-device node
	// selection; the allocator checks each against the node's name and
	// labels), whole pools only. The allocator may take their devices for
	// the requests of a pod that miglayout's devices do not serve; the
	// planner never changes them. A slice of Snapshot.Driver in a pool
	// other than the node's name holds miglayout's devices of the node
	// that are not in GPUs (a GPU with MIG mode off, published whole; one
	// of a model the catalog lacks): taken as they are, like another
	// driver's.
	OtherSlices []*resourceapi.ResourceSlice
	// Frozen: the node's MigLayout is paused, or its agent is lost (it
	// stopped renewing its heartbeat Lease), so nothing planned for the
	// node would be carried out, or
	// another MigLayout selects the node too, or a DeviceTaintRule takes
	// all of its devices out of scheduling, so it is left as it is. The
	// planner serves no pod there (not even from free devices or a change
	// in flight), changes none of its GPUs and keeps no spares on it; its
	// GPUs changing still count toward Snapshot.GroupMaxGPUs, since an
	// agent cut off from the API server may still be carrying them out.
	Frozen bool
	// FrozenReason says why a Frozen node is, for the pods' messages
	// (e.g. "another MigLayout selects it too"); "" where unknown.
	FrozenReason string
	// CarriesOn, on a Frozen node, says that its agent still carries out
	// the changes in flight (the MigLayout is paused, or another one
	// selects the node too or, in Auto mode, takes it over): the pods a GPU names
	// (GPU.Serves) are served on the devices its change brings or brought,
	// as on a node that is not Frozen, and not planned elsewhere. Nothing
	// else is planned there. The caller gives Serves only to changes that
	// will finish (under way, not retrying) or are done.
	CarriesOn bool
	// Requested is what the pods bound to the node and not finished (and
	// those a preemption nominated to it, for which kube-scheduler keeps
	// room) request of its allocatable resources, by priority, as
	// kube-scheduler's NodeResourcesFit counts them (component-helpers'
	// PodRequests), with their number under "pods". A pending pod is
	// served only where its requests fit beside those of the pods it may
	// not preempt and of the pods this plan serves there (Room).
	Requested []PriorityRequests
}

// PriorityRequests is what the pods of one priority bound to a node request.
type PriorityRequests struct {
	Priority int32
	Requests corev1.ResourceList
}

// Pod is a pending pod with the ResourceClaims it waits for.
type Pod struct {
	Pod *corev1.Pod
	// Claims are the pod's claims that are not allocated yet (from
	// resourceClaimName or the generated names in the pod's status).
	Claims []*resourceapi.ResourceClaim
	// AllocatedOn are the node selectors of the pod's claims that are
	// allocated already (a NIC taken on one node, a claim shared with a
	// running pod), and of the node a preemption nominated it to: the pod
	// can only go where all of them match.
	AllocatedOn []*corev1.NodeSelector
	// Declined are nodes kube-scheduler keeps the pod off for reasons the
	// planner does not judge (pod affinity or anti-affinity, topology
	// spread, host ports, volumes, another scheduler): the caller saw
	// free devices a plan gave the pod there wait for it without the pod
	// being bound. The pod is not planned on them (DeclinedEverywhere
	// where that leaves no node).
	Declined []string
	// ExtendedResources are the extended resources the pod requests that
	// DeviceClasses back, which one of Claims stands for. kube-scheduler
	// makes that claim only on a node whose allocatable does not list
	// them, or lists them at 0 (a device plugin that served them is
	// gone); where a node lists one above 0, its device plugin serves it
	// and no MIG device the planner made would. So they are judged
	// neither against nodes' allocatable nor their room, and a node
	// listing one above 0 is not planned for the pod.
	ExtendedResources []corev1.ResourceName
}

// Snapshot is everything the planner reads.
type Snapshot struct {
	// Driver is the DRA driver name the agents publish under.
	Driver string
	Nodes  []Node
	// Pending pods, in any order (the planner orders them).
	Pending []Pod
	// Classes are the DeviceClasses claims may name.
	Classes []*resourceapi.DeviceClass
	// GroupMaxGPUs is, by Policy.Group, the most GPUs changed at once
	// across the nodes of the group, including GPUs already changing; a
	// group not listed (or 0) has no limit of its own. (A limit across the
	// whole snapshot is one group holding every node.)
	GroupMaxGPUs map[string]int
	// OtherHeld is what claims hold already of the devices of other
	// drivers (OtherSlices).
	OtherHeld OtherHolds
	// Now is when the snapshot was taken. With AgingAfter it tells which
	// pods have waited long enough to be planned by age alone.
	Now time.Time
	// AgingAfter is how long a pending pod (by creation time) may be passed
	// over by larger pods of its priority; after that it is planned by age,
	// ahead of them. 0 (or a zero Now) means never: pods of one priority
	// are planned largest first.
	AgingAfter time.Duration
}

// Change is a new layout for one GPU.
type Change struct {
	Node string
	GPU  int
	// From is the current layout, To the planned one; Destroyed and Created
	// are the difference (Destroyed never holds a pinned device).
	From, To           mig.Layout
	Destroyed, Created mig.Layout
	// Serves names the pods (namespace/name) this change is for, Spares
	// the profiles of the spare devices it creates (Policy.Spares).
	Serves, Spares []string
	// Reclaims: the change gives an idle GPU back whole
	// (Policy.ReclaimIdleAfter) and serves no pod.
	Reclaims bool
	// Reason is a sentence for status and events.
	Reason string
}

// Placement says where a served pod will find its devices.
type Placement struct {
	Pod  string
	Node string
	// Devices are the published device names the pod's claims can be
	// allocated to once the changes land (reserved in the plan).
	Devices []string
	// NeedsChange is false when the devices exist and are free already.
	NeedsChange bool
}

// Kept is where a pod of a large profile that no GPU can take now waits
// (devices in use are in the way, or the limits on GPUs changed at once are
// reached): pods planned after it get no device overlapping Placement on
// that GPU, so the placement stays free, or frees up as the claims on it
// end.
type Kept struct {
	Node string
	// GPU is the GPU's index on the node.
	GPU int
	// Profile is the profile the pod waits for; Placement its memory
	// slices on the GPU.
	Profile   string
	Placement mig.Placement
}

// String names the kept placement: "memory slices 0-3 of n1/gpu-0 (where a
// 4g.40gb goes)".
func (k Kept) String() string {
	return fmt.Sprintf("memory slices %d-%d of %s/gpu-%d (where a %s goes)", k.Placement.Start, k.Placement.End()-1, k.Node, k.GPU, k.Profile)
}

// NoRoom is the Result.Unservable reason of a pod that some node could
// serve with its GPUs free, but none can now: devices in use (or other
// drivers' devices it needs, allocated to other claims) are in the way,
// the limits on GPUs changed at once are reached, or the devices that
// would serve it are ones DeviceTaintRules taint (GPU.Tainted). Such a pod
// of one device of a large profile is in Result.Kept instead.
const NoRoom = "no Auto-mode node has room for the pod's devices now without destroying a device in use (or the policy's limits on GPUs changed at once are reached, or DeviceTaintRules taint the devices that would serve it, or an Xid hit their GPU)"

// ExceedsChangeLimits is the Result.Unservable reason of a pod that some
// node could serve with its GPUs free, but only by changing more of its
// GPUs at once than the policy allows (Policy.MaxGPUsPerNode,
// Snapshot.GroupMaxGPUs): the planner makes no partial change toward it, so
// it is served only where devices it can use exist already on enough GPUs.
const ExceedsChangeLimits = "the pod needs more GPUs of one node changed at once than the Auto policy allows (maxGPUsPerNode, maxGPUs), even with every GPU free; it is served only where devices it can use already exist on enough GPUs: raise the limit to have them made"

// NoAutoNode is the Result.Unservable reason of every pod of a snapshot
// without nodes: no node an Auto-mode MigLayout selects has reported a GPU
// of a catalogued model with MIG mode on.
const NoAutoNode = "no Auto-mode node: no node an Auto-mode MigLayout selects has reported a GPU of a known model with MIG mode on"

// WaitsForLostNode is the Result.Unservable reason of a pod that no Auto
// node can serve now, but a Frozen one could (were its GPUs free): it is
// planned once that node's MigLayout is resumed, its agent is back, its
// conflict is resolved or the MigLayout that now selects it has adopted it.
const WaitsForLostNode = "only Auto-mode nodes that cannot be changed now (their MigLayout is paused; their agent is lost: it stopped renewing its heartbeat Lease; another MigLayout selects them too; the MigLayout that now selects them has not adopted them yet; or a DeviceTaintRule taints all their devices) could serve the pod; it is planned once one of them can be again"

// WaitsForAllModeNode is the Result.Unservable reason of a pod that this
// plan may serve on no node it may run on because of a pod with a request
// for every matching device (allocation mode All): either it is that pod
// and every such node serves another pod of the plan, or every such node
// serves that pod. It is planned again once those pods are allocated.
const WaitsForAllModeNode = "the nodes the pod may run on each serve, in this plan, another pod where one of the two asks for every matching device of the node (allocation mode All): it is planned once that pod is allocated"

// WaitsForNodeResources is the Result.Unservable reason of a pod that some
// Auto-mode node could run, but whose CPU, memory or other requests (or
// one more pod) do not fit beside the pods running on any of them now
// (Node.Requested): kube-scheduler would not bind it there, so no device
// is made for it until one has room.
const WaitsForNodeResources = "the Auto-mode nodes the pod may run on have not enough of the resources it requests (CPU, memory, pods, ...) left beside the pods bound to them now; it is planned once one has"

// DeclinedEverywhere is the Result.Unservable reason of a pod that only
// the nodes in its Pod.Declined could run: kube-scheduler did not bind it
// where free devices for it waited, so something the planner does not
// judge keeps it off those nodes.
const DeclinedEverywhere = "kube-scheduler did not bind the pod to the Auto-mode nodes where free devices for it waited, and no other Auto-mode node may run it: something miglayout does not judge keeps it off them (pod affinity or anti-affinity, topology spread, host ports, volumes, or another scheduler); they are tried again later"

// ServedByDevicePlugin is the Result.Unservable reason of a pod whose
// DeviceClass-backed extended resources (Pod.ExtendedResources) the nodes
// it may run on list as allocatable above 0: kube-scheduler leaves them to
// those nodes' device plugin there and makes no claim a MIG device could
// serve.
const ServedByDevicePlugin = "the Auto-mode nodes the pod may run on list the extended resources it asks for as allocatable (a device plugin serves them there), so kube-scheduler makes no ResourceClaim for them and no MIG device would place it; it waits for the device plugin's devices"

// WaitsForSharedClaim is the Result.Unservable reason of a pod that shares
// claims with a pod the plan serves but does not have exactly that pod's
// claims: the shared claims get their devices with the other pod's
// allocation, and this pod is planned once they are allocated. A pod with
// exactly a served pod's claims is in Result.Served with that pod's devices
// instead.
const WaitsForSharedClaim = "the pod shares claims with another pod this plan serves: it is planned once they are allocated"

// Result is a plan.
type Result struct {
	Changes []Change
	Served  []Placement
	// Unservable maps pod (namespace/name) to why no Auto node can serve it
	// now, for pods without a placement kept for them.
	Unservable map[string]string
	// Kept maps the other pods not served to the placement kept for them.
	Kept map[string]Kept
	// MissingSpares maps node to profile to how many of the spare devices
	// its policy asks for (Policy.Spares) it still lacks after the plan:
	// making them would destroy a device (spares never do) or pass the
	// limits on GPUs changed at once, or no GPU of the node has the room.
	// Frozen nodes, which keep no spares, are left out; nil when none lacks
	// any.
	MissingSpares map[string]map[string]int
}
