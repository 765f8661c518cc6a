package chaos

import (
	"fmt"
	"maps"
	"math/rand"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/miglayout/miglayout/api/v1alpha1"
	"github.com/miglayout/miglayout/pkg/mig"
)

// FaultKind is one kind of injected fault.
type FaultKind string

// The faults. Kill faults SIGKILL the node's agent at a journal step (and start it again
// after a random delay); NVML faults are nvmlsim Faults (a return code, or Lie: report
// success and do nothing); the others act on NVML timing, the API server or the
// scheduler.
const (
	FaultNone FaultKind = "none"
	// The agent killed while the journal shows the step.
	KillDraining   FaultKind = "kill@Draining"
	KillDestroying FaultKind = "kill@Destroying"
	KillCreating   FaultKind = "kill@Creating"
	KillMIGMode    FaultKind = "kill@SettingMIGMode"
	// The agent killed while a GPU instance has no compute instance (between GI and
	// CI create, or between CI and GI destroy).
	KillOrphanGI FaultKind = "kill@GI-without-CI"
	// The agent killed while it waits inside an NVML call (the simulator lock held).
	KillInFlight FaultKind = "kill@NVML-call-in-flight"
	// NVML return codes.
	NVMLGIDestroyInUse     FaultKind = "nvml:GI.Destroy=IN_USE"
	NVMLCIDestroyInUse     FaultKind = "nvml:CI.Destroy=IN_USE"
	NVMLCreateGIInsuff     FaultKind = "nvml:CreateGI=INSUFFICIENT_RESOURCES"
	NVMLCreateCIFails      FaultKind = "nvml:CreateCI fails after GI create"
	NVMLCreateCIRollbackFa FaultKind = "nvml:CreateCI and its GI rollback fail"
	NVMLSetMIGModeFails    FaultKind = "nvml:SetMigMode=UNKNOWN"
	NVMLGIDestroyFails     FaultKind = "nvml:GI.Destroy=UNKNOWN" // part of NVMLCreateCIRollbackFa
	NVMLReadFails          FaultKind = "nvml:read op=UNKNOWN"
	// NVML calls that report success and do nothing.
	NVMLLieGIDestroy FaultKind = "nvml:GI.Destroy lies"
	NVMLLieCIDestroy FaultKind = "nvml:CI.Destroy lies"
	NVMLLieCreateCI  FaultKind = "nvml:CreateCI lies"
	NVMLLieCreateGI  FaultKind = "nvml:CreateGI lies"
	// NVML stalls (every call blocks) for a while during the repartition: a timeout.
	NVMLStall FaultKind = "nvml:stall 0.5-2.5s"
	// Concurrent writers bump the NodeMigLayouts' and the MigLayout's
	// resourceVersion every few ms (status and spec updates conflict).
	APIConflicts FaultKind = "api:concurrent writers"
	// kube-scheduler stopped (SIGSTOP) for 0.2-0.8 s during the churn: decisions it took
	// before land late, but within the chaos nodes' settle period (1 s).
	SlowScheduler FaultKind = "scheduler:stalled 0.2-0.8s"
	// miglayout-controller killed (SIGKILL) at Delay into the churn, or as soon after as
	// a chaos node's agent has work in flight, and started again after Hold; the new
	// process takes over once the killed one's Lease expires (15 s). Auto scenarios
	// only: its plans and the changes in flight must survive the restart.
	KillController FaultKind = "kill controller"
	// The chaos MigLayout paused (spec.paused) at Delay into the churn for Hold, Nth
	// times with Hold between, and resumed at the end: changes not started are
	// dropped, changes under way finish, and once resumed the layout (or the
	// planner) takes over again. Drawn apart from the other faults (pauseFault).
	PauseFlap FaultKind = "api:paused and resumed"
	// The node's stand-in kubelet restarted at the agent's first step of work
	// (draining, destroying, creating) from Delay into the churn, or once the
	// churn is over and the agent idle: pods keep running, their claims stay
	// prepared, the node's ResourceSlices are deleted (as kubelet 1.37 does at
	// its start) and the agent's plugin registers again. The agent must
	// publish the pool again as it was, allocated devices with their UUIDs,
	// and go on with its work (see PoolAbsence).
	RestartKubelet FaultKind = "kubelet:restarted"
	// The agent killed while draining and started again only after the kubelet's
	// wipe delay (ChaosWipeDelay) has passed: the kubelet, which found no plugin of
	// the driver for that long, has deleted the node's ResourceSlices. The new agent
	// must publish the pool again from NVML and its journal, allocated devices with
	// their UUIDs, and finish the change.
	KillPastWipe FaultKind = "kill@Draining, down past the kubelet's wipe"
)

// PrimaryFaults are the scenarios' main faults: a scenario's seed modulo their number
// picks one. New ones go at the end (see NewScenarioOf).
var PrimaryFaults = []FaultKind{
	FaultNone, KillDraining, KillDestroying, KillCreating, KillMIGMode, KillOrphanGI, KillInFlight,
	NVMLGIDestroyInUse, NVMLCIDestroyInUse, NVMLCreateGIInsuff, NVMLCreateCIFails, NVMLCreateCIRollbackFa,
	NVMLSetMIGModeFails, NVMLReadFails, NVMLLieGIDestroy, NVMLLieCIDestroy, NVMLLieCreateCI, NVMLLieCreateGI,
	NVMLStall, APIConflicts, SlowScheduler, RestartKubelet, KillPastWipe,
}

// SecondaryFaults may be added to a scenario (30%) on top of its main fault.
var SecondaryFaults = []FaultKind{APIConflicts, SlowScheduler, NVMLStall, NVMLReadFails, KillDraining}

// Fault is one fault of a scenario.
type Fault struct {
	Kind FaultKind
	Node string
	// Nth is the NVML call that fails (1 = the next), for NVML faults.
	Nth int
	// Op is the read operation of NVMLReadFails.
	Op string
	// Done is how many devices of the journal's list must be done before a
	// kill@Destroying/Creating fires (capped to the list's length - 1).
	Done int
	// Delay: the restart delay after a kill; the offset into the churn of a scheduler stall.
	Delay time.Duration
	// Hold: how long an NVML or scheduler stall lasts.
	Hold time.Duration
}

func (f Fault) String() string {
	s := string(f.Kind)
	switch {
	case f.Kind == FaultNone || f.Kind == SlowScheduler || f.Kind == APIConflicts || f.Kind == KillController || f.Kind == PauseFlap:
	default:
		s += " on " + f.Node
	}
	switch f.Kind {
	case NVMLReadFails:
		s += fmt.Sprintf(" (%s, call %d)", f.Op, f.Nth)
	case NVMLGIDestroyInUse, NVMLCIDestroyInUse, NVMLCreateGIInsuff, NVMLCreateCIFails, NVMLSetMIGModeFails,
		NVMLLieGIDestroy, NVMLLieCIDestroy, NVMLLieCreateCI, NVMLLieCreateGI:
		s += fmt.Sprintf(" (call %d)", f.Nth)
	case KillDestroying, KillCreating:
		s += fmt.Sprintf(" (after %d done, restart after %s)", f.Done, f.Delay)
	case KillDraining, KillMIGMode, KillOrphanGI, KillInFlight:
		s += fmt.Sprintf(" (restart after %s)", f.Delay)
	case NVMLStall:
		s += fmt.Sprintf(" (%s)", f.Hold)
	case SlowScheduler:
		s += fmt.Sprintf(" (%s at +%s)", f.Hold, f.Delay)
	case KillController:
		s += fmt.Sprintf(" (at +%s, restart after %s)", f.Delay, f.Hold)
	case PauseFlap:
		s += fmt.Sprintf(" (%d× %s from +%s)", f.Nth, f.Hold, f.Delay)
	}
	return s
}

// pauseFault is a PauseFlap drawn, with probability 0.2, from its own source (seed and
// salt): the rest of a seed's scenario is what it was before pauses were drawn. The
// first pause starts within the first half of window; 1-3 pauses of a drawn length
// (within hold) each, with as long between them.
func pauseFault(seed, salt int64, window time.Duration, hold [2]time.Duration) (Fault, bool) {
	rng := rand.New(rand.NewSource(seed ^ salt))
	if rng.Float64() >= 0.2 {
		return Fault{}, false
	}
	return Fault{Kind: PauseFlap, Delay: dur(rng, 0, window/2), Hold: dur(rng, hold[0], hold[1]), Nth: 1 + rng.Intn(3)}, true
}

// WorkloadOp creates a claim and its pod, or deletes one created before.
type WorkloadOp struct {
	At     time.Duration // offset into the churn
	Create bool
	Node   string
	CEL    string // "" = any MIG device
	Victim int    // delete: index into the workloads created so far (modulo)
}

// ChurnWindow is how long a scenario's layout changes and claim churn last.
const ChurnWindow = 2 * time.Second

// Scenario is one seeded chaos run: from Base (explicit placements), change the chaos
// nodes' layouts to Change (and, sometimes, to Second during the churn) while claims come
// and go and the faults strike.
type Scenario struct {
	Seed     int64
	Base     v1alpha1.MigLayoutSpec
	Change   v1alpha1.MigLayoutSpec
	Second   *v1alpha1.MigLayoutSpec
	SecondAt time.Duration
	Pre      []WorkloadOp // created before the change
	Churn    []WorkloadOp
	Faults   []Fault
}

var (
	layoutsOnce sync.Once
	maximal     map[string][]mig.Layout
	models      map[string]*mig.Model
)

func catalogLayouts() {
	layoutsOnce.Do(func() {
		maximal, models = map[string][]mig.Layout{}, map[string]*mig.Model{}
		for _, name := range []string{a100, h100} {
			m, err := mig.DefaultCatalog().Model(name)
			if err != nil {
				panic(err)
			}
			models[name] = m
			maximal[name] = m.MaximalLayouts()
		}
	})
}

// randomLayout is a random valid layout of a model: a maximal layout with some devices
// left out (at least one kept).
func randomLayout(rng *rand.Rand, model string) mig.Layout {
	catalogLayouts()
	ls := maximal[model]
	l := ls[rng.Intn(len(ls))]
	var out mig.Layout
	for _, d := range l {
		if rng.Float64() < 0.75 {
			out = append(out, d)
		}
	}
	if len(out) == 0 {
		out = mig.Layout{l[rng.Intn(len(l))]}
	}
	return out.Canonical()
}

func chaosSelector() metav1.LabelSelector {
	return metav1.LabelSelector{MatchLabels: map[string]string{roleLabel: "chaos"}}
}

// baseSpec: explicit placements per product (MIG off now and then).
func baseSpec(rng *rand.Rand) v1alpha1.MigLayoutSpec {
	spec := v1alpha1.MigLayoutSpec{NodeSelector: chaosSelector(), Mode: v1alpha1.ModeStatic}
	for _, model := range []string{a100, h100} {
		r := v1alpha1.LayoutRule{Name: "base-" + strings.ToLower(model[:4]), ProductName: model}
		if rng.Float64() < 0.1 {
			r.MIGEnabled = ptr.To(false)
		} else {
			r.Layout = ptr.To(randomLayout(rng, model).String())
		}
		spec.Rules = append(spec.Rules, r)
	}
	return spec
}

// changeSpec: per product counts (the controller places them around devices in use) or
// explicit placements, MIG off now and then, and sometimes a rule for A100 GPU 1 alone.
func changeSpec(rng *rand.Rand, tag string) v1alpha1.MigLayoutSpec {
	spec := v1alpha1.MigLayoutSpec{NodeSelector: chaosSelector(), Mode: v1alpha1.ModeStatic}
	rule := func(name, model string) v1alpha1.LayoutRule {
		r := v1alpha1.LayoutRule{Name: name, ProductName: model}
		switch x := rng.Float64(); {
		case x < 0.08:
			r.MIGEnabled = ptr.To(false)
		case x < 0.55:
			counts := map[string]int32{}
			for p, n := range randomLayout(rng, model).Counts() {
				counts[p] = int32(n)
			}
			r.Profiles = counts
		default:
			r.Layout = ptr.To(randomLayout(rng, model).String())
		}
		return r
	}
	if rng.Float64() < 0.3 {
		r := rule(tag+"-a100-gpu1", a100)
		r.GPUIndices = []int32{1}
		spec.Rules = append(spec.Rules, r)
	}
	spec.Rules = append(spec.Rules, rule(tag+"-a100", a100), rule(tag+"-h100", h100))
	return spec
}

// profilesOf lists the profiles a spec's rules give a node's GPUs.
func profilesOf(spec v1alpha1.MigLayoutSpec, model string) []string {
	set := map[string]bool{}
	for _, r := range spec.Rules {
		if r.ProductName != model {
			continue
		}
		for p := range r.Profiles {
			set[p] = true
		}
		if r.Layout != nil {
			l, _ := mig.ParseLayout(*r.Layout)
			for _, d := range l {
				set[d.Profile] = true
			}
		}
	}
	return slices.Sorted(maps.Keys(set))
}

func nodeModel(node string) string {
	if node == ChaosH100 {
		return h100
	}
	return a100
}

func randomCEL(rng *rand.Rand, node string, specs ...v1alpha1.MigLayoutSpec) string {
	var profiles []string
	for _, s := range specs {
		profiles = append(profiles, profilesOf(s, nodeModel(node))...)
	}
	if len(profiles) == 0 || rng.Float64() < 0.2 {
		return ""
	}
	return ProfileSelector(profiles[rng.Intn(len(profiles))])
}

func pick[T any](rng *rand.Rand, xs []T) T { return xs[rng.Intn(len(xs))] }

func dur(rng *rand.Rand, lo, hi time.Duration) time.Duration {
	return lo + time.Duration(rng.Int63n(int64(hi-lo)+1)).Round(10*time.Millisecond)
}

var readOps = []string{"GetGpuInstances", "GetComputeRunningProcesses", "GpuInstance.GetComputeInstances", "GetMigMode", "GpuInstance.GetInfo"}

func randomFault(rng *rand.Rand, kind FaultKind) Fault {
	f := Fault{Kind: kind, Node: pick(rng, []string{ChaosA100, ChaosH100}), Nth: 1 + rng.Intn(3)}
	switch kind {
	case NVMLReadFails:
		f.Op, f.Nth = pick(rng, readOps), 1+rng.Intn(25)
	case NVMLCreateCIFails, NVMLCreateCIRollbackFa, NVMLLieCreateCI, NVMLLieCreateGI:
		f.Nth = 1 + rng.Intn(2)
	case KillDraining, KillDestroying, KillCreating, KillMIGMode, KillOrphanGI, KillInFlight:
		f.Done, f.Delay = rng.Intn(3), dur(rng, 0, 500*time.Millisecond)
	case RestartKubelet:
		f.Delay = dur(rng, 0, 1500*time.Millisecond)
	case KillPastWipe:
		f.Delay = ChaosWipeDelay + dur(rng, time.Second, 2*time.Second)
	case NVMLStall:
		f.Hold = dur(rng, 500*time.Millisecond, 2500*time.Millisecond)
	case SlowScheduler:
		f.Delay, f.Hold = dur(rng, 0, 1500*time.Millisecond), dur(rng, 200*time.Millisecond, 800*time.Millisecond)
	}
	return f
}

// NewScenario derives a scenario from its seed alone.
func NewScenario(seed int64) *Scenario { return NewScenarioOf(seed, len(PrimaryFaults)) }

// NewScenarioOf derives the scenario of seed as it was when PrimaryFaults had its
// first mainFaults entries (new main faults are appended): the seed modulo their
// number picks the main fault, so a seed recorded before faults were added replays
// its scenario only so.
func NewScenarioOf(seed int64, mainFaults int) *Scenario {
	rng := rand.New(rand.NewSource(seed))
	sc := &Scenario{Seed: seed, Base: baseSpec(rng), Change: changeSpec(rng, "c1")}
	if rng.Float64() < 0.25 {
		s := changeSpec(rng, "c2")
		sc.Second, sc.SecondAt = &s, dur(rng, 200*time.Millisecond, ChurnWindow-200*time.Millisecond)
	}
	nodes := []string{ChaosA100, ChaosH100}
	for range rng.Intn(4) {
		n := pick(rng, nodes)
		sc.Pre = append(sc.Pre, WorkloadOp{Create: true, Node: n, CEL: randomCEL(rng, n, sc.Base)})
	}
	specs := []v1alpha1.MigLayoutSpec{sc.Base, sc.Change}
	if sc.Second != nil {
		specs = append(specs, *sc.Second)
	}
	for range 1 + rng.Intn(4) {
		n := pick(rng, nodes)
		sc.Churn = append(sc.Churn, WorkloadOp{At: dur(rng, 0, ChurnWindow), Create: true, Node: n, CEL: randomCEL(rng, n, specs...)})
	}
	for range rng.Intn(3) {
		sc.Churn = append(sc.Churn, WorkloadOp{At: dur(rng, 0, ChurnWindow), Victim: rng.Intn(16)})
	}
	sort.SliceStable(sc.Churn, func(i, j int) bool { return sc.Churn[i].At < sc.Churn[j].At })
	// The seed picks the main fault (Seeds spreads them evenly); the rng the rest. The
	// fault goes to a node where the change does the work the fault needs.
	primary := PrimaryFaults[seed%int64(mainFaults)]
	if primary != FaultNone {
		f := randomFault(rng, primary)
		sc.aim(rng, &f)
		sc.Faults = append(sc.Faults, f)
	}
	if rng.Float64() < 0.3 {
		// Not a kill of KillPastWipe's agent: its quick restart would end the outage.
		if second := pick(rng, SecondaryFaults); second != primary && (primary != KillPastWipe || second != KillDraining) {
			sc.Faults = append(sc.Faults, randomFault(rng, second))
		}
	}
	if f, ok := pauseFault(seed, 0x9a05e, ChurnWindow, [2]time.Duration{100 * time.Millisecond, 600 * time.Millisecond}); ok {
		sc.Faults = append(sc.Faults, f)
	}
	return sc
}

// aim picks the fault's node among those where it can strike: destroys need MIG on in
// the base layout, creates MIG on in the change; a MIG-mode fault turns MIG off in the
// node's base layout (and on in the change).
func (sc *Scenario) aim(rng *rand.Rand, f *Fault) {
	var needBase, needChange, migMode bool
	switch f.Kind {
	case KillDestroying, KillOrphanGI, NVMLGIDestroyInUse, NVMLCIDestroyInUse, NVMLLieGIDestroy, NVMLLieCIDestroy:
		needBase = true
	case KillCreating, NVMLCreateGIInsuff, NVMLCreateCIFails, NVMLCreateCIRollbackFa, NVMLLieCreateCI, NVMLLieCreateGI:
		needChange = true
	case KillMIGMode, NVMLSetMIGModeFails:
		migMode = true
	case KillDraining, KillInFlight, NVMLStall, RestartKubelet, KillPastWipe:
		needBase = rng.Float64() < 0.5
		needChange = !needBase
	default:
		return
	}
	var ok []string
	for _, n := range []string{ChaosA100, ChaosH100} {
		m := nodeModel(n)
		if (!needBase || migOn(sc.Base, m)) && (!needChange || migOn(sc.Change, m)) {
			ok = append(ok, n)
		}
	}
	if len(ok) > 0 {
		f.Node = pick(rng, ok)
	}
	if migMode {
		m := nodeModel(f.Node)
		for i := range sc.Base.Rules {
			if sc.Base.Rules[i].ProductName == m {
				sc.Base.Rules[i].MIGEnabled, sc.Base.Rules[i].Layout = ptr.To(false), nil
			}
		}
		for i := range sc.Change.Rules {
			if r := &sc.Change.Rules[i]; r.ProductName == m && r.MIGEnabled != nil && !*r.MIGEnabled {
				r.MIGEnabled, r.Layout = nil, ptr.To(randomLayout(rng, m).String())
			}
		}
	}
}

// migOn: the spec's rule for every GPU of the model turns MIG on (a rule for one GPU
// index counts too).
func migOn(spec v1alpha1.MigLayoutSpec, model string) bool {
	for _, r := range spec.Rules {
		if r.ProductName == model && len(r.GPUIndices) == 0 {
			return r.MIGEnabled == nil || *r.MIGEnabled
		}
	}
	return false
}

// faultList names faults, comma-separated ("none" for none).
func faultList(faults []Fault) string {
	if len(faults) == 0 {
		return "none"
	}
	fs := make([]string, len(faults))
	for i, f := range faults {
		fs[i] = f.String()
	}
	return strings.Join(fs, ", ")
}

// Describe is a one-line summary of the scenario.
func (sc *Scenario) Describe() string {
	s := fmt.Sprintf("seed %d: base {%s} → {%s}", sc.Seed, describeSpec(sc.Base), describeSpec(sc.Change))
	if sc.Second != nil {
		s += fmt.Sprintf(" → at +%s {%s}", sc.SecondAt, describeSpec(*sc.Second))
	}
	creates, deletes := 0, 0
	for _, op := range sc.Churn {
		if op.Create {
			creates++
		} else {
			deletes++
		}
	}
	return s + fmt.Sprintf("; claims: %d before, %d created and %d deleted during; faults: %s", len(sc.Pre), creates, deletes, faultList(sc.Faults))
}

func describeSpec(spec v1alpha1.MigLayoutSpec) string {
	var parts []string
	for _, r := range spec.Rules {
		what := ""
		switch {
		case r.MIGEnabled != nil && !*r.MIGEnabled:
			what = "MIG off"
		case r.Layout != nil:
			what = *r.Layout
		default:
			var ps []string
			for _, p := range slices.Sorted(maps.Keys(r.Profiles)) {
				ps = append(ps, fmt.Sprintf("%s:%d", p, r.Profiles[p]))
			}
			what = strings.Join(ps, ",")
		}
		where := r.ProductName[:4]
		if len(r.GPUIndices) > 0 {
			where += fmt.Sprintf("%v", r.GPUIndices)
		}
		parts = append(parts, where+"="+what)
	}
	return strings.Join(parts, " ")
}
