package controller

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/dynamic-resource-allocation/structured"
	"k8s.io/utils/ptr"

	"github.com/miglayout/miglayout/pkg/planner"
	migslices "github.com/miglayout/miglayout/pkg/slices"
)

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
