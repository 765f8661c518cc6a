package quality

import (
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"sort"

	"github.com/miglayout/miglayout/pkg/mig"
)

// Mix is a demand mix: the share of arrivals asking for each profile.
type Mix struct {
	Name    string
	Weights map[string]float64
}

// Scenario is a cluster size and trace length run for every mix.
type Scenario struct {
	Name string
	// GPUs in the cluster, GPUsPerNode on each node (device-name order is
	// node, then GPU index, then placement start).
	GPUs, GPUsPerNode int
	// Claims per trace.
	Claims int
	// Seeds is the number of traces per mix and model.
	Seeds int
	// Models to run: "loss", "queue".
	Models []string
	// Exact runs strategies (e) and (e′) and the clairvoyant search (loss
	// model only);
	// each is reported "n/a" where it exceeds its budget
	// (Config.ExactValues, Config.ExactStates).
	Exact bool
}

// Config is one quality comparison.
type Config struct {
	// Model is the GPU model (catalog name).
	Model string
	// Mixes of demand; profiles must be profiles of Model.
	Mixes []Mix
	// Scenarios to run.
	Scenarios []Scenario
	// Seed is the base seed; trace k of a mix uses Seed+k.
	Seed uint64
	// MeanHold is the mean holding time of a claim (exponential), seconds.
	MeanHold float64
	// LossLoad and QueueLoad are the offered loads, as a share of cluster
	// capacity where a claim weighs max(compute slices/7, memory slices/8)
	// of a GPU.
	LossLoad, QueueLoad float64
	// Repartition is how long a change takes, seconds.
	Repartition float64
	// Deadline is how long a claim waits for a device in the loss model,
	// seconds: a claim may still be given one at arrival+Deadline.
	Deadline float64
	// QueueDrain is how long the queue model runs after the last arrival,
	// in units of MeanHold, before still-waiting claims are counted unserved.
	QueueDrain float64
	// Initial is the layout every GPU starts with ("" = MIG on, no device).
	Initial string
	// Strategies to run (default all).
	Strategies []string
	// ExactValues bounds the value table of strategy (e) (cluster states ×
	// (arrivals + 1)); above it the scenario is reported "n/a".
	ExactValues int
	// AdmissionRewards are the rewards per claim served strategy (e′) is
	// solved for (nil: DefaultAdmissionRewards).
	AdmissionRewards []float64
	// ExactStates bounds the clairvoyant search's memo: a search that has
	// stored that many states' values gives up (states still being searched
	// may add up to one per event of the trace), and the instance is
	// reported "n/a".
	ExactStates int
	// Parallel is the number of traces simulated at once (0 = GOMAXPROCS).
	Parallel int
	// PlanBindsScheduler gives miglayout's pending claims the free devices
	// that exist only where its plan places them, as though kube-scheduler
	// followed the plan. Off (the default, as in a cluster), kube-scheduler
	// comes first at every decision: a pending claim that a free device
	// satisfies gets one at once, wherever the scheduler finds it (see
	// miglayoutStrategy.schedule), and the planner plans the rest.
	PlanBindsScheduler bool
	// MaxGPUsPerNode is miglayout's planner.Policy.MaxGPUsPerNode, the most
	// GPUs of a node one plan changes at once; 0: every GPU of the node
	// (the bench's default). The controller's default is 1.
	MaxGPUsPerNode int
	// MaxGPUs is the most GPUs miglayout changes at once across the
	// cluster (a MigLayout's policy.maxGPUs, planner.Snapshot.GroupMaxGPUs);
	// 0: no limit (the bench's default). The controller's default is 8.
	MaxGPUs int
	// ReclaimIdleAfter is miglayout's planner.Policy.ReclaimIdleAfter, in
	// seconds (0: never): how long a GPU stays idle before it is given
	// back whole. DefaultConfig takes the controller's default, 300.
	ReclaimIdleAfter float64
}

// Strategy names.
const (
	Miglayout = "miglayout"
	FirstFit  = "firstfit"
	Nos       = "nos"
	Static    = "static"
	Migrate   = "migrate"
	// Exact is strategy (e): the optimal online policy, solved exactly.
	Exact = "exact"
	// ExactAdmission is strategy (e′): the optimal online policy that may
	// also turn claims away (admission control), solved exactly for each
	// reward per claim of Config.AdmissionRewards; the report keeps, for
	// each fold of traces (by seed parity), the reward whose policy serves
	// the most large claims while serving at least (a)'s share overall on
	// the other fold (chooseAdmissionReward).
	ExactAdmission = "exact-admission"
	// Clairvoyant is the exact search that knows the trace: a relaxation
	// of (e) no policy can reach.
	Clairvoyant = "clairvoyant"
	BestFit     = "bestfit"
	Largest     = "largestrange"
)

// AllStrategies in table order.
var AllStrategies = []string{Miglayout, FirstFit, Nos, Static, Migrate, Exact, ExactAdmission, Clairvoyant, BestFit, Largest}

// Labels are the letters for the strategies.
var Labels = map[string]string{Miglayout: "miglayout", FirstFit: "(a) firstfit", Nos: "(b) nos", Static: "(c) static*",
	Migrate: "(d) migrate†", Exact: "(e) exact§", ExactAdmission: "(e′) exact, admission¶", Clairvoyant: "clairvoyant‡", BestFit: "bestfit", Largest: "largestrange"}

// DefaultAdmissionRewards are the rewards per claim served (beside 1 per
// large claim) strategy (e′) is solved for, in steps of 0.05: from nearly
// only large claims counting to every claim counting as much as a large
// one.
var DefaultAdmissionRewards = []float64{0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.55, 0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95, 1}

// DefaultMixes: small-heavy, uniform and large-heavy over the A100-80GB
// profiles 1g.10gb, 2g.20gb, 3g.40gb, 4g.40gb, 7g.80gb.
func DefaultMixes() []Mix {
	m := func(name string, w ...float64) Mix {
		return Mix{Name: name, Weights: map[string]float64{"1g.10gb": w[0], "2g.20gb": w[1], "3g.40gb": w[2], "4g.40gb": w[3], "7g.80gb": w[4]}}
	}
	return []Mix{
		m("small-heavy", 0.45, 0.25, 0.15, 0.10, 0.05),
		m("uniform", 0.2, 0.2, 0.2, 0.2, 0.2),
		m("large-heavy", 0.10, 0.15, 0.30, 0.25, 0.20),
	}
}

// DefaultConfig is the bench command's default run: 16 GPUs (2 nodes × 8)
// with 600 claims per trace, and 2 GPUs with 24 claims where the exact search
// is solved. The 16-GPU scenario runs 10 traces per mix and model: the queue
// model's p95 wait comes mostly from the few traces with a congested hour,
// so with 3 traces one such hour decided the verdict (the gap closed moved
// by up to 14 points between 3 and 10 traces). The 2-GPU scenario runs
// 200: a trace holds about 7 large claims, and the gap between first-fit
// and (e) is 3 to 6 points, so the gap closed on four samples of 40 traces
// ranged over 30 points (63-100 % in the uniform mix).
func DefaultConfig() Config {
	return Config{
		Model: "A100-SXM4-80GB", Mixes: DefaultMixes(),
		Scenarios: []Scenario{
			{Name: "16gpu", GPUs: 16, GPUsPerNode: 8, Claims: 600, Seeds: 10, Models: []string{"loss", "queue"}},
			{Name: "2gpu", GPUs: 2, GPUsPerNode: 2, Claims: 24, Seeds: 200, Models: []string{"loss"}, Exact: true},
		},
		Seed: 1, MeanHold: 3600, LossLoad: 0.9, QueueLoad: 0.75, Repartition: 10, Deadline: 60, QueueDrain: 10, ReclaimIdleAfter: 300,
		Strategies: AllStrategies, ExactValues: 5_000_000, ExactStates: 500_000,
	}
}

// QuickConfig is DefaultConfig cut down to run in seconds.
func QuickConfig() Config {
	c := DefaultConfig()
	c.Scenarios = []Scenario{
		{Name: "16gpu", GPUs: 16, GPUsPerNode: 8, Claims: 250, Seeds: 1, Models: []string{"loss", "queue"}},
		{Name: "2gpu", GPUs: 2, GPUsPerNode: 2, Claims: 20, Seeds: 4, Models: []string{"loss"}, Exact: true},
	}
	return c
}

// claim is one arrival of a trace.
type claim struct {
	id      int
	profile string
	large   bool
	arrive  float64
	hold    float64
}

// trace is a seeded sequence of arrivals.
type trace struct {
	claims []claim
}

// weight is the share of a GPU a device of p takes.
func weight(m *mig.Model, p *mig.Profile) float64 {
	return math.Max(float64(p.ComputeSlices)/float64(m.ComputeSlices), float64(p.MemorySlices)/float64(m.MemorySlices))
}

// isLarge: 3g and up.
func isLarge(p *mig.Profile) bool { return p.ComputeSlices >= 3 }

// genTrace draws n arrivals (Poisson, rate set for load on gpus GPUs) of
// profiles drawn from mix, holding for exponential times of mean hold.
func genTrace(m *mig.Model, mix Mix, gpus, n int, load, hold float64, seed uint64) (trace, error) {
	names := slices.Sorted(maps.Keys(mix.Weights))
	var cum []float64
	var profs []*mig.Profile
	total, meanW := 0.0, 0.0
	for _, name := range names {
		p, err := m.Profile(name)
		if err != nil {
			return trace{}, fmt.Errorf("mix %s: %w", mix.Name, err)
		}
		w := mix.Weights[name]
		if w < 0 {
			return trace{}, fmt.Errorf("mix %s: negative weight for %s", mix.Name, name)
		}
		total += w
		cum = append(cum, total)
		profs = append(profs, p)
	}
	if total <= 0 {
		return trace{}, fmt.Errorf("mix %s: no weight", mix.Name)
	}
	for i, p := range profs {
		prev := 0.0
		if i > 0 {
			prev = cum[i-1]
		}
		meanW += (cum[i] - prev) / total * weight(m, p)
	}
	// load = rate * hold * meanW / gpus
	rate := load * float64(gpus) / (hold * meanW)
	rng := rand.New(rand.NewPCG(seed, 0x6d69676c61796f75))
	var tr trace
	t := 0.0
	for i := range n {
		t += rng.ExpFloat64() / rate
		u := rng.Float64() * total
		k := sort.SearchFloat64s(cum, u)
		if k >= len(profs) {
			k = len(profs) - 1
		}
		for cum[k] <= u && k < len(profs)-1 {
			k++
		}
		p := profs[k]
		tr.claims = append(tr.claims, claim{id: i, profile: p.Name, large: isLarge(p), arrive: t, hold: rng.ExpFloat64() * hold})
	}
	return tr, nil
}
