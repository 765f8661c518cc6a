package chaos

import (
	"fmt"
	"maps"
	"math/rand"
	"slices"
	"sort"
	"strings"
	"time"

	"k8s.io/utils/ptr"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// AutoFaults are the Auto scenarios' main faults: every fault of PrimaryFaults but the
// MIG-mode ones (the Auto planner plans on GPUs with MIG on and never turns it on or
// off), and the controller killed. An Auto scenario's seed modulo their number picks one.
var AutoFaults = []FaultKind{
	FaultNone, KillDraining, KillDestroying, KillCreating, KillOrphanGI, KillInFlight,
	NVMLGIDestroyInUse, NVMLCIDestroyInUse, NVMLCreateGIInsuff, NVMLCreateCIFails, NVMLCreateCIRollbackFa,
	NVMLReadFails, NVMLLieGIDestroy, NVMLLieCIDestroy, NVMLLieCreateCI, NVMLLieCreateGI,
	NVMLStall, APIConflicts, SlowScheduler, KillController, RestartKubelet, KillPastWipe,
}

// autoProfiles are the profiles the Auto workload asks for, with their weights; both
// node models (A100-SXM4-80GB, H100-SXM5-80GB) offer each.
var autoProfiles = []struct {
	name   string
	weight int
}{
	{"1g.10gb", 25}, {"1g.20gb", 10}, {"2g.20gb", 20}, {"3g.40gb", 20}, {"4g.40gb", 12}, {"7g.80gb", 13},
}

// AutoPriorityClass is the PriorityClass of the Auto workload's high-priority pods (its
// preemption policy is Never: pods wait, none is evicted).
const (
	AutoPriorityClass = "chaos-auto-high"
	AutoPriority      = 1000
)

// AutoArrival is one pod of an Auto scenario: it asks for one MIG device of Profile
// (CEL on the profile attribute) on either chaos node.
type AutoArrival struct {
	At        time.Duration // offset into the churn
	Profile   string
	High      bool          // priority AutoPriority (else 0)
	Hold      time.Duration // deleted this long after it is bound (if within the churn)
	AbandonAt time.Duration // > 0: deleted at this offset, bound or not
}

// AutoScenario is one seeded Auto-mode run: from Base (Static, explicit placements, MIG
// on everywhere) the chaos MigLayout switches to Auto with Policy while pods arrive and
// depart during Window and the faults strike.
type AutoScenario struct {
	Seed     int64
	Base     v1alpha1.MigLayoutSpec
	Policy   v1alpha1.AutoPolicy
	Window   time.Duration
	Arrivals []AutoArrival
	Faults   []Fault
}

// AutoSpec is the Auto MigLayout spec of the scenario.
func (sc *AutoScenario) AutoSpec() v1alpha1.MigLayoutSpec {
	p := sc.Policy
	return v1alpha1.MigLayoutSpec{NodeSelector: chaosSelector(), Mode: v1alpha1.ModeAuto, Policy: &p}
}

func pickProfile(rng *rand.Rand) string {
	total := 0
	for _, p := range autoProfiles {
		total += p.weight
	}
	x := rng.Intn(total)
	for _, p := range autoProfiles {
		if x < p.weight {
			return p.name
		}
		x -= p.weight
	}
	return autoProfiles[0].name
}

// NewAutoScenario derives an Auto scenario from its seed alone; window is the churn's
// length (arrivals and departures happen within it; 10 to 18 pods per 12 s).
func NewAutoScenario(seed int64, window time.Duration) *AutoScenario {
	rng := rand.New(rand.NewSource(seed))
	sc := &AutoScenario{Seed: seed, Window: window}
	sc.Base = v1alpha1.MigLayoutSpec{NodeSelector: chaosSelector(), Mode: v1alpha1.ModeStatic}
	for _, model := range []string{a100, h100} {
		sc.Base.Rules = append(sc.Base.Rules, v1alpha1.LayoutRule{
			Name: "auto-base-" + strings.ToLower(model[:4]), ProductName: model,
			Layout: ptr.To(randomLayout(rng, model).String()),
		})
	}
	sc.Policy = v1alpha1.AutoPolicy{MaxGPUsPerNode: int32(1 + rng.Intn(2)), MaxGPUs: int32(1 + rng.Intn(3))}
	if rng.Float64() < 0.3 {
		sc.Policy.Spares = map[string]int32{"1g.10gb": 1}
	}
	for range (10 + rng.Intn(9)) * max(1, int(window/(12*time.Second))) {
		a := AutoArrival{
			At:      dur(rng, 0, window*3/4),
			Profile: pickProfile(rng),
			High:    rng.Float64() < 0.25,
			Hold:    dur(rng, 2*time.Second, window/2),
		}
		if rng.Float64() < 0.25 {
			// Often while the change made for it is draining or in flight.
			a.AbandonAt = a.At + dur(rng, 500*time.Millisecond, 4*time.Second)
		}
		sc.Arrivals = append(sc.Arrivals, a)
	}
	sort.SliceStable(sc.Arrivals, func(i, j int) bool { return sc.Arrivals[i].At < sc.Arrivals[j].At })
	primary := AutoFaults[seed%int64(len(AutoFaults))]
	if primary != FaultNone {
		sc.Faults = append(sc.Faults, autoFault(rng, primary, window))
	}
	if rng.Float64() < 0.3 {
		// Not a kill of KillPastWipe's agent: its quick restart would end the outage.
		if second := pick(rng, SecondaryFaults); second != primary && (primary != KillPastWipe || second != KillDraining) {
			sc.Faults = append(sc.Faults, autoFault(rng, second, window))
		}
	}
	// Idle GPUs given back whole within the churn (else the default 300 s is past
	// it): reclaims then meet arrivals while they drain. Drawn apart, so that the
	// rest of a seed's scenario is what it was before reclaims were drawn.
	if rr := rand.New(rand.NewSource(seed ^ 0x5eed)); rr.Float64() < 0.4 {
		sc.Policy.ReclaimIdleGPUsAfterSeconds = ptr.To(int32(1 + rr.Intn(3)))
	}
	if f, ok := pauseFault(seed, 0x9a05e, window, [2]time.Duration{time.Second, 4 * time.Second}); ok {
		sc.Faults = append(sc.Faults, f)
	}
	return sc
}

// autoFault is randomFault spread over the Auto churn: a scheduler stall or the
// concurrent writers strike anywhere in it (the writers for a few seconds), and a killed
// agent stays down for 2-8 s now and then (the planner plans for its node meanwhile, and
// changes for pods that leave are cancelled before it is back).
func autoFault(rng *rand.Rand, kind FaultKind, window time.Duration) Fault {
	f := randomFault(rng, kind)
	switch kind {
	case KillDraining, KillDestroying, KillCreating, KillOrphanGI, KillInFlight:
		if rng.Float64() < 0.4 {
			f.Delay = dur(rng, 2*time.Second, 8*time.Second)
		}
	case SlowScheduler, RestartKubelet:
		f.Delay = dur(rng, 0, window)
	case APIConflicts:
		f.Delay, f.Hold = dur(rng, 0, window/2), dur(rng, 2*time.Second, 5*time.Second)
	case KillController:
		f.Delay, f.Hold = dur(rng, 0, window/2), dur(rng, 0, 2*time.Second)
	}
	return f
}

// AutoSeeds derives n Auto scenario seeds from a master seed: the i-th has main fault
// AutoFaults[(i+master) mod their number].
func AutoSeeds(master int64, n int) []int64 { return cyclingSeeds(master, n, len(AutoFaults)) }

// Describe is a one-line summary of the scenario.
func (sc *AutoScenario) Describe() string {
	counts := map[string]int{}
	high, abandon := 0, 0
	for _, a := range sc.Arrivals {
		counts[a.Profile]++
		if a.High {
			high++
		}
		if a.AbandonAt > 0 {
			abandon++
		}
	}
	var ps []string
	for _, p := range slices.Sorted(maps.Keys(counts)) {
		ps = append(ps, fmt.Sprintf("%s:%d", p, counts[p]))
	}
	pol := fmt.Sprintf("maxGPUsPerNode %d, maxGPUs %d", sc.Policy.MaxGPUsPerNode, sc.Policy.MaxGPUs)
	if len(sc.Policy.Spares) > 0 {
		pol += ", spare 1g.10gb"
	}
	if r := sc.Policy.ReclaimIdleGPUsAfterSeconds; r != nil {
		pol += fmt.Sprintf(", idle GPUs reclaimed after %d s", *r)
	}
	return fmt.Sprintf("auto seed %d: base {%s}, Auto (%s); %d pods (%s; %d high priority, %d abandoned) over %s; faults: %s",
		sc.Seed, describeSpec(sc.Base), pol, len(sc.Arrivals), strings.Join(ps, ","), high, abandon, sc.Window, faultList(sc.Faults))
}
