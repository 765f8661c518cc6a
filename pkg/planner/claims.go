package planner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/structured"
	"k8s.io/utils/ptr"

	"github.com/miglayout/miglayout/pkg/mig"
	"github.com/miglayout/miglayout/pkg/mig/gpu"
	"github.com/miglayout/miglayout/pkg/slices"
)

// features are the allocator features the planner runs with: those
// kube-scheduler 1.37 runs with by default (k8s.io/kubernetes
// pkg/features: DRAPrioritizedList, DRAAdminAccess, DRADeviceTaints,
// DRADeviceBindingConditions, DRAConsumableCapacity,
// DRAFractionalCapacityRange and DRAPartitionableDevices are on), so that
// a claim is judged as the scheduler judges it: without binding conditions
// the allocator skips every device that carries them, without consumable
// capacity it refuses a request for capacity ("memory: 30Gi"), and without
// partitionable devices it leaves out another driver's slices that share
// counters or select nodes per device.
var features = structured.Features{PrioritizedList: true, AdminAccess: true, DeviceTaints: true, DeviceBindingAndStatus: true,
	ConsumableCapacity: true, FractionalCapacityRange: true, PartitionableDevices: true}

// classLister serves the snapshot's DeviceClasses to the allocator.
type classLister map[string]*resourceapi.DeviceClass

func (l classLister) List() ([]*resourceapi.DeviceClass, error) {
	out := make([]*resourceapi.DeviceClass, 0, len(l))
	for _, c := range l {
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func (l classLister) Get(name string) (*resourceapi.DeviceClass, error) {
	if c, ok := l[name]; ok {
		return c, nil
	}
	return nil, fmt.Errorf("DeviceClass %q not found", name)
}

// matcher decides claim satisfiability with the scheduler's allocator.
type matcher struct {
	driver  string
	classes classLister
	cel     *cel.Cache
	// profiles caches, per claim shape and kind of GPU (gpuKind), the
	// profiles one device of which satisfies a single-device claim, best
	// first.
	profiles map[string]map[string][]string
	// specs caches claimSpec by claim shape; gpuProfs and devFits
	// gpuProfiles and deviceFits by claim shape and relevantInfo.
	specs    map[string]string
	gpuProfs map[string][]string
	devFits  map[string]bool
	shapes   map[*resourceapi.ResourceClaim]string
	flagsBy  map[string]infoFlags
	// perGPUs caches perGPU by claim shape.
	perGPUs map[string]bool
}

func newMatcher(driver string, classes []*resourceapi.DeviceClass) *matcher {
	l := classLister{}
	for _, c := range classes {
		l[c.Name] = c
	}
	return &matcher{driver: driver, classes: l, cel: cel.NewCache(1000, cel.Features{}), profiles: map[string]map[string][]string{},
		specs: map[string]string{}, gpuProfs: map[string][]string{}, devFits: map[string]bool{},
		shapes: map[*resourceapi.ResourceClaim]string{}, flagsBy: map[string]infoFlags{}, perGPUs: map[string]bool{}}
}

// singleDevice reports whether the pod asks for exactly one device through
// one claim with one request and no constraints: the common case, planned
// without building a node's whole hypothetical pool.
func singleDevice(p Pod) bool {
	if len(p.Claims) != 1 {
		return false
	}
	d := p.Claims[0].Spec.Devices
	if len(d.Requests) != 1 || len(d.Constraints) != 0 {
		return false
	}
	ex := d.Requests[0].Exactly
	if ex == nil || ex.AdminAccess != nil && *ex.AdminAccess {
		return false
	}
	return ex.AllocationMode == "" || ex.AllocationMode == resourceapi.DeviceAllocationModeExactCount && ex.Count <= 1
}

// asksAll reports whether a claim of the pod not allocated yet has a
// request, or a subrequest of a prioritized list, in allocation mode All
// that uses its devices up. A request with admin access does not: the
// scheduler's allocator gives such a request devices whatever holds them,
// and counts them as held by no one, so it leaves the node to other pods
// (subrequests have no admin access).
func asksAll(p Pod) bool {
	for _, c := range p.Claims {
		for _, r := range c.Spec.Devices.Requests {
			if r.Exactly != nil && r.Exactly.AllocationMode == resourceapi.DeviceAllocationModeAll && !ptr.Deref(r.Exactly.AdminAccess, false) {
				return true
			}
			for _, s := range r.FirstAvailable {
				if s.AllocationMode == resourceapi.DeviceAllocationModeAll {
					return true
				}
			}
		}
	}
	return false
}

// adminOnly reports whether every request of the pod's claims not
// allocated yet has admin access (subrequests of a prioritized list have
// none): the pod uses no device up. False for a pod without such a claim.
func adminOnly(p Pod) bool {
	found := false
	for _, c := range p.Claims {
		for _, r := range c.Spec.Devices.Requests {
			if r.Exactly == nil || !ptr.Deref(r.Exactly.AdminAccess, false) {
				return false
			}
			found = true
		}
	}
	return found
}

// perDevice returns a claim for one device of request r of claim c (no
// constraints, exact count 1, for every subrequest of a prioritized list
// too; c itself when it is that already) and how many devices r asks for
// (AllocationMode All counts one; a prioritized list counts its first
// subrequest's).
func perDevice(c *resourceapi.ResourceClaim, r resourceapi.DeviceRequest) (*resourceapi.ResourceClaim, int) {
	count := 1
	if r.Exactly != nil && r.Exactly.AllocationMode == resourceapi.DeviceAllocationModeExactCount && r.Exactly.Count > 1 {
		count = int(r.Exactly.Count)
	}
	if len(c.Spec.Devices.Requests) == 1 && len(c.Spec.Devices.Constraints) == 0 && r.Exactly != nil && count == 1 &&
		(r.Exactly.AllocationMode == "" || r.Exactly.AllocationMode == resourceapi.DeviceAllocationModeExactCount) {
		return c, 1
	}
	one := c.DeepCopy()
	one.Spec.Devices.Constraints = nil
	one.Spec.Devices.Requests = []resourceapi.DeviceRequest{*r.DeepCopy()}
	if ex := one.Spec.Devices.Requests[0].Exactly; ex != nil {
		ex.AllocationMode, ex.Count = resourceapi.DeviceAllocationModeExactCount, 1
	}
	// A prioritized list: one device of any subrequest; as many as the
	// first (preferred) subrequest asks for.
	for i := range one.Spec.Devices.Requests[0].FirstAvailable {
		s := &one.Spec.Devices.Requests[0].FirstAvailable[i]
		if i == 0 && s.AllocationMode == resourceapi.DeviceAllocationModeExactCount && s.Count > 1 {
			count = int(s.Count)
		}
		s.AllocationMode, s.Count = resourceapi.DeviceAllocationModeExactCount, 1
	}
	return one, count
}

// perDeviceChoice is perDevice for the v-th choice of a prioritized list:
// a claim for one device of r's subrequest v (the last one where r has
// fewer), and as many as that subrequest asks for. A request without a
// list is perDevice's.
func perDeviceChoice(c *resourceapi.ResourceClaim, r resourceapi.DeviceRequest, v int) (*resourceapi.ResourceClaim, int) {
	if len(r.FirstAvailable) == 0 {
		return perDevice(c, r)
	}
	sub := r.FirstAvailable[min(v, len(r.FirstAvailable)-1)]
	count := 1
	if sub.AllocationMode == resourceapi.DeviceAllocationModeExactCount && sub.Count > 1 {
		count = int(sub.Count)
	}
	one := c.DeepCopy()
	one.Spec.Devices.Constraints = nil
	req := r.DeepCopy()
	sub = *sub.DeepCopy()
	sub.AllocationMode, sub.Count = resourceapi.DeviceAllocationModeExactCount, 1
	req.FirstAvailable = []resourceapi.DeviceSubRequest{sub}
	one.Spec.Devices.Requests = []resourceapi.DeviceRequest{*req}
	return one, count
}

// maxCachedShapes bounds the shape cache.
const maxCachedShapes = 10000

// shape is shapeKey, cached by claim (the snapshot's claims do not change
// during a plan).
func (m *matcher) shape(c *resourceapi.ResourceClaim) string {
	if k, ok := m.shapes[c]; ok {
		return k
	}
	k := shapeKey(c)
	if len(m.shapes) >= maxCachedShapes {
		// Per-request copies made while trying nodes would pile up.
		clear(m.shapes)
	}
	m.shapes[c] = k
	return k
}

// shapeKey identifies what a claim asks for, independent of its name.
func shapeKey(c *resourceapi.ResourceClaim) string {
	b, _ := json.Marshal(c.Spec.Devices)
	return string(b)
}

// singleProfiles returns the profiles of kind k's model, best first (least
// memory, then fewest compute slices), one device of which on k's stand-in
// GPU satisfies the single-device claim c: the claim is judged on what
// every GPU of the kind (gpuKind) publishes alike.
func (m *matcher) singleProfiles(ctx context.Context, c *resourceapi.ResourceClaim, k gpuKindInfo) ([]string, error) {
	key := m.shape(c)
	byKind, ok := m.profiles[key]
	if !ok {
		byKind = map[string][]string{}
		m.profiles[key] = byKind
	}
	if out, ok := byKind[k.key]; ok {
		return out, nil
	}
	var out []string
	probe, model := k.standIn, k.standIn.Model
	for _, p := range byMemory(model) {
		dev, err := slices.PlannedMIGDevice(probe, mig.Device{Profile: p.Name, Start: p.Placements[0].Start})
		if err != nil {
			return nil, err
		}
		ok, err := m.fits(ctx, "probe", []resourceapi.Device{dev}, nil, []*resourceapi.ResourceClaim{c})
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, p.Name)
		}
	}
	byKind[k.key] = out
	return out, nil
}

// perGPUAttributes are the attributes (lower case) of miglayout's devices
// whose values differ between GPUs of one model or between placements: the
// identity of the device and its GPU, the GPU's index, minor number, PCI
// bus ID, PCIe root and NUMA node (resource.kubernetes.io/pcieRoot and
// numaNode), the node's driver versions (which the catalog does not know),
// the placement. A claim or class whose spec mentions one of them is
// judged on each GPU's own devices (gpuProfiles, deviceFits) rather than
// on a stand-in GPU of the model, which has none of the GPU's topology.
var perGPUAttributes = append([]string{"uuid", "pcibusid", "index", "minor", "driverversion", "placementstart"}, topologyAttributes...)

// topologyAttributes are the per-GPU attributes (lower case) a constraint
// may compare between a pod's devices and that tell GPUs apart: GPUs on one
// PCIe root or NUMA node match, others do not, unlike a GPU's identity
// (parentUUID: all on one GPU, whichever).
var topologyAttributes = []string{"numanode", "pcieroot"}

// mentionsPerGPU reports whether a claim or class spec (JSON) mentions a
// per-GPU attribute.
func mentionsPerGPU(spec string) bool {
	spec = strings.ToLower(spec)
	for _, a := range perGPUAttributes {
		if strings.Contains(spec, a) {
			return true
		}
	}
	return false
}

// perGPU reports whether claim c (or a DeviceClass it names) reads a
// per-GPU attribute, or a constraint of c compares one that tells GPUs
// apart (topologyAttributes): two nodes whose GPUs are alike but for their
// NUMA nodes do not serve such a claim alike.
func (m *matcher) perGPU(c *resourceapi.ResourceClaim) bool {
	return memo(m.perGPUs, m.shape(c), func() bool {
		return mentionsPerGPU(m.claimSpec(c)) || comparesTopology(c.Spec.Devices.Constraints)
	})
}

// comparesTopology reports whether a constraint compares (matchAttribute,
// distinctAttribute) an attribute of topologyAttributes.
func comparesTopology(constraints []resourceapi.DeviceConstraint) bool {
	for _, c := range constraints {
		for _, name := range []*resourceapi.FullyQualifiedName{c.MatchAttribute, c.DistinctAttribute} {
			if name == nil {
				continue
			}
			lower := strings.ToLower(string(*name))
			for _, a := range topologyAttributes {
				if strings.HasSuffix(lower, "/"+a) {
					return true
				}
			}
		}
	}
	return false
}

// memo returns cache[key], computing and storing it first if missing.
func memo[V any](cache map[string]V, key string, compute func() V) V {
	if v, ok := cache[key]; ok {
		return v
	}
	v := compute()
	cache[key] = v
	return v
}

// readsPlacement reports whether claim c (or a DeviceClass it names) reads
// a device's placement: which of a GPU's placements it accepts matters.
func (m *matcher) readsPlacement(c *resourceapi.ResourceClaim) bool {
	return strings.Contains(m.claimSpec(c), "placementstart")
}

// classNames are the DeviceClasses claim c names, subrequests included.
func classNames(c *resourceapi.ResourceClaim) []string {
	var out []string
	for _, r := range c.Spec.Devices.Requests {
		if r.Exactly != nil {
			out = append(out, r.Exactly.DeviceClassName)
		}
		for _, sub := range r.FirstAvailable {
			out = append(out, sub.DeviceClassName)
		}
	}
	return out
}

func classSpecJSON(c *resourceapi.DeviceClass) string {
	b, _ := json.Marshal(c.Spec)
	return string(b)
}

// gpuProfiles returns the profiles of GPU g's model, best first, one device
// of which, at some placement on g itself, satisfies the single-device
// claim c. Cached by what of g the claim can tell apart (relevantInfo).
func (m *matcher) gpuProfiles(ctx context.Context, c *resourceapi.ResourceClaim, g gpu.GPU) ([]string, error) {
	key := m.shape(c) + "\x00" + relevantInfo(g, m.flags(c))
	if out, ok := m.gpuProfs[key]; ok {
		return out, nil
	}
	var out []string
	for _, p := range byMemory(g.Model) {
		for _, pl := range p.Placements {
			ok, err := m.deviceFits(ctx, c, g, mig.Device{Profile: p.Name, Start: pl.Start})
			if err != nil {
				return nil, err
			}
			if ok {
				out = append(out, p.Name)
				break
			}
		}
	}
	m.gpuProfs[key] = out
	return out, nil
}

// deviceFits reports whether MIG device d of GPU g satisfies the
// single-device claim c. Cached by what of g the claim can tell apart
// (relevantInfo).
func (m *matcher) deviceFits(ctx context.Context, c *resourceapi.ResourceClaim, g gpu.GPU, d mig.Device) (bool, error) {
	key := m.shape(c) + "\x00" + relevantInfo(g, m.flags(c)) + "\x00" + d.String()
	if v, ok := m.devFits[key]; ok {
		return v, nil
	}
	dev, err := slices.PlannedMIGDevice(g, d)
	if err != nil {
		return false, err
	}
	ok, err := m.fits(ctx, "probe", []resourceapi.Device{dev}, nil, []*resourceapi.ResourceClaim{c})
	if err != nil {
		return false, err
	}
	m.devFits[key] = ok
	return ok, nil
}

// fits reports whether the allocator can allocate claims on a node whose
// pool holds devices, of which the names in taken are already allocated.
func (m *matcher) fits(ctx context.Context, node string, devices []resourceapi.Device, taken sets.Set[string], claims []*resourceapi.ResourceClaim) (bool, error) {
	res, _, _, err := m.allocate(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}, devices, taken, claims, nil)
	return res != nil, err
}

// others are other drivers' devices a node can use beside miglayout's:
// their slices, what claims hold of them already (held: devices and
// shares), and what this plan counts on for pods it serves already.
type others struct {
	slices  []*resourceapi.ResourceSlice
	held    otherTotal
	planned otherTotal
}

// byMemory returns the model's profiles by memory, then compute slices.
func byMemory(m *mig.Model) []*mig.Profile {
	out := make([]*mig.Profile, len(m.Profiles))
	for i := range m.Profiles {
		out[i] = &m.Profiles[i]
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].MemoryMiB != out[j].MemoryMiB {
			return out[i].MemoryMiB < out[j].MemoryMiB
		}
		return out[i].ComputeSlices < out[j].ComputeSlices
	})
	return out
}

// deviceName is the published name of a MIG device of g.
func deviceName(g gpu.GPU, d mig.Device) string {
	p, err := g.Model.Profile(d.Profile)
	if err != nil {
		return ""
	}
	return slices.MIGDeviceName(g.Index, d.Profile, p.ID, d.Start)
}

// allocate is fits returning the names of miglayout's devices allocated to
// claims, or nil when they cannot all be allocated. other, when set, adds
// devices of other drivers the node can use (and those of them already
// allocated or planned); the allocator decides from the node's name and
// labels which of them it reaches (node-local, all nodes, or a node
// selector). rest is what the allocation takes of other drivers' devices
// (whole devices, or shares with the capacity they consume); admin the
// names of mine allocated with admin access only (the scheduler counts
// them as in use by no one; an other driver's device so allocated is not
// in rest).
func (m *matcher) allocate(ctx context.Context, node *corev1.Node, devices []resourceapi.Device, taken sets.Set[string], claims []*resourceapi.ResourceClaim, other *others) (mine []string, admin sets.Set[string], rest OtherHolds, err error) {
	name := node.Name
	slice := &resourceapi.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: name + "-planned"},
		Spec: resourceapi.ResourceSliceSpec{
			Driver:   m.driver,
			NodeName: &name,
			Pool:     resourceapi.ResourcePool{Name: name, Generation: 1, ResourceSliceCount: 1},
			Devices:  devices,
		},
	}
	state := structured.AllocatedState{AllocatedDevices: sets.New[structured.DeviceID](),
		AllocatedSharedDeviceIDs: sets.New[structured.SharedDeviceID](), AggregatedCapacity: structured.NewConsumedCapacityCollection()}
	for d := range taken {
		state.AllocatedDevices.Insert(structured.MakeDeviceID(m.driver, name, d))
	}
	pools := []*resourceapi.ResourceSlice{slice}
	if other != nil {
		for _, s := range other.slices {
			if s.Spec.Driver != m.driver || s.Spec.Pool.Name != name {
				pools = append(pools, s)
			}
		}
		other.held.addTo(&state, m.driver, name)
		other.planned.addTo(&state, m.driver, name)
	}
	alloc, err := structured.NewAllocator(ctx, features, state, m.classes, pools, m.cel)
	if err != nil {
		return nil, nil, rest, fmt.Errorf("creating allocator: %w", err)
	}
	fresh := make([]*resourceapi.ResourceClaim, len(claims))
	for i, c := range claims {
		c = c.DeepCopy()
		c.Status = resourceapi.ResourceClaimStatus{}
		fresh[i] = c
	}
	res, err := alloc.Allocate(ctx, node, fresh)
	if errors.Is(err, structured.ErrFailedAllocationOnNode) {
		// As for kube-scheduler's Filter, a failure of this node only
		// (an invalid pool of another driver, as while it republishes
		// its slices): the claims do not fit here.
		return nil, nil, rest, nil
	}
	if err != nil {
		return nil, nil, rest, fmt.Errorf("allocating claims: %w", err)
	}
	if res == nil {
		return nil, nil, rest, nil
	}
	mine, admin = []string{}, sets.New[string]()
	used := sets.New[string]()
	for _, r := range res {
		for _, d := range r.Devices.Results {
			byAdmin := d.AdminAccess != nil && *d.AdminAccess
			switch {
			case d.Driver != m.driver || d.Pool != name:
				// Another driver's, or one of miglayout's the plan
				// does not change (Node.OtherSlices).
				if !byAdmin {
					rest.Add(d)
				}
				continue
			case byAdmin:
				admin.Insert(d.Device)
			default:
				used.Insert(d.Device)
			}
			mine = append(mine, d.Device)
		}
	}
	// A device allocated both ways (two claims of the pod) is in use.
	admin = admin.Difference(used)
	return mine, admin, rest, nil
}
