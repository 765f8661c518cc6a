package quality

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/miglayout/miglayout/pkg/mig"
	"github.com/miglayout/miglayout/pkg/planner"
	migslices "github.com/miglayout/miglayout/pkg/slices"
)

// ClassName is the DeviceClass the simulated claims use.
const ClassName = "mig.miglayout.io"

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// DeviceClass is the class of the simulated claims.
func DeviceClass() *resourceapi.DeviceClass {
	return &resourceapi.DeviceClass{
		ObjectMeta: metav1.ObjectMeta{Name: ClassName},
		Spec: resourceapi.DeviceClassSpec{Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{
			Expression: "device.driver == '" + migslices.DefaultDriverName + "'"}}}},
	}
}

// PendingPod is the pod of a claim for one device of profile, created at
// arrival seconds after the epoch.
func PendingPod(name, profile string, arrival float64) planner.Pod {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name,
		CreationTimestamp: metav1.NewTime(epoch.Add(time.Duration(arrival * float64(time.Second))))}}
	c := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name + "-gpu"}}
	c.Spec.Devices.Requests = []resourceapi.DeviceRequest{{Name: "gpu", Exactly: &resourceapi.ExactDeviceRequest{
		DeviceClassName: ClassName, AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 1,
		Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{
			Expression: "device.attributes['" + migslices.DefaultDriverName + "'].profile == '" + profile + "'"}}},
	}}}
	return planner.Pod{Pod: pod, Claims: []*resourceapi.ResourceClaim{c}}
}

// miglayoutStrategy runs pkg/planner.Plan on a snapshot of the simulated
// cluster at every decision: pending claims as pods, GPUs with their layout
// (a GPU in flight with its coming layout and Changing set), and the
// allocated and reserved devices pinned. Claims served by an in-flight
// change are not pending any more (the controller does not plan them
// twice). It applies the plan's Changes, then its Served placements.
type miglayoutStrategy struct {
	nodes []*corev1.Node
	pods  map[int]planner.Pod
	class []*resourceapi.DeviceClass
	// plans counts Plan calls; planErrs holds plans the simulator refused.
	plans int
	// idleSince is, by GPU, when the strategy first saw it idle (no device
	// allocated or reserved, no change in flight), as the controller
	// counts it (planner.GPU.IdleSince).
	idleSince map[int]float64
}

func newMiglayout(nodes int) *miglayoutStrategy {
	st := &miglayoutStrategy{pods: map[int]planner.Pod{}, class: []*resourceapi.DeviceClass{DeviceClass()}, idleSince: map[int]float64{}}
	for i := range nodes {
		name := nodeName(i)
		st.nodes = append(st.nodes, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"kubernetes.io/hostname": name}}})
	}
	return st
}

func nodeName(i int) string { return fmt.Sprintf("node-%02d", i) }

func podName(id int) string { return fmt.Sprintf("claim-%05d", id) }

func (*miglayoutStrategy) lock() bool     { return true }
func (*miglayoutStrategy) migrates() bool { return false }
func (*miglayoutStrategy) delay() bool    { return true }

// snapshot builds the planner's input from s.
func (st *miglayoutStrategy) snapshot(s *sim) planner.Snapshot {
	snap := planner.Snapshot{Driver: migslices.DefaultDriverName, Classes: st.class,
		Now: epoch.Add(time.Duration(s.now * float64(time.Second))), AgingAfter: planner.DefaultAgingAfter}
	var group string
	if s.maxGPUs > 0 {
		group = "cluster"
		snap.GroupMaxGPUs = map[string]int{group: s.maxGPUs}
	}
	for ni, n := range st.nodes {
		node := planner.Node{Node: n, Policy: planner.Policy{MaxGPUsPerNode: s.maxPerNode, Group: group,
			ReclaimIdleAfter: time.Duration(s.reclaimIdleAfter * float64(time.Second))}}
		for _, g := range s.gpus {
			if g.node != ni {
				continue
			}
			pg := planner.GPU{
				Info:     migslices.PlannedGPU(s.model, g.local),
				Layout:   g.layout,
				Pinned:   s.owned(g),
				Changing: s.changing(g),
			}
			if len(pg.Pinned) > 0 || pg.Changing {
				delete(st.idleSince, g.idx)
			} else {
				since, ok := st.idleSince[g.idx]
				if !ok {
					since = s.now
					st.idleSince[g.idx] = since
				}
				pg.IdleSince = epoch.Add(time.Duration(since * float64(time.Second)))
			}
			node.GPUs = append(node.GPUs, pg)
		}
		snap.Nodes = append(snap.Nodes, node)
	}
	for _, id := range s.pending {
		p, ok := st.pods[id]
		if !ok {
			c := s.claims[id]
			p = PendingPod(podName(id), c.profile, c.arrive)
			st.pods[id] = p
		}
		snap.Pending = append(snap.Pending, p)
	}
	return snap
}

func (st *miglayoutStrategy) decide(s *sim) error {
	if !s.planBindsScheduler {
		if err := st.schedule(s); err != nil {
			return err
		}
	}
	snap := st.snapshot(s)
	st.plans++
	res, err := planner.Plan(context.Background(), snap)
	if err != nil {
		return fmt.Errorf("planning: %w", err)
	}
	for _, c := range res.Changes {
		gi, err := st.gpuIndex(s, c.Node, c.GPU)
		if err != nil {
			return err
		}
		if !c.From.Equal(s.gpus[gi].layout) {
			return fmt.Errorf("planner change on %s/%d from %q, but the GPU has %q", c.Node, c.GPU, c.From, s.gpus[gi].layout)
		}
		if err := s.change(gi, c.To, false); err != nil {
			return fmt.Errorf("planner change %s/%d %s -> %s: %w", c.Node, c.GPU, c.From, c.To, err)
		}
	}
	for _, pl := range res.Served {
		id, err := strconv.Atoi(strings.TrimPrefix(strings.TrimPrefix(pl.Pod, "default/"), "claim-"))
		if err != nil {
			return fmt.Errorf("planner served unknown pod %s", pl.Pod)
		}
		if len(pl.Devices) != 1 {
			return fmt.Errorf("planner gave pod %s %d devices", pl.Pod, len(pl.Devices))
		}
		gpuIdx, d, err := parseDevice(s.model, pl.Devices[0])
		if err != nil {
			return err
		}
		gi, err := st.gpuIndex(s, pl.Node, gpuIdx)
		if err != nil {
			return err
		}
		if err := s.assign(id, gi, d); err != nil {
			return fmt.Errorf("planner placement %s -> %s %s: %w", pl.Pod, pl.Node, pl.Devices[0], err)
		}
	}
	return nil
}

// schedule is kube-scheduler's part, which comes before any plan: each
// pending claim, in arrival order, that a published free device of its
// profile satisfies (one that exists, is ready and no claim holds or
// waits for) is allocated one at once, whatever the plan would keep. The
// scheduler scores nodes alike (DRA devices add nothing to a node's score),
// so the node is one of those with such a device, picked by
// schedulerNode (kube-scheduler picks at random among equal scores); on it the
// allocator takes the first such device in publication order
// (slices.SortDevices: least room lost, mig.Model.RoomLost, then GPU
// index, then placement start).
func (st *miglayoutStrategy) schedule(s *sim) error {
	for _, id := range slices.Clone(s.pending) {
		profile := s.claims[id].profile
		var nodes []int
		first := map[int]*simGPU{}
		firstDev := map[int]mig.Device{}
		lost := map[int][]int{}
		for _, g := range s.gpus {
			for _, d := range g.layout {
				if _, held := g.owner[d]; held || d.Profile != profile || g.ready[d] > s.now {
					continue
				}
				r := s.model.RoomLost(d)
				if _, seen := first[g.node]; !seen {
					nodes = append(nodes, g.node)
				} else if slices.Compare(r, lost[g.node]) >= 0 {
					continue
				}
				first[g.node], firstDev[g.node], lost[g.node] = g, d, r
			}
		}
		if len(nodes) == 0 {
			continue
		}
		n := schedulerNode(id, nodes)
		if err := s.assign(id, first[n].idx, firstDev[n]); err != nil {
			return fmt.Errorf("scheduling claim %d: %w", id, err)
		}
	}
	return nil
}

func (st *miglayoutStrategy) gpuIndex(s *sim, node string, local int) (int, error) {
	n, err := strconv.Atoi(strings.TrimPrefix(node, "node-"))
	if err != nil || n < 0 || n >= len(st.nodes) || local < 0 || local >= s.perNode {
		return 0, fmt.Errorf("planner named unknown GPU %s/%d", node, local)
	}
	return n*s.perNode + local, nil
}

// parseDevice reads a MIG device name (slices.MIGDeviceName).
func parseDevice(m *mig.Model, name string) (int, mig.Device, error) {
	parts := strings.Split(name, "-")
	if len(parts) != 6 || parts[0] != "gpu" || parts[2] != "mig" {
		return 0, mig.Device{}, fmt.Errorf("device name %q is not a MIG device name", name)
	}
	gpuIdx, err1 := strconv.Atoi(parts[1])
	id, err2 := strconv.Atoi(parts[4])
	start, err3 := strconv.Atoi(parts[5])
	if err1 != nil || err2 != nil || err3 != nil {
		return 0, mig.Device{}, fmt.Errorf("device name %q is not a MIG device name", name)
	}
	p := m.ProfileByID(id)
	if p == nil {
		return 0, mig.Device{}, fmt.Errorf("device name %q: no profile with ID %d on %s", name, id, m.Name)
	}
	if migslices.MIGDeviceName(gpuIdx, p.Name, p.ID, start) != name {
		return 0, mig.Device{}, fmt.Errorf("device name %q does not name %s@%d", name, p.Name, start)
	}
	return gpuIdx, mig.Device{Profile: p.Name, Start: start}, nil
}
