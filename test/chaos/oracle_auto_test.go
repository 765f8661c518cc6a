package chaos

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/textlogger"

	"github.com/miglayout/miglayout/api/v1alpha1"
	"github.com/miglayout/miglayout/pkg/mig"
	"github.com/miglayout/miglayout/pkg/mig/nvmlsim"
	"github.com/miglayout/miglayout/test/cluster"
	"github.com/miglayout/miglayout/test/cluster/clustertest"
)

// TestAutoResultFailed: each invariant count alone fails a result; an allocation on a
// tainted device and the observations do not.
func TestAutoResultFailed(t *testing.T) {
	for name, tc := range map[string]struct {
		r    AutoResult
		want bool
	}{
		"clean":                         {r: AutoResult{Pods: 9, Served: 9, Destroyed: 4, Unused: 2, Unpacked: 1, Plans: 3, Reverts: 1}},
		"an allocated device destroyed": {r: AutoResult{AllocatedDestroyed: 1}, want: true},
		"a device destroyed undrained":  {r: AutoResult{UndrainedDestroyed: 1}, want: true},
		"an allocation unpublished":     {r: AutoResult{PoolAllocAnomalies: 1}, want: true},
		"pool ≠ NVML":                   {r: AutoResult{PoolMismatch: 1}, want: true},
		"leaked":                        {r: AutoResult{Leaked: 1}, want: true},
		"a stuck pod":                   {r: AutoResult{Stuck: 1}, want: true},
		"a stage not settled":           {r: AutoResult{NotConverged: 1}, want: true},
		"an allocation on a tainted device (observed)": {r: AutoResult{TaintedAllocations: 1}},
	} {
		t.Run(name, func(t *testing.T) {
			if tc.r.Served == 0 && tc.r.DestroyedPerServed() != 0 {
				t.Errorf("nothing served: %.2f destroyed per pod served, want 0", tc.r.DestroyedPerServed())
			}
			if got := tc.r.Failed(); got != tc.want {
				t.Errorf("Failed() %v, want %v", got, tc.want)
			}
		})
	}
}

// TestWriteAutoTableTotals: the table's "all" row sums every count column.
func TestWriteAutoTableTotals(t *testing.T) {
	sc := &AutoScenario{Seed: 1}
	a := &AutoResult{Scenario: sc, Pods: 3, Served: 2, Destroyed: 4, Unused: 1, Plans: 2, Reverts: 1, Stuck: 1, Unpacked: 1, AllocatedDestroyed: 1, UndrainedDestroyed: 7, PoolAllocAnomalies: 2, TaintedAllocations: 3, PoolMismatch: 4, Leaked: 5, NotConverged: 6,
		Faults: []FaultResult{{Fault: Fault{Kind: FaultKind("kill")}, Fired: true}, {Fault: Fault{Kind: FaultKind("stall")}}, {Fault: Fault{Kind: FaultKind("kill")}, Fired: true}}}
	b := &AutoResult{Scenario: &AutoScenario{Seed: 2}, Pods: 10, Served: 20, Destroyed: 30, Unused: 40, Plans: 50, Reverts: 60, Stuck: 70, Unpacked: 80, AllocatedDestroyed: 90, UndrainedDestroyed: 150, PoolAllocAnomalies: 100, TaintedAllocations: 110, PoolMismatch: 120, Leaked: 130, NotConverged: 140}
	var buf bytes.Buffer
	WriteAutoTable(&buf, []*AutoResult{a, b}, time.Second)
	rows := map[string][]string{}
	var header []string
	for _, l := range strings.Split(buf.String(), "\n") {
		cells := strings.Split(l, "|")
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		switch {
		case len(cells) < 5:
		case cells[0] == "seed":
			header = cells
		default:
			rows[cells[0]] = cells
		}
	}
	col := func(row, name string) string {
		for i, h := range header {
			if h == name {
				return rows[row][i]
			}
		}
		t.Fatalf("no column %q in %q", name, header)
		return ""
	}
	for name, want := range map[string]int{"pods": 13, "served": 22, "destroyed": 34, "unused destroyed": 41, "plans": 52, "reverts": 61,
		"stuck": 71, "unpacked": 81, "alloc. destroyed": 91, "destroyed undrained": 157, "alloc. unpublished/withdrawn": 102, "alloc. on tainted": 113,
		"pool≠NVML": 124, "leaked": 135, "not settled": 146} {
		if got := col("all", name); got != fmt.Sprint(want) {
			t.Errorf("all: %s %s, want %d\n%s", name, got, want, buf.String())
		}
	}
	if got := col("1", "struck"); got != "2" {
		t.Errorf("seed 1: struck %s, want 2 (of three faults, two fired)\n%s", got, buf.String())
	}
	if got := col("1", "alloc. destroyed"); got != "1" {
		t.Errorf("seed 1: alloc. destroyed %s, want 1\n%s", got, buf.String())
	}
}

// TestGPUViews: a GPU's devices in use (a claim's allocation, or a process on its GI)
// are pinned, those of another GPU or node are not, and a GPU whose MIG mode is not on
// (or pending off, or lost) fits nothing.
func TestGPUViews(t *testing.T) {
	sim, _ := simState(t, a100, "3g.40gb@0,1g.10gb@4,1g.10gb@5,1g.10gb@6", "3g.40gb@0,1g.10gb@6")
	st := sim.Snapshot()
	// A process on gpu 1's 3g.40gb@0.
	var uuid string
	for _, gi := range st.GPUs[1].GPUInstances {
		if gi.Profile == "3g.40gb" {
			uuid = gi.ComputeInstances[0].UUID
		}
	}
	if _, err := sim.StartProcess(uuid, 100); err != nil {
		t.Fatal(err)
	}
	st = sim.Snapshot()
	if p := st.Processes[0]; p.GPUIndex == p.GIID {
		t.Fatalf("the test needs a process whose GI ID %d differs from its GPU index", p.GIID)
	}
	claimed := sets.New(devName(t, st, 0, "1g.10gb@6"))
	for name, tc := range map[string]struct {
		edit   func(st *nvmlsim.State)
		inUse  map[string]sets.Set[string]
		pinned []string // per GPU
		migOn  []bool
	}{
		"claims and processes":        {inUse: map[string]sets.Set[string]{"n": claimed}, pinned: []string{"1g.10gb@6", "3g.40gb@0"}, migOn: []bool{true, true}},
		"claims of another node":      {inUse: map[string]sets.Set[string]{"m": claimed}, pinned: []string{"", "3g.40gb@0"}, migOn: []bool{true, true}},
		"a lost GPU":                  {edit: func(st *nvmlsim.State) { st.GPUs[0].Lost = true }, pinned: []string{"", "3g.40gb@0"}, migOn: []bool{false, true}},
		"MIG pending off":             {edit: func(st *nvmlsim.State) { st.GPUs[1].MIGPending = false }, pinned: []string{"", "3g.40gb@0"}, migOn: []bool{true, false}},
		"MIG pending on, current off": {edit: func(st *nvmlsim.State) { st.GPUs[1].MIGCurrent = false }, pinned: []string{"", "3g.40gb@0"}, migOn: []bool{true, false}},
	} {
		t.Run(name, func(t *testing.T) {
			s := st
			s.GPUs = append([]nvmlsim.GPU(nil), st.GPUs...)
			if tc.edit != nil {
				tc.edit(&s)
			}
			views, err := gpuViews(map[string]nvmlsim.State{"n": s}, tc.inUse)
			if err != nil {
				t.Fatal(err)
			}
			for i, v := range views {
				if v.Pinned.String() != tc.pinned[i] && !(tc.pinned[i] == "" && len(v.Pinned) == 0) {
					t.Errorf("gpu %d pinned %q, want %q", i, v.Pinned, tc.pinned[i])
				}
				if v.MIGOn != tc.migOn[i] {
					t.Errorf("gpu %d MIG on %v, want %v", i, v.MIGOn, tc.migOn[i])
				}
				if !v.MIGOn && v.fitsBeside("1g.10gb") {
					t.Errorf("gpu %d, MIG not on, fits a 1g.10gb", i)
				}
			}
		})
	}
}

// TestFitsBeside: a device fits beside the pinned ones where a free placement exists
// (the free devices destroyed as needed), not over a pinned one, not of a profile the
// model lacks, not on a placement kept for another pod.
func TestFitsBeside(t *testing.T) {
	for name, tc := range map[string]struct {
		pinned, profile string
		avoid           []mig.Placement
		want            bool
	}{
		"free GPU, whole":                         {profile: "7g.80gb", want: true},
		"beside 3g.40gb@4, a 4g.40gb":             {pinned: "3g.40gb@4", profile: "4g.40gb", want: true},
		"beside 3g.40gb@4, a whole GPU":           {pinned: "3g.40gb@4", profile: "7g.80gb"},
		"beside 4g.40gb@0, another 4g.40gb":       {pinned: "4g.40gb@0", profile: "4g.40gb"},
		"a profile of another model":              {profile: "1g.12gb"},
		"beside 1g.10gb@0, a 4g.40gb (only at 0)": {pinned: "1g.10gb@0", profile: "4g.40gb"},
		"the only room kept for another pod":      {pinned: "4g.40gb@0", profile: "3g.40gb", avoid: []mig.Placement{{Start: 4, Size: 4}}},
		"room clear of the placement kept":        {pinned: "4g.40gb@0", profile: "1g.10gb", avoid: []mig.Placement{{Start: 4, Size: 1}}, want: true},
	} {
		t.Run(name, func(t *testing.T) {
			g := a100View(t, "n", 0, tc.pinned)
			if got := g.fitsAvoiding(tc.profile, tc.avoid); got != tc.want {
				t.Errorf("fits %v, want %v", got, tc.want)
			}
		})
	}
}

// TestPlannedBefore: the planner takes higher priority first, then larger, and of
// one priority and size, either may be taken first (each may keep a placement the other
// must avoid).
func TestPlannedBefore(t *testing.T) {
	for name, tc := range map[string]struct {
		q, p autoPod
		want bool
	}{
		"higher priority, smaller": {q: autoPod{Profile: "1g.10gb", Priority: AutoPriority}, p: autoPod{Profile: "7g.80gb"}, want: true},
		"lower priority, larger":   {q: autoPod{Profile: "7g.80gb"}, p: autoPod{Profile: "1g.10gb", Priority: AutoPriority}},
		"same priority, larger":    {q: autoPod{Profile: "4g.40gb"}, p: autoPod{Profile: "3g.40gb"}, want: true},
		"same priority, smaller":   {q: autoPod{Profile: "3g.40gb"}, p: autoPod{Profile: "4g.40gb"}},
		"same priority and size":   {q: autoPod{Profile: "4g.40gb"}, p: autoPod{Profile: "4g.40gb"}, want: true},
	} {
		t.Run(name, func(t *testing.T) {
			if got := plannedBefore(tc.q, tc.p); got != tc.want {
				t.Errorf("planned before %v, want %v", got, tc.want)
			}
		})
	}
}

// TestJudgePendingKeepers: only a blocked pod of 3 compute slices or more, planned
// before, may keep a placement that excuses a later pod; one that fits now, or a smaller
// one, excuses nothing.
func TestJudgePendingKeepers(t *testing.T) {
	for name, tc := range map[string]struct {
		pinned  string
		pending []autoPod
		stuck   []string
	}{
		"a large pod that fits now keeps nothing": {pending: []autoPod{{Name: "big", Profile: "4g.40gb"}, {Name: "small", Profile: "1g.10gb"}}, stuck: []string{"big", "small"}},
		"a blocked 3g.40gb may keep a placement":  {pinned: "1g.10gb@0,1g.10gb@4", pending: []autoPod{{Name: "three", Profile: "3g.40gb"}, {Name: "small", Profile: "1g.10gb"}}},
		"a blocked 2g.20gb keeps none":            {pinned: "1g.10gb@0,1g.10gb@2,1g.10gb@4,1g.10gb@6", pending: []autoPod{{Name: "two", Profile: "2g.20gb"}, {Name: "small", Profile: "1g.10gb"}}, stuck: []string{"small"}},
	} {
		t.Run(name, func(t *testing.T) {
			j := judgePending(tc.pending, []gpuView{a100View(t, "n", 0, tc.pinned)}, nil)
			if got := strings.Join(slices.Sorted(maps.Keys(j.Stuck)), ","); got != strings.Join(tc.stuck, ",") {
				t.Errorf("stuck %q, want %q: %+v", got, tc.stuck, j)
			}
		})
	}
	on, off := a100View(t, "n", 0, ""), a100View(t, "n", 1, "")
	off.MIGOn = false
	if holdTogether([]autoPod{{Profile: "7g.80gb"}, {Profile: "7g.80gb"}}, []gpuView{on, off}) {
		t.Error("a GPU whose MIG is off holds no 7g.80gb")
	}
}

// TestPendingAndGPUs: pending are the scenario's pods not bound, not being deleted, whose
// claim is not allocated; pods and claims being deleted are counted.
func TestPendingAndGPUs(t *testing.T) {
	now := metav1.Now()
	pod := func(name, node string, deleting bool) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"}, Spec: corev1.PodSpec{NodeName: node}}
		if deleting {
			p.DeletionTimestamp, p.Finalizers = &now, []string{"x"}
		}
		return p
	}
	claim := func(name string, allocated, deleting bool) *resourceapi.ResourceClaim {
		c := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"}}
		if allocated {
			c.Status.Allocation = &resourceapi.AllocationResult{}
		}
		if deleting {
			c.DeletionTimestamp, c.Finalizers = &now, []string{"x"}
		}
		return c
	}
	objs := []runtime.Object{
		pod("pending", "", false), claim("pending", false, false),
		pod("bound", "n", false), claim("bound", true, false),
		pod("allocated", "", false), claim("allocated", true, false),
		pod("leaving", "", true), claim("leaving", false, true),
		pod("stranger", "", false),
		pod("bound-claim-gone", "n", false),
	}
	r := &Runner{Env: &Env{Env: &clustertest.Env{Client: fake.NewClientset(objs...)}}, Namespace: "ns"}
	pods := map[string]autoPod{}
	for _, n := range []string{"pending", "bound", "allocated", "leaving", "bound-claim-gone"} {
		pods[n] = autoPod{Name: n, Profile: "1g.10gb"}
	}
	pending, _, deleting, err := r.pendingAndGPUs(context.Background(), pods)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range pending {
		names = append(names, p.Name)
	}
	if strings.Join(names, ",") != "pending" || deleting != 2 {
		t.Errorf("pending %v, deleting %d; want [pending], 2", names, deleting)
	}
}

// TestInUseFrom: a device is in use where a claim's allocation by this driver names it
// in the node's pool, or a process runs on it.
func TestInUseFrom(t *testing.T) {
	sim, _ := simState(t, a100, "3g.40gb@0,1g.10gb@6")
	st := sim.Snapshot()
	name3g := devName(t, st, 0, "3g.40gb@0")
	if _, err := sim.StartProcess(clustertest.NVMLDevices(st)[name3g], 10); err != nil {
		t.Fatal(err)
	}
	st = sim.Snapshot()
	alloc := func(pool, driver, dev string) resourceapi.ResourceClaim {
		return resourceapi.ResourceClaim{Status: resourceapi.ResourceClaimStatus{Allocation: &resourceapi.AllocationResult{
			Devices: resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{{Driver: driver, Pool: pool, Device: dev}}}}}}
	}
	name1g := devName(t, st, 0, "1g.10gb@6")
	got := inUseFrom(map[string]nvmlsim.State{"n": st, "m": {}}, []resourceapi.ResourceClaim{
		alloc("n", cluster.Driver, name1g),
		alloc("n", "gpu.nvidia.com", "gpu-0-other"),
		alloc("elsewhere", cluster.Driver, "gpu-0-elsewhere"),
		{},
	})
	if want := sets.New(name1g, name3g); !got["n"].Equal(want) || got["m"].Len() != 0 || len(got) != 2 {
		t.Errorf("in use %v, want n: %v, m: none", got, sets.List(want))
	}
}

// eventLine is the controller's log line of an event it emitted (the events library
// logs each one through klog).
func eventLine(t *testing.T, ns, pod, reason, note string) string {
	t.Helper()
	var buf bytes.Buffer
	// controller-runtime logs events under the manager's logger named "events".
	l := textlogger.NewLogger(textlogger.NewConfig(textlogger.Output(&buf))).WithName("events")
	l.Info("Event occurred", "object", klog.KRef(ns, pod), "kind", "Pod", "apiVersion", "v1", "type", "Normal", "reason", reason, "action", "Plan", "note", note)
	return buf.String()
}

// TestParseKeptPlacements: the last planner note of each pod of the namespace says
// which placement is kept for it (none where it takes the first room that frees up;
// unknown where the last note is of another kind).
func TestParseKeptPlacements(t *testing.T) {
	const waiting = "no GPU can take it now without destroying a device in use or changing more GPUs at once than the policy allows"
	kept := func(lo, hi int, node string, gpu int) string {
		return fmt.Sprintf(`%s; memory slices %d-%d of %s/gpu-%d (where a 4g.40gb goes) are kept for it: miglayout makes no device there for another pod (kube-scheduler may still give one a device free there already)`, waiting, lo, hi, node, gpu)
	}
	log := strings.Join([]string{
		eventLine(t, "ns", "a", "WaitingForCapacity", kept(0, 3, "chaos-a100", 1)),
		eventLine(t, "other", "b", "WaitingForCapacity", kept(0, 7, "chaos-a100", 0)),
		eventLine(t, "ns", "c", "WaitingForCapacity", kept(0, 7, "chaos-a100", 0)),
		eventLine(t, "ns", "c", "WaitingForRepartition", "waiting for the repartition of chaos-a100/gpu-0"),
		eventLine(t, "ns", "d", "WaitingForCapacity", waiting+"; it takes the first room that frees up"),
		eventLine(t, "ns", "e", "WaitingForCapacity", kept(4, 7, "chaos-h100", 0)),
		eventLine(t, "ns", "e", "Scheduled", "bound"),
		eventLine(t, "ns", "f", "WaitingForSharedClaim", "it takes the first room that frees up"),
		eventLine(t, "ns", "g", "NotServableByAutoMode", kept(2, 3, "chaos-a100", 0)),
		eventLine(t, "ns", "h", "WaitingForCapacity", waiting+"; it takes the first room that frees up"),
		eventLine(t, "ns", "h", "WaitingForRepartition", "waiting for the repartition of chaos-a100/gpu-0; it takes the first room that frees up"),
	}, "")
	got := parseKeptPlacements([]byte(log), "ns")
	want := map[string]keptPlacement{
		"a": {Node: "chaos-a100", GPU: 1, Placement: mig.Placement{Start: 0, Size: 4}},
		"d": {},
		"e": {Node: "chaos-h100", GPU: 0, Placement: mig.Placement{Start: 4, Size: 4}},
		"g": {Node: "chaos-a100", GPU: 0, Placement: mig.Placement{Start: 2, Size: 2}},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("kept %v\nwant %v\nfrom:\n%s", got, want, log)
	}
}

// TestCountPlans: a planned change back to a layout the GPU was planned away from is a
// revert; the same layout on another GPU is not.
func TestCountPlans(t *testing.T) {
	line := func(node string, gpu int, from, to string) string {
		return fmt.Sprintf(`I0101 00:00:00.000000 1 x.go:1] "Planned GPU layout" logger="auto" node="%s" gpu=%d from="%s" to="%s"`+"\n", node, gpu, from, to)
	}
	log := line("n", 0, "A", "B") + line("n", 1, "B", "A") + line("n", 0, "B", "C") + line("n", 0, "C", "A") + line("m", 0, "C", "D")
	if plans, reverts := countPlans([]byte(log)); plans != 5 || reverts != 1 {
		t.Errorf("plans %d, reverts %d; want 5, 1", plans, reverts)
	}
}

// TestRaceTally: each finding counts in its own column (an allocated device destroyed
// in Destroyed only); Blocked before any drain and the flip completed are read from the
// GPU's status.
func TestRaceTally(t *testing.T) {
	var c RaceCell
	status := func(phase v1alpha1.GPUPhase, layout string) *v1alpha1.NodeMigLayout {
		return &v1alpha1.NodeMigLayout{Status: v1alpha1.NodeMigLayoutStatus{GPUs: []v1alpha1.GPUStatus{{Index: 0, Phase: phase, Layout: layout}}}}
	}
	c.tally(0, 0, status(v1alpha1.PhaseBlocked, raceFrom), []Finding{
		{Kind: AllocatedDestroyed}, {Kind: TaintedAllocation, Lag: 30 * time.Millisecond}, {Kind: TaintedAllocation, Lag: 10 * time.Millisecond},
		{Kind: RefusedAllocation}, {Kind: RefusedAllocation}, {Kind: UnpublishedAllocation}, {Kind: WithdrawnAllocated}, {Kind: WithdrawnAllocated},
		{Kind: UndrainedDestroyed},
	})
	c.tally(1, 1, status(v1alpha1.PhaseBlocked, raceFrom), nil)
	c.tally(2, 1, status(v1alpha1.PhaseReady, raceTo), nil)
	c.tally(3, 1, status(v1alpha1.PhaseReady, raceFrom), nil)
	got := fmt.Sprintf("destroyed %d, undrained %d, in flight %d, refused %d, unpublished %d, blocked before %d, completed %d, max lag %s, details %d",
		c.Destroyed, c.Undrained, c.InFlight, c.Refused, c.Unpublished, c.BlockedBefore, c.Completed, c.MaxLag(), len(c.Details))
	if want := "destroyed 1, undrained 1, in flight 2, refused 2, unpublished 3, blocked before 1, completed 1, max lag 30ms, details 9"; got != want {
		t.Errorf("%s\nwant %s", got, want)
	}
}
