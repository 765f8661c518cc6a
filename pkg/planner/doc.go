// Package planner decides, in Auto mode, how to repartition GPUs so that
// pending pods' ResourceClaims can be allocated. It is pure: a Snapshot in,
// a Result out; no client, no clock (the caller passes Snapshot.Now), no
// randomness, and the same Snapshot always gives the same Result.
//
// Claim semantics are the scheduler's own: whether a set of devices satisfies
// a pod's claims is decided by k8s.io/dynamic-resource-allocation/structured
// (the allocator kube-scheduler runs) over hypothetical ResourceSlices whose
// devices are built by package slices, the same code that publishes the real
// ones. Node feasibility (nodeSelector, required node affinity, taints and
// tolerations, numeric toleration operators included) comes from
// k8s.io/component-helpers, and the pod's resource requests must fit the
// node's allocatable beside what the pods bound there that it may not
// preempt request, what the pods planned there before it request and what
// a pod nominated there (status.nominatedNodeName) that the plan does not
// serve requests, as kube-scheduler keeps it for that pod (Room;
// WaitsForNodeResources where nothing else keeps the pod off every node).
// What else kube-scheduler filters on (inter-pod affinity, topology
// spread, host ports, volumes) the planner does not judge; the caller
// names in Pod.Declined the nodes it has seen kube-scheduler keep a pod
// off (free devices planned for it there waited unbound), and the pod is
// not planned on them (DeclinedEverywhere where no other node is left).
// Most claims are judged once per kind of GPU (its
// model and the attributes its GPUs publish alike but that may differ
// between nodes: product name, brand, architecture, compute capability) on
// a stand-in GPU; one that reads an attribute that
// differs between GPUs of a model (index, minor, UUID, PCI bus ID, PCIe
// root, NUMA node, driver version, placement) is judged on each GPU's own
// devices (servePinned),
// and a pod with claims allocated already only on the nodes their
// allocations allow. A pod of several devices (claims, counts, constraints)
// gets each where it takes the least room for large profiles and is then
// checked whole by the allocator; where that fails, those a
// distinctAttribute constraint names each on a GPU of its own, and
// (a matchAttribute constraint, a limit on GPUs changed at once) all of
// them on one GPU, other drivers' devices left to the allocator,
// that may change, the last such GPU among equals (the scheduler's
// allocator takes the first device a request accepts in publication
// order, smallest first, then least room lost, then by GPU index, see
// slices.SortDevices: pods
// of one device, planned on the first GPUs among equals, then get those
// rather than break up the set); prioritized lists (firstAvailable) are
// tried in combination, in the allocator's order, each subrequest with its
// own count and selectors. The allocator runs with the features
// kube-scheduler 1.37 runs with. A pod with a request for every matching
// device (allocation mode All) gets a node no other pod of the plan is
// served on (WaitsForAllModeNode); a device given with admin access stays
// but is not used up, in the plan as in the snapshot (GPU.Shared); a
// device a DeviceTaintRule names is never made (GPU.Tainted). A way
// to serve a pod is taken only if kube-scheduler, taking the node's pods
// of the plan in its order (priority, then age) and knowing nothing of
// the plan's reservations, gives each of them devices (nodeAgrees): a
// device made for a later pod that a pod taken earlier also accepts, and
// meets first in publication order (a smaller one for a claim open to
// several sizes, a prioritized list's first choice), would be that pod's;
// the next best way is tried (among them the same way on a GPU in the
// same state on another node, up to eight such nodes), and a pod no way
// serves so waits for the next plan. A pod no node of
// its kind could hold even with every GPU free is not tried node by node,
// nor on a node in the state of one it failed on. A matchAttribute
// constraint compares a pod's devices with each other and tells no GPU
// from another, but on the GPU's PCIe root or NUMA node
// (resource.kubernetes.io/pcieRoot, numaNode): such a claim, like one whose
// selectors or classes read a per-GPU attribute, is tried on each node
// whatever the nodes tried before. Demand tells the
// pods that ask for a MIG device from those that wait for other drivers'
// devices only, which the planner leaves alone; a pod whose claims the
// allocator cannot evaluate is reported unservable with the allocator's
// error and does not stop the plan.
//
// The objective, in order: serve the most pending demand, taking pods by
// priority, then largest first (compute slices of the smallest profile that
// satisfies each requested device: first-fit decreasing over the whole
// queue, so large claims get whole placement ranges and small ones fill the
// holes), then older first; a pod passed over for Snapshot.AgingAfter is
// taken by age ahead of larger ones (nothing waits forever), and an older
// pod of the same priority that accepts a profile a larger pod accepts,
// and shares no claim with it, ahead of it, since kube-scheduler tries
// every pending pod, the plan's left-out ones too, in its queue's order
// (for pods pending together mostly oldest first: schedulerLess) and would
// give it the larger pod's device first (schedulerFirst); never destroy a
// device that is allocated, prepared or running a process (GPU.Pinned), nor
// one reserved for a pod served earlier in the same plan. Among ways to
// serve a pod, existing free devices and new ones alike, prefer the one that
// takes the least room from large profiles (mig.Model.Headroom of the
// devices that stay, before minus after: best fit across GPUs, so a small
// device goes where it spoils the least and whole GPUs stay whole for 7g
// claims; on one GPU too, so a 3g.40gb goes to the right half even where
// that destroys two free devices and the left half only one, because only
// the left half takes a 4g.40gb), then the one that destroys the fewest
// free devices, then an
// existing device over a new one, then a GPU the plan already changes
// (fewest GPUs touched), then the most room left, then the smallest device
// that satisfies the claim. A pod of a large profile (3g and up) that
// nothing can serve keeps a placement for itself: on the GPU where the
// fewest devices that must stay are in its way (those whose claims end
// soon, GPU.Releasing, counted after the others), the placement of its
// profile they block least (among equals, the one whose device leaves the
// most room: a 3g.40gb keeps the right half, as it is served on an empty
// GPU); pods planned after it get no device overlapping
// that placement (mig.FitRequest.Avoid), so it drains as claims end, while
// the rest of the GPU stays usable. (The plan binds the planner only:
// kube-scheduler may still give a device free there already to a pod that
// asks for its profile.) Each Change says which pods it serves.
// Once every pending pod is planned, a GPU idle for its node's
// Policy.ReclaimIdleAfter (GPU.IdleSince) that nothing holds is given back
// as one device of its largest profile (reclaimIdle): kube-scheduler gives
// free devices to the first pods they fit, so the fragments a finished
// workload leaves would draw small claims onto a GPU a large claim could
// have whole. A GPU whose reclaim has destroyed nothing yet
// (GPU.Reclaiming) is planned on its actual layout like any other and
// given back again only where the plan leaves it alone, so a pod that
// arrives while it drains does not wait for it to be made whole and split
// again.
// A claim several pending pods share gets devices once, with the first of
// its pods served: a pod with exactly that pod's claims is served by the
// same devices where it may run on that node (else it is told why), one
// with other claims too waits for the shared claim's allocation
// (WaitsForSharedClaim); a shared claim that waits with a placement kept
// for it keeps one, on which the pods with exactly its pod's claims wait
// too. With no Auto node every pod is unservable
// (NoAutoNode). A Frozen node (its agent lost, its MigLayout paused, in conflict with another MigLayout, being
// taken over by another, or every device taken out of scheduling by a DeviceTaintRule) serves
// nothing and changes nothing, but its GPUs changing still count toward the limits; where its agent carries on
// (Node.CarriesOn) the pods its changes under way are for are served by them there; a pod only
// a Frozen node could serve waits for it (WaitsForLostNode). Models are
// told apart by Model.Key: GPUs of one product whose NVML describes a
// profile otherwise (mig.Model.WithNVMLValues) are planned with their own
// values.
//
// These rules are measured, not assumed (the figures below against the
// bench's first-fit as it was then, filling nodes in name order; it now
// picks among nodes as the scheduler model does, which lowers its large
// claims served on 16 GPUs): pkg/planner/quality replays seeded
// arrival traces (the figures below were measured with the plan placing
// every claim, free devices that exist included: Config.PlanBindsScheduler;
// in a cluster kube-scheduler gives a free device that exists to the first
// pod that fits it, which the bench now models by default) against
// first-fit, count-greedy and hindsight strategies, and on 2 GPUs against
// the optimal online policy, solved exactly. Its
// choices showed where the planner lost most: on one GPU it used to take
// the layout that destroys the fewest free devices before comparing room
// (a 1g.10gb went into the half a 4g.40gb needs rather than destroy a free
// 2g.20gb); with room first its expected loss against the optimum fell by
// two thirds. What it still does differently depends on the demand mix
// (with many 4g claims, a 3g on an empty GPU's right half beats filling a
// GPU that has one), which the planner does not know.
// There "destroy fewest" first (or "keep the most room on the chosen GPU")
// served fewer large claims than first-fit; taking an existing free device
// before any new one served fewer large claims than one best-fit rule for
// both; and oldest-first planning made large claims wait longer than
// largest-first (queue model p95). Keeping a whole GPU for a waiting 4g or
// 3g made large claims wait longer than keeping only its placement (p95
// 0.69 of first-fit's against 0.61-0.64); on the default traces kept
// placements are then as good as none, but where small claims dominate
// (60% 1g, 25% 2g, 15% 4g at 85% load) they cut the p95 wait of the 4g
// claims from 73 to 61 minutes and the longest from 110 to 88. For a
// 3g.40gb they change nothing measured (the same mix with 15% 3g instead
// of 4g gives the same waits with or without them: the 3g is served in
// whichever half drains first, before smaller pods), and which of its
// two halves is kept changed no figure of the bench (default traces,
// and that mix with 15% 3g, or 12.5% 3g and 12.5% 4g on 55% 1g and 20%
// 2g); keeping the right half on a tie follows the placement rule above.
// Tried and not kept, for no gain or a loss: keeping more placements per
// waiting claim, or more as it waits longer; letting several waiting pods keep
// disjoint placements of one GPU (a 3g.40gb beside a 4g.40gb's: no figure
// changed); preferring, among GPUs equally blocked, the one whose kept
// placement leaves the most room (large claims' p95 wait 29 minutes
// against 26 on the 3g-and-4g mix above); keeping the same GPU from one plan to
// the next; keeping whole GPUs empty in reserve; packing the fullest GPU
// first; sparing GPUs with few devices (likely to drain); weighting the
// room lost by profile size or demand; ordering large claims smallest
// first or by age; holding every small pod back while a large one keeps a
// placement (no backfill: large claims' p95 wait still 0.59-0.65 of
// first-fit's, small claims' p95 up to an hour); a value function per GPU
// taken from the optimal one-GPU policy (fewer large claims served than
// best fit); ordering 4g claims ahead of 7g (their p95 wait fell from
// 19 to 11 minutes, the 7g's rose from 22 to 48); aging after 5, 10, 20 or
// 30 minutes; changing a GPU again while its change is in flight (no
// repartition delay). Nor does knowing how long claims run, which no
// scheduler knows: told each claim's exact holding time, keeping the
// placement whose claims end first (instead of the one with the fewest
// claims) left large claims' p95 wait at 0.56 / 0.63 / 0.62 of
// first-fit's (small-heavy / uniform / large-heavy, against 0.51 / 0.65 /
// 0.63), and preferring, among equally good GPUs (or before room), the one
// whose claims outlast the new one at 0.46-0.64 (0.51-0.58).
// With kube-scheduler modelled (the bench's default), merging the free
// devices of a GPU still in use into the largest devices that fit beside
// the ones in use, once the GPU has not changed for 300 s (as idle GPUs
// are given back whole), closed 14 / 34 / 47 % of the gap to migration
// (small-heavy / uniform / large-heavy; 21 / 37 / 38 % without), and
// 18 / 31 / 49 % done at once; merging only where that makes a device of
// 3g or more, 13 / 39 / 43 %; the p95 wait of large claims stayed at
// 0.53-0.78 of first-fit's. Keeping kube-scheduler off free devices in
// kept placements (device taints) changed no figure of the queue model
// either. There the 7g.80gb claims of the small-heavy mix wait longer
// than first-fit's (p95 58 against 50 minutes), and 40 minutes where the
// plan places every claim: what costs them is which free device
// kube-scheduler gives the small claims, not a kept GPU's devices.
package planner
