package chaos

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/miglayout/miglayout/api/v1alpha1"
	"github.com/miglayout/miglayout/pkg/agent"
	"github.com/miglayout/miglayout/pkg/mig/nvmlsim"
	"github.com/miglayout/miglayout/test/cluster"
	"github.com/miglayout/miglayout/test/cluster/clustertest"
	"github.com/miglayout/miglayout/test/harness"
)

// Label put on every node of the environment; its value is the node's role.
const roleLabel = "miglayout.test/chaos-role"

// The chaos nodes: every scenario acts on both through MigLayout ChaosLayout.
const (
	ChaosA100   = "chaos-a100" // 2x A100-SXM4-80GB
	ChaosH100   = "chaos-h100" // 1x H100-SXM5-80GB
	ChaosLayout = "chaos"

	a100 = "A100-SXM4-80GB"
	h100 = "H100-SXM5-80GB"
)

// RaceBindNode is the drain-race node whose agent publishes devices with binding
// conditions (--device-binding-conditions), with a settle period of 0: what binding
// conditions protect without any settle period.
const RaceBindNode = "race-bind-0ms"

// DefaultRaceSettles are the settle periods the drain race compares, one node each.
var DefaultRaceSettles = []time.Duration{0, 100 * time.Millisecond, 500 * time.Millisecond, time.Second}

// EnvOptions configures StartEnv.
type EnvOptions struct {
	// StateDir keeps the cluster's state and logs ("" = a temporary directory).
	StateDir string
	// Progress receives the cluster's start-up lines.
	Progress io.Writer
	// ChaosSettle is the settle period of the chaos nodes' agents; default 1s (the
	// scheduler stalls of the chaos scenarios stay below it; the drain race measures
	// what shorter periods let through).
	ChaosSettle time.Duration
	// RaceSettles are the settle periods of the drain-race nodes (one 1x A100 node
	// each); nil means DefaultRaceSettles, an empty non-nil slice no race nodes.
	RaceSettles []time.Duration
	// NoRaceBinding leaves out RaceBindNode.
	NoRaceBinding bool
	// Verbosity of the miglayout processes; default 2.
	Verbosity int
	// AutoBatchIdle and AutoBatchMax are the controller's Auto-mode batching windows
	// (--auto-batch-idle, --auto-batch-max); default 500ms and 3s, so that an Auto
	// repartition starts within seconds of the demand.
	AutoBatchIdle, AutoBatchMax time.Duration
}

// Env is a running test cluster (test/cluster, with the clients of clustertest.Env) and
// the chaos and drain-race nodes.
type Env struct {
	*clustertest.Env
	// ChaosNodes are the nodes the chaos scenarios use.
	ChaosNodes []string
	// RaceNodes maps each drain-race settle period to its node.
	RaceNodes map[time.Duration]string
	// RaceSettles are the settle periods of RaceNodes, ascending.
	RaceSettles []time.Duration
	// RaceBind is RaceBindNode, or "" when left out.
	RaceBind    string
	ChaosSettle time.Duration

	schedMu      sync.Mutex
	schedStopped bool
}

// ChaosWipeDelay is how long the chaos nodes' stand-in kubelets wait, once the
// agent's plugin is gone, before they delete the node's ResourceSlices (the kubelet's
// 30 s, shortened so that KillPastWipe keeps an agent down past it). It must exceed
// every other agent outage of the scenarios: a killed agent is started again within
// 8 s.
const ChaosWipeDelay = 15 * time.Second

// RaceNodeName is the drain-race node for a settle period.
func RaceNodeName(settle time.Duration) string {
	return fmt.Sprintf("race-settle-%dms", settle.Milliseconds())
}

// StartEnv starts the cluster: control plane, CRDs, the miglayout controller, and one
// agent and stand-in kubelet per node.
func StartEnv(ctx context.Context, opts EnvOptions) (*Env, error) {
	if opts.ChaosSettle == 0 {
		opts.ChaosSettle = time.Second
	}
	if opts.RaceSettles == nil {
		opts.RaceSettles = DefaultRaceSettles
	}
	if opts.AutoBatchIdle == 0 {
		opts.AutoBatchIdle = 500 * time.Millisecond
	}
	if opts.AutoBatchMax == 0 {
		opts.AutoBatchMax = 3 * time.Second
	}
	e := &Env{
		ChaosNodes: []string{ChaosA100, ChaosH100}, RaceNodes: map[time.Duration]string{},
		ChaosSettle: opts.ChaosSettle,
	}
	nodes := []cluster.NodeSpec{
		{Name: ChaosA100, GPUs: "2x" + a100, Labels: map[string]string{roleLabel: "chaos"}, SliceWipeDelay: ChaosWipeDelay},
		{Name: ChaosH100, GPUs: "1x" + h100, Labels: map[string]string{roleLabel: "chaos"}, SliceWipeDelay: ChaosWipeDelay},
	}
	for _, s := range opts.RaceSettles {
		name := RaceNodeName(s)
		e.RaceNodes[s] = name
		e.RaceSettles = append(e.RaceSettles, s)
		nodes = append(nodes, cluster.NodeSpec{
			Name: name, GPUs: "1x" + a100, Labels: map[string]string{roleLabel: "race"},
			AgentArgs: []string{"--settle-period=" + s.String()},
		})
	}
	sort.Slice(e.RaceSettles, func(i, j int) bool { return e.RaceSettles[i] < e.RaceSettles[j] })
	if !opts.NoRaceBinding && len(opts.RaceSettles) > 0 {
		e.RaceBind = RaceBindNode
		nodes = append(nodes, cluster.NodeSpec{
			Name: RaceBindNode, GPUs: "1x" + a100, Labels: map[string]string{roleLabel: "race"},
			AgentArgs: []string{"--settle-period=0s", "--device-binding-conditions"},
		})
	}
	cl, err := cluster.Start(ctx, cluster.Options{
		StateDir: opts.StateDir, Progress: opts.Progress, Nodes: nodes,
		SettlePeriod: opts.ChaosSettle, Verbosity: opts.Verbosity,
		ControllerArgs: []string{
			"--auto-batch-idle=" + opts.AutoBatchIdle.String(),
			"--auto-batch-max=" + opts.AutoBatchMax.String(),
		},
	})
	if err != nil {
		return nil, err
	}
	if e.Env, err = clustertest.NewEnv(cl); err != nil {
		cl.Stop()
		return nil, err
	}
	return e, nil
}

// AllRaceNodes returns the drain-race nodes: by settle period, then RaceBind.
func (e *Env) AllRaceNodes() []string {
	var out []string
	for _, s := range e.RaceSettles {
		out = append(out, e.RaceNodes[s])
	}
	if e.RaceBind != "" {
		out = append(out, e.RaceBind)
	}
	return out
}

// Stop resumes the scheduler if a fault stopped it and stops the cluster.
func (e *Env) Stop() error {
	e.ResumeScheduler()
	return e.Cluster.Stop()
}

// ---- MigLayouts ----

// SetMigLayout creates the MigLayout or replaces its spec (retrying on conflicts, which
// the concurrent-writer fault provokes) and returns its new generation.
func (e *Env) SetMigLayout(ctx context.Context, name string, spec v1alpha1.MigLayoutSpec) (int64, error) {
	var gen int64
	backoff := wait.Backoff{Steps: 50, Duration: 10 * time.Millisecond, Factor: 1.2, Jitter: 0.5, Cap: 200 * time.Millisecond}
	err := retry.RetryOnConflict(backoff, func() error {
		ml := &v1alpha1.MigLayout{}
		err := e.CRC.Get(ctx, crclient.ObjectKey{Name: name}, ml)
		if apierrors.IsNotFound(err) {
			ml = &v1alpha1.MigLayout{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec}
			if err := e.CRC.Create(ctx, ml); err != nil {
				return err
			}
			gen = ml.Generation
			return nil
		}
		if err != nil {
			return err
		}
		ml.Spec = spec
		if err := e.CRC.Update(ctx, ml); err != nil {
			return err
		}
		gen = ml.Generation
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("setting MigLayout %s: %w", name, err)
	}
	return gen, nil
}

// SetPaused sets spec.paused of MigLayout name with a merge patch (as `kubectl
// miglayout pause|resume` does: no write conflict with SetMigLayout, though
// SetMigLayout, which writes the whole spec, ends a pause) and returns the generation
// it made.
func (e *Env) SetPaused(ctx context.Context, name string, paused bool) (int64, error) {
	ml := &v1alpha1.MigLayout{ObjectMeta: metav1.ObjectMeta{Name: name}}
	patch := crclient.RawPatch(types.MergePatchType, fmt.Appendf(nil, `{"spec":{"paused":%t}}`, paused))
	if err := e.CRC.Patch(ctx, ml, patch); err != nil {
		return 0, fmt.Errorf("setting spec.paused of MigLayout %s to %t: %w", name, paused, err)
	}
	return ml.Generation, nil
}

// DeleteMigLayout deletes a MigLayout (absent is fine).
func (e *Env) DeleteMigLayout(ctx context.Context, name string) error {
	err := e.CRC.Delete(ctx, &v1alpha1.MigLayout{ObjectMeta: metav1.ObjectMeta{Name: name}})
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	return nil
}

// ---- simulated hardware ----

// SimState reads a node's simulator state (Snapshot).
func (e *Env) SimState(node string) (nvmlsim.State, error) {
	sim, err := e.Cluster.Sim(node)
	if err != nil {
		return nvmlsim.State{}, err
	}
	return sim.Snapshot(), nil
}

// withSimLocks runs fn while holding the simulator lock of every node given, in name
// order: no agent or kubelet can make an NVML call on those nodes meanwhile. fn gets the
// states read under the locks.
func (e *Env) withSimLocks(nodes []string, fn func(states map[string]nvmlsim.State) error) error {
	nodes = append([]string(nil), nodes...)
	sort.Strings(nodes)
	states := map[string]nvmlsim.State{}
	for _, n := range nodes {
		path := e.Cluster.SimulatorState(n)
		f, err := os.OpenFile(path+".lock", os.O_CREATE|os.O_RDWR, 0o644)
		if err != nil {
			return err
		}
		defer f.Close() // releases the lock
		for {
			err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX)
			if !errors.Is(err, syscall.EINTR) {
				break
			}
		}
		if err != nil {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		var st nvmlsim.State
		if err := json.Unmarshal(data, &st); err != nil {
			return fmt.Errorf("decoding %s: %w", path, err)
		}
		states[n] = st
	}
	return fn(states)
}

// HoldSim holds a node's simulator lock for d: every NVML call of its agent (and of its
// kubelet) blocks meanwhile, as on a GPU whose driver stalls.
func (e *Env) HoldSim(ctx context.Context, node string, d time.Duration) error {
	return e.withSimLocks([]string{node}, func(map[string]nvmlsim.State) error {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
		}
		return nil
	})
}

// JournalPath is a node agent's journal file (test/cluster's layout: nodes/<node>/agent).
func (e *Env) JournalPath(node string) string {
	return filepath.Join(e.Cluster.StateDir(), "nodes", node, "agent", "journal.json")
}

// Journal reads a node agent's journal entries (none when the file is missing or being
// replaced).
func (e *Env) Journal(node string) []agent.JournalEntry {
	data, err := os.ReadFile(e.JournalPath(node))
	if err != nil {
		return nil
	}
	var f struct {
		Entries []agent.JournalEntry `json:"entries"`
	}
	if json.Unmarshal(data, &f) != nil {
		return nil
	}
	return f.Entries
}

// ---- the scheduler ----

// StopScheduler stops kube-scheduler with SIGSTOP (a scheduler that stalls mid-cycle:
// decisions already taken are written when it resumes).
func (e *Env) StopScheduler() error {
	e.schedMu.Lock()
	defer e.schedMu.Unlock()
	pid := e.Cluster.ControlPlane().Pids()[harness.Scheduler]
	if pid == 0 {
		return errors.New("no kube-scheduler pid")
	}
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		return err
	}
	e.schedStopped = true
	return nil
}

// ResumeScheduler continues a stopped kube-scheduler.
func (e *Env) ResumeScheduler() {
	e.schedMu.Lock()
	defer e.schedMu.Unlock()
	if !e.schedStopped {
		return
	}
	if pid := e.Cluster.ControlPlane().Pids()[harness.Scheduler]; pid != 0 {
		_ = syscall.Kill(pid, syscall.SIGCONT)
	}
	e.schedStopped = false
}

// ---- agents ----

// EnsureAgent starts a node's agent again when it is not running.
func (e *Env) EnsureAgent(ctx context.Context, node string) error {
	if e.Cluster.AgentPid(node) != 0 {
		return nil
	}
	return e.Cluster.StartAgent(ctx, node)
}

// ---- namespaces ----

// NewNamespace creates a namespace for claims and pods.
func (e *Env) NewNamespace(ctx context.Context, name string) error {
	_, err := harness.CreateNamespace(ctx, e.Client, name)
	return err
}

// ReleaseAll deletes every pod and then every ResourceClaim of ns and waits until both
// are gone (the stand-in kubelets tear bound pods down; the claim controller removes the
// claims' finalizers once they are no longer reserved).
func (e *Env) ReleaseAll(ctx context.Context, ns string) error {
	_ = e.Client.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
	var left string
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 90*time.Second, true, func(ctx context.Context) (bool, error) {
		pods, err := e.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		var names []string
		for _, p := range pods.Items {
			names = append(names, fmt.Sprintf("%s(node %q, phase %s)", p.Name, p.Spec.NodeName, p.Status.Phase))
		}
		left = strings.Join(names, ", ")
		return len(pods.Items) == 0, nil
	})
	if err != nil {
		return fmt.Errorf("pods of %s not gone: %w; left: %s", ns, err, left)
	}
	_ = e.Client.ResourceV1().ResourceClaims(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		claims, err := e.Client.ResourceV1().ResourceClaims(ns).List(ctx, metav1.ListOptions{})
		return err == nil && len(claims.Items) == 0, nil
	})
	if err != nil {
		return fmt.Errorf("claims of %s not gone: %w", ns, err)
	}
	return nil
}

// Wrap gives the helpers of this package (SetMigLayout, WaitConverged, Check, SimState,
// ...) to a cluster started elsewhere, e.g. by clustertest.Main; it has no chaos or race
// nodes.
func Wrap(ce *clustertest.Env) *Env {
	return &Env{Env: ce, RaceNodes: map[time.Duration]string{}}
}
