package planner

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
)

// planTrace plans nodes and pods with the MIG DeviceClass (and extra
// classes) and returns the trace.
func planTrace(t *testing.T, nodes []Node, pods []Pod, classes ...*resourceapi.DeviceClass) trace {
	t.Helper()
	snap := Snapshot{Driver: driver, Nodes: nodes, Pending: pods, Classes: append([]*resourceapi.DeviceClass{migClass()}, classes...), Now: t0}
	got, err := Plan(context.Background(), snap)
	if err != nil {
		t.Fatal(err)
	}
	return toTrace(got)
}

func checkTrace(t *testing.T, want, got trace) {
	t.Helper()
	if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("plan (-want +got):\n%s", diff)
	}
}

// A single-device claim that selects the GPU's brand (published from what
// the agent reports; it may differ between nodes of one model) is not
// planned on a GPU whose devices the scheduler will not give it.
func TestSingleDeviceBrandIsPerNode(t *testing.T) {
	nodes := []Node{
		node("other").gpu("A100-SXM4-80GB", "", "").brand("Tesla").build(),
		node("nv").gpu("A100-SXM4-80GB", "7g.80gb@0", "7g.80gb@0").build(),
	}
	pods := []Pod{pod("p", 1).claim(profileIs("3g.40gb")+" && device.attributes['mig.miglayout.io'].brand == 'Nvidia'", 1).build()}
	got := planTrace(t, nodes, pods)
	for _, c := range got.Changes {
		t.Errorf("change planned on a GPU whose devices the claim refuses: %s", c)
	}
	for _, s := range got.Served {
		t.Errorf("served where the scheduler cannot allocate: %s", s)
	}
}

// The other way round: a claim for brand 'Tesla' that only the node's real
// brand satisfies is servable there.
func TestSingleDeviceBrandOfNodeServes(t *testing.T) {
	nodes := []Node{node("tesla").gpu("A100-SXM4-80GB", "", "").brand("Tesla").build()}
	pods := []Pod{pod("p", 1).claim(profileIs("3g.40gb")+" && device.attributes['mig.miglayout.io'].brand == 'Tesla'", 1).build()}
	got := planTrace(t, nodes, pods)
	if len(got.Served) != 1 {
		t.Errorf("pod the scheduler can place after a repartition not served: %+v", got)
	}
}

// withUUIDs gives each GPU of n its own UUID, as real GPUs have.
func withUUIDs(n Node) Node {
	for i := range n.GPUs {
		n.GPUs[i].Info.UUID = "GPU-" + n.Node.Name + "-" + itoa(i)
	}
	return n
}

// sameGPU adds to the pod's last claim a constraint that all its devices
// share the attribute attr (e.g. parentUUID).
func (b *podB) sameGPU(attr string) *podB {
	c := b.p.Claims[len(b.p.Claims)-1]
	name := resourceapi.FullyQualifiedName(driver + "/" + attr)
	c.Spec.Devices.Constraints = append(c.Spec.Devices.Constraints, resourceapi.DeviceConstraint{MatchAttribute: &name})
	return b
}

// Two 3g.40gb on one GPU (matchAttribute parentUUID): GPU 0 has room for
// one beside a 4g in use, GPU 1 is empty and takes both once repartitioned
// (one GPU changed, within the default per-node limit). Adding each device
// where it takes the least room splits them, which the constraint refuses;
// the planner then adds them all on one GPU, as the scheduler will
// allocate them.
func TestMatchAttributeSameGPUAddsBothToOneGPU(t *testing.T) {
	nodes := []Node{withUUIDs(node("n1").
		gpu("A100-SXM4-80GB", "4g.40gb@0", "4g.40gb@0").
		gpu("A100-SXM4-80GB", "", "").build())}
	pods := []Pod{pod("pair", 1).claim(profileIs("3g.40gb"), 2).sameGPU("parentUUID").build()}
	checkTrace(t, trace{
		Changes: []string{"n1/1: (empty) -> 3g.40gb@0,3g.40gb@4 serves default/pair"},
		Served:  []string{"default/pair -> n1 gpu-1-mig-3g40gb-9-4, gpu-1-mig-3g40gb-9-0 after change"},
	}, planTrace(t, nodes, pods))
}

// firstAvailableCounts adds a claim with one request whose subrequests ask,
// in order of preference, for counts[i] devices of profiles[i].
func (b *podB) firstAvailableCounts(profiles []string, counts []int64) *podB {
	c := &resourceapi.ResourceClaim{}
	c.Namespace, c.Name = "default", b.p.Pod.Name+"-list"
	req := resourceapi.DeviceRequest{Name: "gpu"}
	for i, p := range profiles {
		req.FirstAvailable = append(req.FirstAvailable, resourceapi.DeviceSubRequest{Name: "s" + itoa(i), DeviceClassName: "mig.miglayout.io",
			AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: counts[i],
			Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: profileIs(p)}}}})
	}
	c.Spec.Devices.Requests = append(c.Spec.Devices.Requests, req)
	b.p.Claims = append(b.p.Claims, c)
	return b
}

// firstAvailable: one 7g.80gb, else two 1g.10gb. An empty A100 serves
// either, and the scheduler allocates once the GPU is repartitioned: the
// planner tries each subrequest with its own count.
func TestFirstAvailableLaterSubrequestCountsMore(t *testing.T) {
	nodes := []Node{node("n1").gpu("A100-SXM4-80GB", "", "").build()}
	pods := []Pod{pod("list", 1).firstAvailableCounts([]string{"7g.80gb", "1g.10gb"}, []int64{1, 2}).build()}
	got := planTrace(t, nodes, pods)
	if len(got.Served) != 1 {
		t.Errorf("a pod an empty GPU can serve is not served: %+v", got)
	}
}

// A toleration with a numeric operator (Gt/Lt): the API server accepts it
// only where the feature gate is on, and kube-scheduler then honours it;
// so does the planner.
func TestNumericTolerationIsHonoured(t *testing.T) {
	n := node("sla").gpu("A100-SXM4-80GB", "", "").build()
	n.Node.Spec.Taints = []corev1.Taint{{Key: "example.com/sla", Value: "950", Effect: corev1.TaintEffectNoSchedule}}
	p := pod("p", 1).claim(profileIs("3g.40gb"), 1).build()
	p.Pod.Spec.Tolerations = []corev1.Toleration{{Key: "example.com/sla", Operator: corev1.TolerationOpGt, Value: "900", Effect: corev1.TaintEffectNoSchedule}}
	got := planTrace(t, []Node{n}, []Pod{p})
	if len(got.Served) != 1 {
		t.Errorf("pod that tolerates the node's taint (950 > 900) not served: %+v", got)
	}
}

// The same without any constraint: under the default limit of one GPU
// changed per node, the first 3g.40gb would go beside the 4g in use and
// the second find no GPU it may change; repartitioning GPU 1 alone serves
// the pod.
func TestCountTwoUnderPerNodeLimitUsesOneGPU(t *testing.T) {
	nodes := []Node{node("n1").
		gpu("A100-SXM4-80GB", "4g.40gb@0", "4g.40gb@0").
		gpu("A100-SXM4-80GB", "", "").build()}
	pods := []Pod{pod("pair", 1).claim(profileIs("3g.40gb"), 2).build()}
	checkTrace(t, trace{
		Changes: []string{"n1/1: (empty) -> 3g.40gb@0,3g.40gb@4 serves default/pair"},
		Served:  []string{"default/pair -> n1 gpu-1-mig-3g40gb-9-4, gpu-1-mig-3g40gb-9-0 after change"},
	}, planTrace(t, nodes, pods))
}

// Two pods share one claim for a 7g.80gb that no GPU can take now: the
// claim gets one allocation, so one placement is kept for it, and both pods
// wait on it.
func TestSharedClaimKeepsOnePlacement(t *testing.T) {
	nodes := []Node{node("n1").policy(Policy{MaxGPUsPerNode: 2}).
		gpu("A100-SXM4-80GB", "1g.10gb@0", "1g.10gb@0").
		gpu("A100-SXM4-80GB", "1g.10gb@0", "1g.10gb@0").build()}
	pods := []Pod{
		pod("a", 3).sharedClaim("shared", profileIs("7g.80gb")).build(),
		pod("b", 2).sharedClaim("shared", profileIs("7g.80gb")).build(),
	}
	got := planTrace(t, nodes, pods)
	if len(got.Kept) != 2 || got.Kept["default/a"] != got.Kept["default/b"] {
		t.Errorf("kept %v, want both pods waiting on one placement", got.Kept)
	}
}
