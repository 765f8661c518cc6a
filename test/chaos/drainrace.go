package chaos

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"sort"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/miglayout/miglayout/api/v1alpha1"
	"github.com/miglayout/miglayout/test/cluster/clustertest"
)

// The drain race flips each race node's A100 between seven 1g.10gb devices and
// four 1g.10gb + 3g.40gb: the flip destroys 1g.10gb@4..6, which hold the devices a claim
// for any MIG device gets first (publication order puts 1g.10gb@6 and @4 first:
// TestDrainRaceClaimsLandOnDestroyedDevices). Claims for any MIG device are created just
// before the flip, so that the scheduler's decisions land before, during and after the
// drain.
const (
	raceFrom = "1g.10gb@0,1g.10gb@1,1g.10gb@2,1g.10gb@3,1g.10gb@4,1g.10gb@5,1g.10gb@6"
	raceTo   = "1g.10gb@0,1g.10gb@1,1g.10gb@2,1g.10gb@3,3g.40gb@4"
)

// RaceOptions configures RunDrainRace.
type RaceOptions struct {
	// Rounds per scheduler mode; default 3.
	Rounds int
	// PodsPerNode created at each flip; default 2.
	PodsPerNode int
	// Stall is how long the scheduler is stopped in the stalled mode, right before the
	// flip (0: the stalled mode is left out); default 600ms.
	Stall   time.Duration
	NoStall bool
	Seed    int64
	Logf    func(format string, args ...any)
}

// withDefaults is o with the defaults of the fields left zero.
func (o RaceOptions) withDefaults() RaceOptions {
	if o.Rounds == 0 {
		o.Rounds = 3
	}
	if o.PodsPerNode == 0 {
		o.PodsPerNode = 2
	}
	if o.Stall == 0 {
		o.Stall = 600 * time.Millisecond
	}
	return o
}

// RaceCell is the outcome of the rounds of one settle period in one scheduler mode.
type RaceCell struct {
	Settle time.Duration
	// Binding: the node's devices are published with binding conditions.
	Binding bool
	Mode    string
	Rounds  int
	// BlockedBefore: the claim's allocation was visible before the drain: the GPU was
	// Blocked at once, nothing tainted.
	BlockedBefore int
	// Drains started; Aborted: an allocation landed during the settle period and the
	// live re-check after it kept the device; WithdrawnKept: one landed after that
	// re-check, and the API server's answer once the withdrawal was served kept it;
	// PreparedKept: an allocation landed after the re-checks, but the claim was
	// prepared before the destroy and the re-check of prepared devices under the GPU
	// lock kept it; Completed: the flip was done.
	Drains, Aborted, WithdrawnKept, PreparedKept, Completed int
	// InFlight: allocations that landed on a device while it was tainted (decisions the
	// scheduler took before it saw the taint), and their delay after the taint.
	InFlight int
	Lags     []time.Duration
	// Destroyed: allocations to a device that was then destroyed (NVML-based), and
	// allocations that landed on a device already withdrawn from the pool. Must be 0.
	Destroyed, Unpublished int
	// Undrained: devices destroyed whose withdrawal from the pool lacked the drain
	// taint (UndrainedDestroyed), whatever the settle period. Must be 0.
	Undrained int
	// Refused: allocations that would count above but awaited the agent's binding
	// confirmation, which it refused (Binding nodes): no pod was bound to them.
	Refused int
	Details []string
}

// Label names the cell's node setting: "settle 500ms", "settle 0s + binding conditions".
func (c *RaceCell) Label() string {
	if c.Binding {
		return "settle " + c.Settle.String() + " + binding conditions"
	}
	return "settle " + c.Settle.String()
}

// MaxLag is the longest delay of an in-flight allocation after the taint.
func (c *RaceCell) MaxLag() time.Duration {
	var m time.Duration
	for _, l := range c.Lags {
		m = max(m, l)
	}
	return m
}

func raceLayoutName(node string) string {
	return "race-" + strings.TrimPrefix(strings.TrimPrefix(node, "race-settle-"), "race-")
}

func raceSpec(node, layout string) v1alpha1.MigLayoutSpec {
	return v1alpha1.MigLayoutSpec{
		NodeSelector: metav1.LabelSelector{MatchLabels: clustertest.OnNode(node)},
		Mode:         v1alpha1.ModeStatic,
		Rules:        []v1alpha1.LayoutRule{{Name: "race", ProductName: a100, Layout: ptr.To(layout)}},
	}
}

// RunDrainRace runs the drain race on every race node at once (one settle period per
// node, the same claims and scheduler for all), rounds times per scheduler mode, and
// returns one cell per settle period and mode.
func RunDrainRace(ctx context.Context, env *Env, mon *Monitor, ns string, opts RaceOptions) ([]*RaceCell, error) {
	opts = opts.withDefaults()
	logf := opts.Logf
	if logf == nil {
		logf = func(string, ...any) {}
	}
	rng := rand.New(rand.NewSource(opts.Seed))
	if err := env.NewNamespace(ctx, ns); err != nil {
		return nil, err
	}
	modes := []time.Duration{0}
	if !opts.NoStall {
		modes = append(modes, opts.Stall)
	}
	var cells []*RaceCell
	seq := 0
	for _, stall := range modes {
		mode := "scheduler normal"
		if stall > 0 {
			mode = fmt.Sprintf("scheduler stalled %s at the flip", stall)
		}
		byNode := map[string]*RaceCell{}
		for _, s := range env.RaceSettles {
			c := &RaceCell{Settle: s, Mode: mode}
			cells = append(cells, c)
			byNode[env.RaceNodes[s]] = c
		}
		if env.RaceBind != "" {
			c := &RaceCell{Mode: mode, Binding: true}
			cells = append(cells, c)
			byNode[env.RaceBind] = c
		}
		for round := range opts.Rounds {
			if err := setRace(ctx, env, raceFrom); err != nil {
				return cells, err
			}
			offsets := map[string]int64{}
			for node := range byNode {
				offsets[node] = fileSize(agentLog(env, node))
			}
			mon.Checkpoint()
			t0 := time.Now()
			// Normal scheduler: flip, then create the claims over the next 300 ms, so
			// that some decisions are in flight when the taint is published. Stalled
			// scheduler: create the claims, stop the scheduler 10-80 ms later (in the
			// middle of its decisions), flip, resume after the stall.
			create := func(delay time.Duration) (wait func() error) {
				var wg sync.WaitGroup
				errs := make(chan error, len(byNode)*opts.PodsPerNode)
				for node := range byNode {
					for range opts.PodsPerNode {
						seq++
						name := fmt.Sprintf("r%d-%dms", seq, byNode[node].Settle.Milliseconds())
						d := time.Duration(0)
						if delay > 0 {
							d = time.Duration(rng.Int63n(int64(delay)))
						}
						wg.Add(1)
						go func() {
							defer wg.Done()
							sleep(ctx, d)
							if err := env.CreateWorkload(ctx, ns, name, node, "", false); err != nil {
								errs <- err
							}
						}()
					}
				}
				return func() error {
					wg.Wait()
					close(errs)
					return <-errs
				}
			}
			var gens map[string]int64
			var err error
			if stall == 0 {
				gens, err = setRaceNoWait(ctx, env, raceTo)
				if err == nil {
					err = create(300 * time.Millisecond)()
				}
			} else {
				wait := create(0)
				sleep(ctx, 10*time.Millisecond+time.Duration(rng.Int63n(int64(70*time.Millisecond))))
				if err = env.StopScheduler(); err == nil {
					gens, err = setRaceNoWait(ctx, env, raceTo)
					sleep(ctx, stall)
					env.ResumeScheduler()
				}
				err = errors.Join(err, wait())
			}
			if err != nil {
				return cells, err
			}
			for node, gen := range gens {
				if _, err := env.WaitConverged(ctx, raceLayoutName(node), gen, []string{node}, true, 60*time.Second); err != nil {
					byNode[node].Details = append(byNode[node].Details, fmt.Sprintf("round %d: %v", round, err))
				}
			}
			sleep(ctx, time.Second) // late allocations
			mon.Checkpoint()
			if n, lastErr := mon.PollsSince(t0); n == 0 {
				return cells, fmt.Errorf("drain race round %d: the monitor polled the simulators not once (%s): no verdict on allocated devices destroyed", round, cmp.Or(lastErr, "no poll error"))
			}
			for node, c := range byNode {
				c.Rounds++
				log := readFrom(agentLog(env, node), offsets[node])
				drains := bytes.Count(log, []byte(`"Draining devices"`))
				aborted := bytes.Count(log, []byte(`"Device got allocated while draining; keeping it"`))
				c.Drains += drains
				c.Aborted += aborted
				c.WithdrawnKept += bytes.Count(log, []byte(`"Device got allocated while being withdrawn; keeping it"`))
				c.PreparedKept += bytes.Count(log, []byte(`(prepared while draining)"`))
				var nml v1alpha1.NodeMigLayout
				_ = env.CRC.Get(ctx, crclient.ObjectKey{Name: node}, &nml)
				c.tally(round, drains, &nml, mon.Findings(t0, node))
			}
			logf("drain race: %s, round %d done", mode, round+1)
			if err := env.ReleaseAll(ctx, ns); err != nil {
				return cells, err
			}
		}
	}
	return cells, setRace(ctx, env, raceFrom)
}

// tally counts one round on the cell's node: the GPU's status after it (Blocked with no
// drain started, or the flip completed) and the monitor's findings.
func (c *RaceCell) tally(round, drains int, nml *v1alpha1.NodeMigLayout, findings []Finding) {
	if g := gpuStatus(nml, 0); drains == 0 && g != nil && g.Phase == v1alpha1.PhaseBlocked {
		c.BlockedBefore++
	}
	if g := gpuStatus(nml, 0); g != nil && g.Phase == v1alpha1.PhaseReady && g.Layout == raceTo {
		c.Completed++
	}
	for _, f := range findings {
		switch f.Kind {
		case TaintedAllocation:
			c.InFlight++
			c.Lags = append(c.Lags, f.Lag)
		case AllocatedDestroyed:
			c.Destroyed++
		case UndrainedDestroyed:
			c.Undrained++
		case RefusedAllocation:
			c.Refused++
		default:
			c.Unpublished++
		}
		c.Details = append(c.Details, fmt.Sprintf("round %d: %s", round, f))
	}
}

func setRaceNoWait(ctx context.Context, env *Env, layout string) (map[string]int64, error) {
	gens := map[string]int64{}
	for _, node := range env.AllRaceNodes() {
		gen, err := env.SetMigLayout(ctx, raceLayoutName(node), raceSpec(node, layout))
		if err != nil {
			return nil, err
		}
		gens[node] = gen
	}
	return gens, nil
}

func setRace(ctx context.Context, env *Env, layout string) error {
	gens, err := setRaceNoWait(ctx, env, layout)
	if err != nil {
		return err
	}
	for node, gen := range gens {
		if _, err := env.WaitConverged(ctx, raceLayoutName(node), gen, []string{node}, false, 60*time.Second); err != nil {
			return err
		}
	}
	return nil
}

// WriteRaceTable prints the drain race's cells.
func WriteRaceTable(w io.Writer, cells []*RaceCell) {
	sort.SliceStable(cells, func(i, j int) bool { return cells[i].Mode < cells[j].Mode })
	tw := tabwriter.NewWriter(w, 0, 0, 1, ' ', tabwriter.AlignRight|tabwriter.Debug)
	fmt.Fprintln(tw, "scheduler\tsettle\trounds\tblocked before drain\tdrains\tkept by live re-check\tkept after withdrawal\tkept by prepared re-check\tflip completed\tin-flight allocations\tmax lag after taint\tallocated then destroyed\tallocated after withdrawal\tdestroyed undrained\trefused by binding conditions\t")
	for _, c := range cells {
		lag := "-"
		if len(c.Lags) > 0 {
			lag = fmt.Sprintf("%dms", c.MaxLag().Milliseconds())
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t%d\t%d\t%d\t%d\t\n", c.Mode, strings.TrimPrefix(c.Label(), "settle "), c.Rounds, c.BlockedBefore,
			c.Drains, c.Aborted, c.WithdrawnKept, c.PreparedKept, c.Completed, c.InFlight, lag, c.Destroyed, c.Unpublished, c.Undrained, c.Refused)
	}
	tw.Flush()
}

// RaceViolations are the invariants the drain race's cells break, one line
// each (none where they hold); stall is the scheduler stall the race ran
// with (RaceOptions.Stall). Where the settle period covers the stall, or
// binding conditions hold bindings back, no claim may be given a device
// that is then destroyed or withdrawn; no device may be destroyed without
// a drain; and some drain must have started, or the race proved nothing.
// TestDrainRace and the chaos command both judge by it.
func RaceViolations(cells []*RaceCell, stall time.Duration) []string {
	var out []string
	drains := 0
	for _, c := range cells {
		drains += c.Drains
		if (c.Settle > stall || c.Binding) && c.Destroyed+c.Unpublished > 0 {
			out = append(out, fmt.Sprintf("%s, %s: %d claims allocated to a device then destroyed, %d to a withdrawn device", c.Mode, c.Label(), c.Destroyed, c.Unpublished))
		}
		if c.Undrained > 0 {
			out = append(out, fmt.Sprintf("%s, %s: %d devices destroyed without a drain", c.Mode, c.Label(), c.Undrained))
		}
	}
	if drains == 0 {
		out = append(out, "no drain started: the race proved nothing")
	}
	return out
}
