package chaos

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"io"
	"math/rand"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/miglayout/miglayout/api/v1alpha1"
	"github.com/miglayout/miglayout/pkg/agent"
	"github.com/miglayout/miglayout/pkg/mig/nvmlsim"
)

// FaultResult says whether a scenario's fault struck.
type FaultResult struct {
	Fault  Fault
	Fired  bool
	Detail string
	// Generation is the chaos MigLayout's generation the fault's last write made
	// (PauseFlap's resume), 0 if it wrote none: convergence is waited for from it, and
	// timed from Resumed, when the last resume was written.
	Generation int64
	Resumed    time.Time
	// Problem is what the fault left wrong that the scenario must report (a
	// MigLayout left paused).
	Problem string
	// Began and Ended bound a kubelet restart (RestartKubelet: from its start
	// until the agent's plugin registered with the new kubelet) or an agent
	// outage past the kubelet's wipe delay (KillPastWipe: from the kill until
	// the new agent's plugin registered).
	Began, Ended time.Time
	ops          []string // the simulator ops of the NVML faults injected
}

// faultProblems reports the problems the faults left.
func faultProblems(faults []FaultResult, problem func(format string, args ...any)) {
	for _, f := range faults {
		if f.Problem != "" {
			problem("fault %s: %s", f.Fault, f.Problem)
		}
	}
}

// lastResume is the later of t and the last resume a fault wrote.
func lastResume(t time.Time, faults []FaultResult) time.Time {
	for _, f := range faults {
		if f.Resumed.After(t) {
			t = f.Resumed
		}
	}
	return t
}

// lastGeneration is the latest of gen and the generations the faults wrote.
func lastGeneration(gen int64, faults []FaultResult) int64 {
	for _, f := range faults {
		gen = max(gen, f.Generation)
	}
	return gen
}

// Result is what one scenario produced. The counts are of distinct items (claims,
// devices, instances).
type Result struct {
	Scenario *Scenario
	Faults   []FaultResult
	// Invariant counts (all must be 0).
	AllocatedDestroyed int // allocated device destroyed (NVML-based)
	UndrainedDestroyed int // device destroyed whose withdrawal from the pool lacked the drain taint
	PoolAllocAnomalies int // allocation landed on an unpublished device, or a device withdrawn while allocated
	TaintedAllocations int // allocation landed while the device was tainted (an in-flight decision; observed, see Failed)
	PoolMismatch       int // published ≠ NVML after convergence
	Leaked             int // GIs without CI; Ready GPUs holding other instances than desired
	NotConverged       int // stages that did not converge within the bound (0..2)
	// Observations.
	JournalLeft   int
	Drains        int           // drains the agents started
	DrainsAborted int           // drains aborted because a device got allocated during the settle period
	Workloads     int           // claims created
	Converge      time.Duration // from the last layout change to the product reporting convergence (stage 1)
	Took          time.Duration
	// PoolAbsences: how long each pool a kubelet deleted (RestartKubelet,
	// KillPastWipe) stayed absent (PoolAbsence), until the agent published it
	// again.
	PoolAbsences []time.Duration
	// HarnessErrors counts the steps of the scenario's own that failed
	// (a fault not armed, the layout change not written): the scenario
	// then tested less than it says, and fails rather than pass on no
	// evidence.
	HarnessErrors int
	Problems      []string
}

// Failed reports whether an invariant was violated, or the scenario could
// not be run as written (HarnessErrors). An allocation that landed on a
// tainted device is not a violation by itself: the scheduler took that decision before
// it saw the taint, and the settle period and live re-check exist to keep such a device
// (whether they did is AllocatedDestroyed).
func (r *Result) Failed() bool {
	return r.AllocatedDestroyed+r.UndrainedDestroyed+r.PoolAllocAnomalies+r.PoolMismatch+r.Leaked+r.NotConverged+r.HarnessErrors > 0
}

// Runner runs scenarios one after the other on an Env.
type Runner struct {
	Env *Env
	Mon *Monitor
	// Namespace for the claims and pods (created by NewRunner).
	Namespace string
	// StageTimeout bounds each convergence wait; default 60 s.
	StageTimeout time.Duration
	// MainFaults: RunAll derives its scenarios with the first MainFaults
	// PrimaryFaults (NewScenarioOf), to replay seeds found before main faults
	// were added; 0 means all.
	MainFaults int

	seq   int
	since time.Time
	// Of the Auto run in progress: the devices seen allocated, per node, and the
	// controller's and each agent's log sizes when it started.
	allocSeen    map[string]sets.Set[string]
	ctrlLogFrom  int64
	agentLogFrom map[string]int64
}

// NewRunner creates the namespace and the monitor of the chaos nodes.
func NewRunner(ctx context.Context, env *Env, mon *Monitor, ns string) (*Runner, error) {
	if err := env.NewNamespace(ctx, ns); err != nil {
		return nil, err
	}
	return &Runner{Env: env, Mon: mon, Namespace: ns, StageTimeout: 60 * time.Second, since: time.Now()}, nil
}

// Setup brings the chaos nodes to the first scenario's base layout, without faults.
func (r *Runner) Setup(ctx context.Context, first *Scenario) error {
	gen, err := r.Env.SetMigLayout(ctx, ChaosLayout, first.Base)
	if err != nil {
		return err
	}
	if _, err := r.Env.WaitConverged(ctx, ChaosLayout, gen, r.Env.ChaosNodes, false, 2*r.StageTimeout); err != nil {
		return fmt.Errorf("reaching the base layout of seed %d: %w", first.Seed, err)
	}
	r.Mon.Checkpoint()
	r.since = time.Now()
	return nil
}

// Run runs one scenario, starting from its base layout (Setup, or the previous
// scenario's end), and ends on next's base layout (nil: on the scenario's own change).
func (r *Runner) Run(ctx context.Context, sc *Scenario, next *Scenario) *Result {
	res := &Result{Scenario: sc}
	start := time.Now()
	env := r.Env
	offsets := map[string]int64{}
	for _, n := range env.ChaosNodes {
		offsets[n] = fileSize(agentLog(env, n))
	}
	problem := func(format string, args ...any) {
		res.Problems = append(res.Problems, fmt.Sprintf(format, args...))
	}

	// The faults watch for their moment from now on.
	fctx, fcancel := context.WithTimeout(ctx, ChurnWindow+12*time.Second)
	var wg sync.WaitGroup
	churnStart := make(chan time.Time, len(sc.Faults))
	for _, f := range sc.Faults {
		fr := &FaultResult{Fault: f}
		res.Faults = append(res.Faults, FaultResult{})
		i := len(res.Faults) - 1
		if err := r.arm(fctx, f, fr); err != nil {
			res.HarnessErrors++
			problem("arming %s: %v", f, err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.strike(fctx, f, fr, churnStart, ChurnWindow)
			res.Faults[i] = *fr
		}()
	}

	var created []string
	create := func(op WorkloadOp) {
		r.seq++
		name := fmt.Sprintf("w%d-%s", r.seq, strings.TrimPrefix(op.Node, "chaos-"))
		// Every other workload idle: its device kept by the agent's checks alone.
		if err := env.CreateWorkload(ctx, r.Namespace, name, op.Node, op.CEL, r.seq%2 == 0); err != nil {
			problem("%v", err)
			return
		}
		created = append(created, name)
		res.Workloads++
	}
	for _, op := range sc.Pre {
		create(op)
	}
	if len(sc.Pre) > 0 {
		sleep(ctx, 300*time.Millisecond) // let them be allocated on the base layout
	}
	gen, err := env.SetMigLayout(ctx, ChaosLayout, sc.Change)
	if err != nil {
		res.HarnessErrors++
		problem("%v", err)
	}
	t0 := time.Now()
	for range sc.Faults {
		churnStart <- t0
	}
	secondDone := sc.Second == nil
	for _, op := range sc.Churn {
		if !secondDone && sc.SecondAt <= op.At {
			sleepUntil(ctx, t0.Add(sc.SecondAt))
			if gen, err = env.SetMigLayout(ctx, ChaosLayout, *sc.Second); err != nil {
				res.HarnessErrors++
				problem("%v", err)
			}
			secondDone = true
		}
		sleepUntil(ctx, t0.Add(op.At))
		if op.Create {
			create(op)
		} else if len(created) > 0 {
			name := created[op.Victim%len(created)]
			if err := env.DeleteWorkload(ctx, r.Namespace, name); err != nil {
				problem("deleting %s: %v", name, err)
			}
		}
	}
	if !secondDone {
		sleepUntil(ctx, t0.Add(sc.SecondAt))
		if gen, err = env.SetMigLayout(ctx, ChaosLayout, *sc.Second); err != nil {
			res.HarnessErrors++
			problem("%v", err)
		}
	}
	lastChange := t0
	if sc.Second != nil {
		lastChange = t0.Add(sc.SecondAt)
	}
	sleepUntil(ctx, t0.Add(ChurnWindow))
	wg.Wait()
	fcancel()
	faultProblems(res.Faults, problem)
	lastChange = lastResume(lastChange, res.Faults)
	env.ResumeScheduler()
	for _, n := range env.ChaosNodes {
		if err := env.EnsureAgent(ctx, n); err != nil {
			problem("restarting the agent of %s: %v", n, err)
		}
	}

	// Stage 1: with the claims still there, every GPU holds the change or is Blocked by
	// a device really in use (once the MigLayout is resumed, where it was paused).
	_, err = env.WaitConverged(ctx, ChaosLayout, lastGeneration(gen, res.Faults), env.ChaosNodes, true, r.StageTimeout)
	res.Converge = time.Since(lastChange)
	if err != nil {
		res.NotConverged++
		problem("stage 1 (change under chaos, claims kept): %v", err)
	}
	check1 := env.Check(ctx, env.ChaosNodes, 3*time.Second)
	r.settleFaults(res.Faults)

	// Stage 2: claims released, the next base layout (or this change) applied without
	// faults: every GPU Ready.
	if err := env.ReleaseAll(ctx, r.Namespace); err != nil {
		problem("releasing the claims: %v", err)
	}
	target := sc.Change
	if sc.Second != nil {
		target = *sc.Second
	}
	if next != nil {
		target = next.Base
	}
	gen2, err := env.SetMigLayout(ctx, ChaosLayout, target)
	if err != nil {
		problem("%v", err)
	}
	_, err = env.WaitConverged(ctx, ChaosLayout, gen2, env.ChaosNodes, false, r.StageTimeout)
	if err != nil {
		res.NotConverged++
		problem("stage 2 (claims released, next base layout): %v", err)
		// Give the next scenario a chance to start from a sound state.
		if _, err := env.WaitConverged(ctx, ChaosLayout, gen2, env.ChaosNodes, false, r.StageTimeout); err != nil {
			problem("still not converged after another %s: %v", r.StageTimeout, err)
		}
	}
	check2 := env.Check(ctx, env.ChaosNodes, 3*time.Second)
	res.PoolMismatch = len(union(check1.PoolMismatch, check2.PoolMismatch))
	res.Leaked = len(union(check1.Leaked, check2.Leaked))
	res.JournalLeft = len(union(check1.JournalLeft, check2.JournalLeft))
	for _, s := range union(check1.PoolMismatch, check2.PoolMismatch, check1.Leaked, check2.Leaked, check1.JournalLeft, check2.JournalLeft) {
		problem("%s", s)
	}

	// The monitor's verdict on this scenario.
	v := r.monitorVerdict(ctx, r.since, res.Faults, problem, problem)
	res.AllocatedDestroyed, res.UndrainedDestroyed, res.TaintedAllocations = v.destroyed, v.undrained, v.tainted
	res.PoolAllocAnomalies, res.PoolAbsences = v.anomalies, v.absent
	r.since = v.checkpoint
	for _, n := range env.ChaosNodes {
		log := readFrom(agentLog(env, n), offsets[n])
		res.Drains += bytes.Count(log, []byte(`"Draining devices"`))
		res.DrainsAborted += bytes.Count(log, []byte(`"Device got allocated while draining; keeping it"`)) +
			bytes.Count(log, []byte(`"Device got allocated while being withdrawn; keeping it"`)) +
			bytes.Count(log, []byte(`(prepared while draining)"`))
	}
	res.Took = time.Since(start)
	return res
}

// arm injects the NVML faults that wait in the simulator for their call.
func (r *Runner) arm(ctx context.Context, f Fault, fr *FaultResult) error {
	if f.Node == "" {
		return nil // no node: not an NVML fault (PauseFlap)
	}
	sim, err := r.Env.Cluster.Sim(f.Node)
	if err != nil {
		return err
	}
	inject := func(faults ...nvmlsim.Fault) error {
		for _, nf := range faults {
			if err := sim.InjectFault(nf); err != nil {
				return err
			}
			fr.ops = append(fr.ops, nf.Op)
		}
		return nil
	}
	switch f.Kind {
	case NVMLGIDestroyInUse:
		return inject(nvmlsim.Fault{Op: "GpuInstance.Destroy", Nth: f.Nth, Return: nvml.ERROR_IN_USE})
	case NVMLCIDestroyInUse:
		return inject(nvmlsim.Fault{Op: "ComputeInstance.Destroy", Nth: f.Nth, Return: nvml.ERROR_IN_USE})
	case NVMLCreateGIInsuff:
		return inject(nvmlsim.Fault{Op: "CreateGpuInstanceWithPlacement", Nth: f.Nth, Return: nvml.ERROR_INSUFFICIENT_RESOURCES})
	case NVMLCreateCIFails:
		return inject(nvmlsim.Fault{Op: "CreateComputeInstance", Nth: f.Nth, Return: nvml.ERROR_UNKNOWN})
	case NVMLGIDestroyFails:
		return inject(nvmlsim.Fault{Op: "GpuInstance.Destroy", Nth: f.Nth, Return: nvml.ERROR_UNKNOWN})
	case NVMLSetMIGModeFails:
		return inject(nvmlsim.Fault{Op: "SetMigMode", Nth: f.Nth, Return: nvml.ERROR_UNKNOWN})
	case NVMLReadFails:
		return inject(nvmlsim.Fault{Op: f.Op, Nth: f.Nth, Return: nvml.ERROR_UNKNOWN})
	case NVMLLieGIDestroy:
		return inject(nvmlsim.Fault{Op: "GpuInstance.Destroy", Nth: f.Nth, Lie: true})
	case NVMLLieCIDestroy:
		return inject(nvmlsim.Fault{Op: "ComputeInstance.Destroy", Nth: f.Nth, Lie: true})
	case NVMLLieCreateCI:
		return inject(nvmlsim.Fault{Op: "CreateComputeInstance", Nth: f.Nth, Lie: true})
	case NVMLLieCreateGI:
		return inject(nvmlsim.Fault{Op: "CreateGpuInstanceWithPlacement", Nth: f.Nth, Lie: true})
	}
	return nil
}

// strike runs the faults that act at a moment of the agent's work, or for a while,
// within a churn of length window from the time churnStart delivers.
func (r *Runner) strike(ctx context.Context, f Fault, fr *FaultResult, churnStart <-chan time.Time, window time.Duration) {
	env := r.Env
	var t0 time.Time
	select {
	case t0 = <-churnStart:
	case <-ctx.Done():
		return
	}
	restart := func(what string) {
		fr.Fired, fr.Detail = true, what
		sleep(ctx, f.Delay)
		if err := env.EnsureAgent(context.WithoutCancel(ctx), f.Node); err != nil {
			fr.Detail += "; restart failed: " + err.Error()
		}
	}
	// until waits for a journal entry at one of the steps; it gives up 8 s after the
	// churn window, or once the window is over and the journal has been empty (no work
	// in flight) for 1.5 s.
	until := func(steps ...agent.Step) (agent.JournalEntry, bool) {
		deadline := t0.Add(window + 8*time.Second)
		quiet := t0.Add(window + time.Second)
		emptySince := time.Now()
		for now := time.Now(); now.Before(deadline) && ctx.Err() == nil; now = time.Now() {
			js := env.Journal(f.Node)
			for _, e := range js {
				if slices.Contains(steps, e.Step) {
					return e, true
				}
			}
			if len(js) > 0 {
				emptySince = now
			}
			if now.After(quiet) && now.Sub(emptySince) > 1500*time.Millisecond {
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
		return agent.JournalEntry{}, false
	}
	killWhen := func(cond func(nvmlsim.State, []agent.JournalEntry) (string, bool)) {
		if _, ok := until(agent.StepDraining, agent.StepDestroying, agent.StepCreating, agent.StepSettingMIGMode); !ok {
			return
		}
		kctx, cancel := context.WithTimeout(ctx, window+6*time.Second)
		defer cancel()
		var what string
		_, err := env.Cluster.KillAgentWhen(kctx, f.Node, func(st nvmlsim.State) bool {
			js := env.Journal(f.Node)
			if len(js) == 0 {
				cancel() // the work is over (or aborted): missed
				return false
			}
			var ok bool
			what, ok = cond(st, js)
			return ok
		})
		if err == nil {
			restart(what)
		}
	}
	atStep := func(step agent.Step) func(nvmlsim.State, []agent.JournalEntry) (string, bool) {
		return func(_ nvmlsim.State, js []agent.JournalEntry) (string, bool) {
			for _, e := range js {
				list := e.Destroy
				if step == agent.StepCreating {
					list = e.Create
				}
				if e.Step == step && (step == agent.StepSettingMIGMode || len(e.Done) >= min(f.Done, max(len(list)-1, 0))) {
					return fmt.Sprintf("killed at %s gpu %d, done %v of destroy %v create %v", e.Step, e.GPU, e.Done, e.Destroy, e.Create), true
				}
			}
			return "", false
		}
	}
	switch f.Kind {
	case KillDraining:
		if e, ok := until(agent.StepDraining); ok {
			env.Cluster.KillAgent(f.Node)
			restart(fmt.Sprintf("killed while draining gpu %d (destroy %v)", e.GPU, e.Destroy))
		}
	case KillPastWipe:
		if e, ok := until(agent.StepDraining); ok {
			env.Cluster.KillAgent(f.Node)
			fr.Began = time.Now()
			fr.Fired, fr.Detail = true, fmt.Sprintf("killed while draining gpu %d (destroy %v), started again after %s", e.GPU, e.Destroy, f.Delay.Round(10*time.Millisecond))
			// Down past the wipe delay, whenever the faults' context ends.
			sleep(context.WithoutCancel(ctx), f.Delay)
			if err := env.EnsureAgent(context.WithoutCancel(ctx), f.Node); err != nil {
				fr.Detail += "; restart failed: " + err.Error()
			}
			fr.Ended = time.Now()
		}
	case KillDestroying:
		killWhen(atStep(agent.StepDestroying))
	case KillCreating:
		killWhen(atStep(agent.StepCreating))
	case KillMIGMode:
		killWhen(atStep(agent.StepSettingMIGMode))
	case KillOrphanGI:
		killWhen(func(st nvmlsim.State, _ []agent.JournalEntry) (string, bool) {
			for _, g := range st.GPUs {
				for _, gi := range g.GPUInstances {
					if len(gi.ComputeInstances) == 0 {
						return fmt.Sprintf("killed with GI %d %s@%d of gpu %d without compute instance", gi.ID, gi.Profile, gi.Placement.Start, g.Index), true
					}
				}
			}
			return "", false
		})
	case KillInFlight:
		if e, ok := until(agent.StepDestroying, agent.StepCreating); ok {
			_ = env.withSimLocks([]string{f.Node}, func(map[string]nvmlsim.State) error {
				sleep(ctx, 200*time.Millisecond) // the agent's next NVML call waits for the lock
				env.Cluster.KillAgent(f.Node)
				return nil
			})
			restart(fmt.Sprintf("killed inside an NVML call at %s gpu %d", e.Step, e.GPU))
		}
	case NVMLCreateCIRollbackFa:
		if _, ok := until(agent.StepCreating); ok {
			if err := r.arm(ctx, Fault{Kind: NVMLCreateCIFails, Node: f.Node, Nth: f.Nth}, fr); err != nil {
				fr.Detail = err.Error()
			}
			if err := r.arm(ctx, Fault{Kind: NVMLGIDestroyFails, Node: f.Node, Nth: 1}, fr); err != nil {
				fr.Detail = err.Error()
			}
		}
	case NVMLStall:
		if e, ok := until(agent.StepDestroying, agent.StepCreating); ok {
			if err := env.HoldSim(ctx, f.Node, f.Hold); err == nil {
				fr.Fired, fr.Detail = true, fmt.Sprintf("NVML stalled %s at %s gpu %d", f.Hold, e.Step, e.GPU)
			}
		}
	case APIConflicts:
		// From Delay into the churn, for Hold (0: to the churn's end and a second more).
		var writes, conflicts atomic.Int64
		sleep(ctx, f.Delay)
		end := t0.Add(window + time.Second)
		if f.Hold > 0 {
			end = time.Now().Add(f.Hold)
		}
		for time.Now().Before(end) && ctx.Err() == nil {
			for _, obj := range []crclient.Object{&v1alpha1.NodeMigLayout{}, &v1alpha1.NodeMigLayout{}, &v1alpha1.MigLayout{}} {
				name := ChaosLayout
				if _, ok := obj.(*v1alpha1.NodeMigLayout); ok {
					name = env.ChaosNodes[writes.Load()%int64(len(env.ChaosNodes))]
				}
				if err := env.CRC.Get(ctx, crclient.ObjectKey{Name: name}, obj); err != nil {
					continue
				}
				ann := obj.GetAnnotations()
				if ann == nil {
					ann = map[string]string{}
				}
				ann["chaos.miglayout.io/poke"] = fmt.Sprint(time.Now().UnixNano())
				obj.SetAnnotations(ann)
				switch err := env.CRC.Update(ctx, obj); {
				case err == nil:
					writes.Add(1)
				case apierrors.IsConflict(err):
					conflicts.Add(1)
				}
			}
			time.Sleep(5 * time.Millisecond)
		}
		fr.Fired = writes.Load() > 0
		fr.Detail = fmt.Sprintf("%d writes, %d of them lost to a conflict themselves", writes.Load(), conflicts.Load())
	case KillController:
		sleep(ctx, f.Delay)
		end := t0.Add(window)
		for time.Now().Before(end) && ctx.Err() == nil {
			busy := false
			for _, n := range env.ChaosNodes {
				busy = busy || len(env.Journal(n)) > 0
			}
			if busy {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		env.Cluster.KillController()
		fr.Fired, fr.Detail = true, fmt.Sprintf("controller killed at +%s", time.Since(t0).Round(10*time.Millisecond))
		sleep(context.WithoutCancel(ctx), f.Hold)
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 60*time.Second)
		defer cancel()
		if err := env.Cluster.StartController(sctx); err != nil {
			fr.Detail += "; restart failed: " + err.Error()
		}
	case PauseFlap:
		// The writes use a context that outlives the fault's: a pause the API
		// server applied is always followed by a resume, retried until it lands.
		wctx := context.WithoutCancel(ctx)
		resume := func() error {
			return retry.OnError(wait.Backoff{Steps: 8, Duration: 100 * time.Millisecond, Factor: 2, Cap: 5 * time.Second},
				func(error) bool { return true }, func() error {
					gen, err := env.SetPaused(wctx, ChaosLayout, false)
					if err == nil && gen > fr.Generation {
						// A resume that changed the spec (a layout change
						// may have ended the pause already).
						fr.Generation, fr.Resumed = gen, time.Now()
					}
					return err
				})
		}
		pauses := 0
		for i := range f.Nth {
			if i == 0 {
				sleep(ctx, f.Delay)
			} else {
				sleep(ctx, f.Hold)
			}
			if ctx.Err() != nil {
				break
			}
			_, err := env.SetPaused(wctx, ChaosLayout, true)
			if err == nil {
				pauses++
				sleep(wctx, f.Hold)
			} else {
				fr.Detail = err.Error()
			}
			// Resumed whatever happened: the pause may have landed.
			if rerr := resume(); rerr != nil {
				fr.Problem = "MigLayout left paused: " + rerr.Error()
				break
			}
			if err != nil {
				break
			}
		}
		fr.Fired = pauses > 0
		if fr.Detail == "" {
			// SetMigLayout writes the whole spec: a layout change during a pause
			// ends it early.
			fr.Detail = fmt.Sprintf("paused %d times, resumed each time (or by a layout change)", pauses)
		}
	case RestartKubelet:
		sleep(ctx, f.Delay)
		what := "the agent idle"
		if e, ok := until(agent.StepDraining, agent.StepDestroying, agent.StepCreating); ok {
			what = fmt.Sprintf("at %s gpu %d", e.Step, e.GPU)
		}
		if ctx.Err() != nil {
			return
		}
		at := time.Since(t0)
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		fr.Fired, fr.Began = true, time.Now()
		err := env.Cluster.RestartKubelet(rctx, f.Node)
		fr.Ended = time.Now()
		if err != nil {
			fr.Detail, fr.Problem = fmt.Sprintf("kubelet restart %s failed", what), "restarting the kubelet: "+err.Error()
			return
		}
		fr.Detail = fmt.Sprintf("kubelet restarted %s, +%s into the churn; the agent registered again %s later",
			what, at.Round(10*time.Millisecond), (time.Since(t0) - at).Round(10*time.Millisecond))
	case SlowScheduler:
		sleep(ctx, f.Delay)
		if err := env.StopScheduler(); err != nil {
			fr.Detail = err.Error()
			return
		}
		sleep(context.WithoutCancel(ctx), f.Hold)
		env.ResumeScheduler()
		fr.Fired, fr.Detail = true, fmt.Sprintf("kube-scheduler stopped %s", f.Hold)
	}
}

// restartWipeSlack is how long after a kubelet restart ends (the agent's plugin
// registered) its deletion of the node's slices may come: the kubelet deletes them
// beside the registrations, not before.
const restartWipeSlack = 2 * time.Second

// verdict is the monitor's verdict on a scenario: allocated devices destroyed,
// devices destroyed without a drain, allocations on tainted devices, other
// pool/allocation anomalies, and how long each pool a kubelet restart deleted
// stayed absent.
type verdict struct {
	destroyed, undrained, tainted, anomalies int
	absent                                   []time.Duration
	// checkpoint is when the monitor caught up: the next scenario's
	// findings are read from it, so that one recorded while this verdict
	// was being made is not lost between the two.
	checkpoint time.Time
}

// monitorVerdict lets the monitor catch up, reports each of its findings on the chaos
// nodes since since (allocations on tainted devices and refused ones, which fail no
// scenario, through observed; the others through problem), and counts them: allocated devices destroyed,
// devices destroyed without a drain, allocations on tainted devices, and other pool/allocation anomalies. A pool absence
// (PoolAbsence) is observed where one of the faults explains it, a kubelet restart of
// the node's or an outage of its agent past the kubelet's wipe delay (KillPastWipe),
// the deletion coming during it, and the pool was published again (its length is in
// absent); any other is an anomaly.
func (r *Runner) monitorVerdict(ctx context.Context, since time.Time, faults []FaultResult, problem, observed func(format string, args ...any)) (v verdict) {
	sleep(ctx, 300*time.Millisecond)
	v.checkpoint = time.Now()
	r.Mon.Checkpoint()
	// Without a poll since the scenario began (every one failed: the
	// simulators' locks, the API server's list), no destroyed allocation
	// could have been seen: the verdict would pass on no evidence.
	if n, lastErr := r.Mon.PollsSince(since); n == 0 {
		v.anomalies++
		problem("the monitor polled the simulators not once since %s (%s): no verdict on allocated devices destroyed", since.Format(time.TimeOnly), cmp.Or(lastErr, "no poll error"))
	}
	for _, f := range r.Mon.Findings(since, r.Env.ChaosNodes...) {
		switch f.Kind {
		case AllocatedDestroyed:
			v.destroyed++
		case UndrainedDestroyed:
			v.undrained++
		case TaintedAllocation:
			v.tainted++
			observed("%s", f)
			continue
		case RefusedAllocation:
			// No pod is bound to it (see RefusedAllocation); confirmed
			// later, it is the violation it would have been.
			observed("%s", f)
			continue
		default:
			v.anomalies++
		}
		problem("%s", f)
	}
	var restarts []FaultResult // each explains one absence
	for _, f := range faults {
		if (f.Fault.Kind == RestartKubelet || f.Fault.Kind == KillPastWipe) && f.Fired && !f.Began.IsZero() {
			restarts = append(restarts, f)
		}
	}
	explained := func(a PoolAbsence) bool {
		for i, f := range restarts {
			from := f.Began
			if f.Fault.Kind == KillPastWipe {
				from = from.Add(ChaosWipeDelay - time.Second) // the kubelet's wipe delay runs from the kill
			}
			if f.Fault.Node == a.Pool && !a.Deleted.Before(from) && !a.Deleted.After(f.Ended.Add(restartWipeSlack)) {
				restarts = slices.Delete(restarts, i, i+1)
				return true
			}
		}
		return false
	}
	// A pool left incomplete hides its devices from the scheduler, and what it
	// withdrew, until it is complete again.
	for pool, at := range r.Mon.Incomplete(r.Env.ChaosNodes...) {
		v.anomalies++
		problem("pool %s incomplete since %s: fewer or more slices of its generation than their count, nothing of it allocatable", pool, at.Format("15:04:05.000"))
	}
	for _, a := range r.Mon.Absences(since, r.Env.ChaosNodes...) {
		switch {
		case a.Published.IsZero():
			problem("%s", a)
		case !explained(a):
			problem("%s, and neither a kubelet restart nor an agent outage of the node past the wipe delay explains it", a)
		default:
			observed("%s (kubelet restarted, or agent down past the wipe delay)", a)
			v.absent = append(v.absent, a.Published.Sub(a.Deleted))
			continue
		}
		v.anomalies++
	}
	return v
}

// settleFaults records which NVML faults fired (they leave the simulator's list when
// they strike) and clears those that did not.
func (r *Runner) settleFaults(faults []FaultResult) {
	pending := map[string][]nvmlsim.Fault{}
	for _, n := range r.Env.ChaosNodes {
		sim, err := r.Env.Cluster.Sim(n)
		if err != nil {
			continue
		}
		pending[n] = sim.Snapshot().Faults
		_ = sim.ClearFaults()
	}
	for i := range faults {
		fr := &faults[i]
		if len(fr.ops) == 0 {
			continue
		}
		left := 0
		for _, p := range pending[fr.Fault.Node] {
			if slices.Contains(fr.ops, p.Op) {
				left++
			}
		}
		fr.Fired = left < len(fr.ops)
		if fr.Fired && left > 0 {
			fr.Detail = "partly struck"
		}
	}
}

func agentLog(env *Env, node string) string {
	return filepath.Join(env.Cluster.LogDir(), "agent-"+node+".log")
}

func fileSize(path string) int64 {
	st, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return st.Size()
}

func readFrom(path string, off int64) []byte {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	if _, err := f.Seek(off, io.SeekStart); err != nil {
		return nil
	}
	data, _ := io.ReadAll(f)
	return data
}

func sleep(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

func sleepUntil(ctx context.Context, t time.Time) { sleep(ctx, time.Until(t)) }

func union(lists ...[]string) []string {
	set := map[string]bool{}
	var out []string
	for _, l := range lists {
		for _, s := range l {
			if !set[s] {
				set[s] = true
				out = append(out, s)
			}
		}
	}
	return out
}

// Seeds derives n scenario seeds from a master seed: the i-th has main fault
// PrimaryFaults[(i+master) mod their number], so that every fault gets its share.
func Seeds(master int64, n int) []int64 { return SeedsOf(master, n, len(PrimaryFaults)) }

// SeedsOf is Seeds as it was when PrimaryFaults had its first mainFaults entries
// (see NewScenarioOf).
func SeedsOf(master int64, n, mainFaults int) []int64 { return cyclingSeeds(master, n, mainFaults) }

// cyclingSeeds derives n seeds from a master seed, the i-th congruent to i+master modulo
// k (a scenario's main fault is the one of that index among k).
func cyclingSeeds(master int64, n, k int) []int64 {
	rng := rand.New(rand.NewSource(master))
	m := int64(k)
	out := make([]int64, n)
	for i := range out {
		out[i] = rng.Int63n(1_000_000_000/m)*m + (int64(i)+master)%m
	}
	return out
}

// RunAll brings the chaos nodes to the first scenario's base layout and runs the
// scenarios of seeds one after the other; onResult sees each result as it comes.
func (r *Runner) RunAll(ctx context.Context, seeds []int64, onResult func(i int, res *Result)) (*Summary, error) {
	start := time.Now()
	sum := &Summary{}
	if len(seeds) == 0 {
		return sum, nil
	}
	scs := make([]*Scenario, len(seeds))
	for i, s := range seeds {
		scs[i] = NewScenarioOf(s, cmp.Or(r.MainFaults, len(PrimaryFaults)))
	}
	if err := r.Setup(ctx, scs[0]); err != nil {
		return sum, err
	}
	for i, sc := range scs {
		if ctx.Err() != nil {
			break
		}
		var next *Scenario
		if i+1 < len(scs) {
			next = scs[i+1]
		}
		res := r.Run(ctx, sc, next)
		if ctx.Err() != nil {
			break // interrupted: the result is not one
		}
		sum.Results = append(sum.Results, res)
		if onResult != nil {
			onResult(i, res)
		}
	}
	sum.Took = time.Since(start)
	return sum, ctx.Err()
}
