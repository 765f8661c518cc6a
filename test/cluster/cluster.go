// Package cluster runs a whole miglayout test cluster on one machine, for the e2e tests and
// the demo: the real control plane of test/harness (etcd, kube-apiserver, kube-scheduler,
// kube-controller-manager), miglayout's CRDs and DeviceClasses, fake Nodes, one
// miglayout-agent process per node on the NVML simulator (its own --simulate spec and
// state file), the miglayout-controller process (leader-elected), and one stand-in kubelet
// per node (test/kubelet, in this process) that prepares claims through the agent's real
// DRA gRPC socket and records simulated processes on the prepared devices.
//
//	c, err := cluster.Start(ctx, cluster.Options{Nodes: []cluster.NodeSpec{
//		{Name: "node-a100", GPUs: "4xA100-SXM4-80GB", Labels: map[string]string{"pool": "a"}},
//	}})
//	defer c.Stop()
//
// The agent and controller are built from this module with go build (cached by the Go
// build cache), unless Options.MiglayoutBinDir holds them. Every process logs to
// StateDir/logs/<name>.log (DumpLogs prints their tails); every child process is in its own
// process group with a parent-death signal, so it dies with the test binary.
//
// Layout of StateDir: bin/ (built binaries), logs/, controlplane/ (kubeconfig, pki, etcd),
// nodes/<node>/{sim.json, agent/, cdi/, root/, plugins_registry/, plugins/}. Every Start
// wipes nodes/: each cluster starts with fresh GPUs (MIG off).
package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2/textlogger"

	"github.com/miglayout/miglayout/pkg/mig/nvmlsim"
	"github.com/miglayout/miglayout/pkg/slices"
	"github.com/miglayout/miglayout/test/harness"
	"github.com/miglayout/miglayout/test/kubelet"
)

// Driver is the DRA driver name the agents publish under.
const Driver = slices.DefaultDriverName

// LeaderElectionNamespace and LeaderElectionID locate the controller's Lease;
// AgentLeaseNamespace holds the agents' heartbeat Leases.
const (
	LeaderElectionNamespace = "kube-system"
	LeaderElectionID        = "miglayout-controller.miglayout.io"
	AgentLeaseNamespace     = "kube-system"
)

// NodeSpec is one fake node with simulated GPUs.
type NodeSpec struct {
	// Name of the Node. Required.
	Name string
	// GPUs is the simulator's hardware spec, e.g. "4xA100-SXM4-80GB" or
	// "2xH100-SXM5-80GB,1xA30-24GB". Required.
	GPUs string
	// Labels are added to the Node's (kubernetes.io/hostname etc. are set anyway).
	Labels map[string]string
	// AgentArgs are extra flags of this node's agent, after the cluster's.
	AgentArgs []string
	// SliceWipeDelay is how long the node's stand-in kubelet lets the DRA driver stay
	// unusable (its plugin gone or its connection down) before it deletes the driver's
	// ResourceSlices of the node; default kubelet.DefaultSliceWipeDelay, the kubelet's
	// 30 s.
	SliceWipeDelay time.Duration
}

// Options configures Start.
type Options struct {
	// Nodes are the GPU nodes, each with its agent and stand-in kubelet.
	Nodes []NodeSpec
	// StateDir receives everything (see the package documentation). Default: a new
	// temporary directory, removed by Stop.
	StateDir string
	// BinDir holds the control-plane binaries; default harness.BinDir().
	BinDir string
	// MiglayoutBinDir holds prebuilt miglayout-agent, miglayout-controller and
	// kubectl-miglayout; default: build them into StateDir/bin.
	MiglayoutBinDir string
	// ModuleRoot is miglayout's source tree (cmd/, deploy/); default: found from the
	// working directory (ModuleRoot()).
	ModuleRoot string
	// SettlePeriod is the agents' --settle-period; default 1s.
	SettlePeriod time.Duration
	// ResyncPeriod is the agents' --resync-period; default 10s.
	ResyncPeriod time.Duration
	// Verbosity is the klog -v of the agents, the controller and the stand-in kubelets;
	// default 2.
	Verbosity int
	// AgentArgs and ControllerArgs are extra flags, appended last.
	AgentArgs, ControllerArgs []string
	// SchedulerArgs are extra flags of kube-scheduler, appended last (e.g.
	// --leader-elect=true: the harness runs it without leader election).
	SchedulerArgs []string
	// NoController leaves the controller out (tests that write NodeMigLayouts themselves).
	NoController bool
	// Progress, when set, receives one line per step.
	Progress io.Writer
	// Timeout bounds Start after the build; default 4 minutes.
	Timeout time.Duration
}

// Cluster is a running test cluster. Stop it when done.
type Cluster struct {
	opts     Options
	stateDir string
	// controllerKubeconfig carries a token of the chart's controller
	// ServiceAccount, agentAccount names its agent one (installRBAC).
	controllerKubeconfig, agentAccount string
	tempState                          bool
	sockRoot                           string // short directory for sockets when StateDir is deep ("" = under StateDir)
	logDir                             string
	moduleRoot                         string
	binDir                             string // control plane
	agentBin                           string
	ctrlBin                            string
	mlBinDir                           string // agentBin's, ctrlBin's and kubectl-miglayout's

	cp      *harness.ControlPlane
	cfg     *rest.Config
	client  kubernetes.Interface
	applier *applier
	spawner *harness.Spawner

	mu         sync.Mutex
	nodes      map[string]*node
	order      []string
	controller *harness.Process

	stopOnce sync.Once
	stopErr  error
}

type node struct {
	spec         NodeSpec
	dir          string
	simState     string
	agentState   string
	cdiDir       string
	hostRoot     string
	registrarDir string
	pluginsDir   string
	agent        *harness.Process
	kubelet      *kubelet.Kubelet
	// kubeconfig carries the agent's token, bound to a pod on the node
	// (agentCredentials).
	kubeconfig string
}

// Start builds what is missing, starts the control plane, applies deploy/crds and
// deploy/deviceclasses, creates the nodes, starts their agents and stand-in kubelets and
// the controller, and waits until every agent has published its pool and registered its
// DRA plugin with its kubelet, and the controller holds its Lease. (An agent publishes its
// pool once a MigLayout selects its node: use WaitForPool.) On failure everything started
// is stopped.
func Start(ctx context.Context, opts Options) (_ *Cluster, err error) {
	if len(opts.Nodes) == 0 {
		return nil, errors.New("cluster: no nodes")
	}
	seen := map[string]bool{}
	for _, n := range opts.Nodes {
		if n.Name == "" || n.GPUs == "" {
			return nil, fmt.Errorf("cluster: node %q needs a name and GPUs", n.Name)
		}
		if seen[n.Name] {
			return nil, fmt.Errorf("cluster: node %s given twice", n.Name)
		}
		seen[n.Name] = true
	}
	if opts.SettlePeriod == 0 {
		opts.SettlePeriod = time.Second
	}
	if opts.ResyncPeriod == 0 {
		opts.ResyncPeriod = 10 * time.Second
	}
	if opts.Verbosity == 0 {
		opts.Verbosity = 2
	}
	if opts.Timeout == 0 {
		opts.Timeout = 4 * time.Minute
	}
	c := &Cluster{opts: opts, nodes: map[string]*node{}, stateDir: opts.StateDir}
	t0 := time.Now()

	if c.stateDir == "" {
		sweepStaleStateDirs()
		d, err := os.MkdirTemp("", tempPrefix)
		if err != nil {
			return nil, err
		}
		c.stateDir, c.tempState = d, true
	}
	if c.stateDir, err = filepath.Abs(c.stateDir); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			c.Stop()
		}
	}()
	if live := harness.LivePids(filepath.Join(c.stateDir, "controlplane")); len(live) > 0 {
		return nil, harness.StillRunningError("a cluster", c.stateDir, live)
	}
	c.logDir = filepath.Join(c.stateDir, "logs")
	for _, d := range []string{c.stateDir, c.logDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	if err := os.RemoveAll(filepath.Join(c.stateDir, "nodes")); err != nil {
		return nil, err
	}

	c.moduleRoot = opts.ModuleRoot
	if c.moduleRoot == "" {
		if c.moduleRoot, err = ModuleRoot(); err != nil {
			return nil, err
		}
	}
	c.binDir = opts.BinDir
	if c.binDir == "" {
		if c.binDir, err = harness.BinDir(); err != nil {
			return nil, err
		}
	}
	mlBin := opts.MiglayoutBinDir
	if mlBin == "" || !executable(filepath.Join(mlBin, AgentBinary)) || !executable(filepath.Join(mlBin, ControllerBinary)) ||
		!executable(filepath.Join(mlBin, PluginBinary)) {
		if mlBin == "" {
			mlBin = filepath.Join(c.stateDir, "bin")
		}
		c.progress("building %s, %s and %s into %s (go build, cached after the first time)", AgentBinary, ControllerBinary, PluginBinary, mlBin)
		if err := buildBinaries(ctx, c.moduleRoot, mlBin); err != nil {
			return nil, err
		}
		c.progress("built in %.1fs", time.Since(t0).Seconds())
	}
	c.agentBin, c.ctrlBin, c.mlBinDir = filepath.Join(mlBin, AgentBinary), filepath.Join(mlBin, ControllerBinary), mlBin

	ctx, cancel := context.WithTimeout(ctx, opts.Timeout)
	defer cancel()
	c.cp, err = harness.Start(ctx, harness.Options{
		BinDir: c.binDir, StateDir: filepath.Join(c.stateDir, "controlplane"), LogDir: c.logDir, Progress: opts.Progress,
		SchedulerArgs: opts.SchedulerArgs,
	})
	if err != nil {
		return nil, err
	}
	c.cfg = c.cp.Config()
	if c.client, err = kubernetes.NewForConfig(c.cfg); err != nil {
		return nil, err
	}
	if c.applier, err = newApplier(c.cfg); err != nil {
		return nil, err
	}
	objs, err := readManifestDirs(filepath.Join(c.moduleRoot, "deploy", "crds"), filepath.Join(c.moduleRoot, "deploy", "deviceclasses"))
	if err != nil {
		return nil, err
	}
	if err := c.applier.apply(ctx, objs); err != nil {
		return nil, err
	}
	if err := c.applier.waitEstablished(ctx, objs); err != nil {
		return nil, err
	}
	c.progress("applied deploy/crds and deploy/deviceclasses (%d objects)", len(objs))
	if err := c.installRBAC(ctx); err != nil {
		return nil, err
	}

	c.spawner = harness.NewSpawner()
	for _, spec := range opts.Nodes {
		n, err := c.newNode(spec)
		if err != nil {
			return nil, err
		}
		c.mu.Lock()
		c.nodes[spec.Name] = n
		c.order = append(c.order, spec.Name)
		c.mu.Unlock()
		if _, err := harness.CreateNode(ctx, c.client, spec.Name, spec.Labels); err != nil {
			return nil, err
		}
		if err := c.agentCredentials(ctx, n); err != nil {
			return nil, err
		}
		if err := c.startKubelet(ctx, n); err != nil {
			return nil, err
		}
		if err := c.startAgent(n); err != nil {
			return nil, err
		}
	}
	if !opts.NoController {
		if err := c.startController(); err != nil {
			return nil, err
		}
	}
	for _, name := range c.order {
		n := c.nodes[name]
		if err := c.waitAgent(ctx, n, time.Time{}); err != nil {
			return nil, err
		}
		c.progress("node %s (%s): agent up, its DRA plugin registered with the stand-in kubelet", name, spec(n))
	}
	if !opts.NoController {
		if err := c.waitLeader(ctx); err != nil {
			return nil, err
		}
		c.progress("miglayout-controller is the leader")
	}
	c.progress("cluster up in %.1fs; KUBECONFIG=%s", time.Since(t0).Seconds(), c.Kubeconfig())
	return c, nil
}

func spec(n *node) string { return n.spec.GPUs }

func (c *Cluster) progress(format string, args ...any) {
	if c.opts.Progress != nil {
		fmt.Fprintf(c.opts.Progress, "cluster: "+format+"\n", args...)
	}
}

func (c *Cluster) newNode(spec NodeSpec) (*node, error) {
	dir := filepath.Join(c.stateDir, "nodes", spec.Name)
	n := &node{
		spec: spec, dir: dir,
		simState:   filepath.Join(dir, "sim.json"),
		agentState: filepath.Join(dir, "agent"),
		cdiDir:     filepath.Join(dir, "cdi"),
		hostRoot:   filepath.Join(dir, "root"),
	}
	sockDir := dir
	// A unix socket path has at most 107 bytes: keep the DRA socket
	// (<plugins>/<driver>/dra.sock) short when StateDir is deep.
	if len(filepath.Join(dir, "plugins", Driver, "dra.sock")) > 100 {
		if c.sockRoot == "" {
			d, err := os.MkdirTemp("", "mlc-")
			if err != nil {
				return nil, err
			}
			c.sockRoot = d
		}
		sockDir = filepath.Join(c.sockRoot, spec.Name)
	}
	n.registrarDir = filepath.Join(sockDir, "plugins_registry")
	n.pluginsDir = filepath.Join(sockDir, "plugins")
	for _, d := range []string{dir, n.agentState, n.cdiDir, n.hostRoot, n.registrarDir, filepath.Join(n.pluginsDir, Driver)} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	return n, nil
}

func (c *Cluster) startKubelet(ctx context.Context, n *node) error {
	f, err := os.OpenFile(filepath.Join(c.logDir, "kubelet-"+n.spec.Name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	logger := textlogger.NewLogger(textlogger.NewConfig(textlogger.Output(f), textlogger.Verbosity(c.opts.Verbosity+1)))
	k, err := kubelet.Start(ctx, kubelet.Config{
		NodeName: n.spec.Name, Client: c.client,
		RegistrarDir: n.registrarDir, CDIDir: n.cdiDir, SimulatorState: n.simState, HostRoot: n.hostRoot,
		SliceWipeDelay: n.spec.SliceWipeDelay,
		Logger:         &logger,
	})
	if err != nil {
		f.Close()
		return err
	}
	c.mu.Lock()
	n.kubelet = k
	c.mu.Unlock()
	return nil
}

func (c *Cluster) agentArgs(n *node) []string {
	args := []string{
		"--node-name=" + n.spec.Name,
		"--simulate=" + n.spec.GPUs,
		"--simulator-state=" + n.simState,
		"--state-dir=" + n.agentState,
		"--cdi-dir=" + n.cdiDir,
		"--host-root=" + n.hostRoot,
		"--kubelet-registrar-dir=" + n.registrarDir,
		"--kubelet-plugins-dir=" + n.pluginsDir,
		"--settle-period=" + c.opts.SettlePeriod.String(),
		"--resync-period=" + c.opts.ResyncPeriod.String(),
		"--lease-namespace=" + AgentLeaseNamespace,
		"--metrics-bind-address=0",
		"--health-probe-bind-address=0",
		fmt.Sprintf("-v=%d", c.opts.Verbosity),
	}
	args = append(args, c.opts.AgentArgs...)
	return append(args, n.spec.AgentArgs...)
}

// startAgent starts n's agent process; the kubeconfig comes through $KUBECONFIG
// (controller-runtime's GetConfig), as the agent's flag set has no --kubeconfig.
func (c *Cluster) startAgent(n *node) error {
	p, err := c.spawner.Run("agent-"+n.spec.Name, c.agentBin, filepath.Join(c.logDir, "agent-"+n.spec.Name+".log"),
		c.agentArgs(n), harness.RunOptions{Env: childEnv("KUBECONFIG=" + n.kubeconfig), Append: true})
	if err != nil {
		return err
	}
	c.mu.Lock()
	n.agent = p
	c.mu.Unlock()
	return nil
}

func (c *Cluster) startController() error {
	args := []string{
		"--kubeconfig=" + c.controllerKubeconfig,
		"--leader-elect=true",
		"--leader-election-namespace=" + LeaderElectionNamespace,
		"--leader-election-id=" + LeaderElectionID,
		"--agent-lease-namespace=" + AgentLeaseNamespace,
		"--metrics-bind-address=0",
		"--health-probe-bind-address=0",
		fmt.Sprintf("-v=%d", c.opts.Verbosity),
	}
	p, err := c.spawner.Run("controller", c.ctrlBin, filepath.Join(c.logDir, "controller.log"),
		append(args, c.opts.ControllerArgs...), harness.RunOptions{Env: childEnv(), Append: true})
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.controller = p
	c.mu.Unlock()
	return nil
}

// waitAgent waits until n's kubelet has registered the agent's plugin at or after since,
// failing early when the agent exits.
func (c *Cluster) waitAgent(ctx context.Context, n *node, since time.Time) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	c.mu.Lock()
	p := n.agent
	c.mu.Unlock()
	go func() {
		select {
		case <-p.Done():
			cancel()
		case <-ctx.Done():
		}
	}()
	err := c.Kubelet(n.spec.Name).WaitForPlugin(ctx, Driver, since)
	if p.Exited() {
		return p.ExitError()
	}
	if err != nil {
		return fmt.Errorf("node %s: %w; last lines of %s:\n%s", n.spec.Name, err, p.LogPath(), harness.TailFile(p.LogPath(), 30))
	}
	return nil
}

// WaitForPool waits until the node's pool has a ResourceSlice.
func (c *Cluster) WaitForPool(ctx context.Context, nodeName string) error {
	n := c.node(nodeName)
	err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		if n.agent.Exited() {
			return false, n.agent.ExitError()
		}
		list, err := c.client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{
			FieldSelector: "spec.nodeName=" + nodeName + ",spec.driver=" + Driver})
		if err != nil {
			return false, nil
		}
		return len(list.Items) > 0, nil
	})
	if err != nil {
		return fmt.Errorf("node %s: waiting for its ResourceSlice: %w", nodeName, err)
	}
	return nil
}

func (c *Cluster) waitLeader(ctx context.Context) error {
	err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		if c.controller.Exited() {
			return false, c.controller.ExitError()
		}
		l, err := c.client.CoordinationV1().Leases(LeaderElectionNamespace).Get(ctx, LeaderElectionID, metav1.GetOptions{})
		if apierrors.IsNotFound(err) || err != nil {
			return false, nil
		}
		return l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity != "", nil
	})
	if err != nil {
		return fmt.Errorf("waiting for miglayout-controller to hold Lease %s/%s: %w; last lines of %s:\n%s",
			LeaderElectionNamespace, LeaderElectionID, err, c.controller.LogPath(), harness.TailFile(c.controller.LogPath(), 30))
	}
	return nil
}

func (c *Cluster) node(name string) *node {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.nodes[name]
	if n == nil {
		panic(fmt.Sprintf("cluster: no node %q", name))
	}
	return n
}

// Config returns a new admin client configuration.
func (c *Cluster) Config() *rest.Config { return rest.CopyConfig(c.cfg) }

// Client is an admin clientset.
func (c *Cluster) Client() kubernetes.Interface { return c.client }

// Kubeconfig is the path of the admin kubeconfig.
func (c *Cluster) Kubeconfig() string { return c.cp.Kubeconfig() }

// ControlPlane is the underlying control plane.
func (c *Cluster) ControlPlane() *harness.ControlPlane { return c.cp }

// StateDir and LogDir are the directories in use.
func (c *Cluster) StateDir() string { return c.stateDir }
func (c *Cluster) LogDir() string   { return c.logDir }

// ModuleRoot is the source tree the cluster was built from.
func (c *Cluster) ModuleRoot() string { return c.moduleRoot }

// Nodes returns the node names in the order of Options.Nodes.
func (c *Cluster) Nodes() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.order...)
}

// SimulatorState is the path of a node's NVML simulator state file.
func (c *Cluster) SimulatorState(nodeName string) string { return c.node(nodeName).simState }

// CDIDir is the directory a node's agent writes CDI specs to.
func (c *Cluster) CDIDir(nodeName string) string { return c.node(nodeName).cdiDir }

// Sim opens a node's simulated GPUs (nvmlsim.OpenState): Snapshot, StartProcess,
// InjectFault, ... act on the same hardware the node's agent sees.
func (c *Cluster) Sim(nodeName string) (*nvmlsim.Sim, error) {
	return nvmlsim.OpenState(c.node(nodeName).simState)
}

// Kubelet is a node's stand-in kubelet.
func (c *Cluster) Kubelet(nodeName string) *kubelet.Kubelet {
	n := c.node(nodeName)
	c.mu.Lock()
	defer c.mu.Unlock()
	return n.kubelet
}

// RestartKubelet restarts a node's stand-in kubelet (kubelet.Kubelet.Restart: the pods
// keep running, the node's ResourceSlices are deleted, the plugins register again) and
// waits until the agent's DRA plugin has registered with the new one.
func (c *Cluster) RestartKubelet(ctx context.Context, nodeName string) error {
	n := c.node(nodeName)
	since := time.Now()
	k, err := c.Kubelet(nodeName).Restart(ctx)
	if err != nil {
		return fmt.Errorf("restarting the stand-in kubelet of node %s: %w", nodeName, err)
	}
	c.mu.Lock()
	n.kubelet = k
	c.mu.Unlock()
	return c.waitAgent(ctx, n, since)
}

// AgentPid is the process id of a node's agent (0 when it is not running).
func (c *Cluster) AgentPid(nodeName string) int {
	n := c.node(nodeName)
	c.mu.Lock()
	defer c.mu.Unlock()
	if n.agent == nil || n.agent.Exited() {
		return 0
	}
	return n.agent.Pid()
}

// KillAgent kills a node's agent with SIGKILL (a crash: no cleanup, the registration and
// DRA sockets stay behind) and waits until it has exited.
func (c *Cluster) KillAgent(nodeName string) {
	n := c.node(nodeName)
	c.mu.Lock()
	p := n.agent
	c.mu.Unlock()
	if p != nil {
		p.Stop(0)
	}
}

// StopAgent stops a node's agent gracefully (SIGTERM, SIGKILL after 10 s).
func (c *Cluster) StopAgent(nodeName string) {
	n := c.node(nodeName)
	c.mu.Lock()
	p := n.agent
	c.mu.Unlock()
	if p != nil {
		p.Stop(10 * time.Second)
	}
}

// StartAgent starts a node's agent again (after KillAgent or StopAgent) with the same
// flags and state, and waits until the stand-in kubelet has registered its DRA plugin
// anew.
func (c *Cluster) StartAgent(ctx context.Context, nodeName string) error {
	n := c.node(nodeName)
	c.mu.Lock()
	running := n.agent != nil && !n.agent.Exited()
	c.mu.Unlock()
	if running {
		return fmt.Errorf("the agent of node %s is running", nodeName)
	}
	since := time.Now()
	if err := c.startAgent(n); err != nil {
		return err
	}
	return c.waitAgent(ctx, n, since)
}

// KillController kills miglayout-controller with SIGKILL (a crash: its Lease is left
// held until it expires) and waits until it has exited.
func (c *Cluster) KillController() {
	c.mu.Lock()
	p := c.controller
	c.mu.Unlock()
	if p != nil {
		p.Stop(0)
	}
}

// StartController starts miglayout-controller again (after KillController) with the same
// flags and waits until it holds its Lease (after a crash, once the old holder's Lease
// has expired).
func (c *Cluster) StartController(ctx context.Context) error {
	c.mu.Lock()
	running := c.controller != nil && !c.controller.Exited()
	c.mu.Unlock()
	if running {
		return errors.New("miglayout-controller is running")
	}
	if err := c.startController(); err != nil {
		return err
	}
	since := time.Now()
	return wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		if c.controller.Exited() {
			return false, c.controller.ExitError()
		}
		l, err := c.client.CoordinationV1().Leases(LeaderElectionNamespace).Get(ctx, LeaderElectionID, metav1.GetOptions{})
		if err != nil || l.Spec.AcquireTime == nil {
			return false, nil
		}
		return l.Spec.AcquireTime.After(since), nil
	})
}

// Kubectl runs the kubectl of the control-plane binaries against the cluster and returns
// its standard output (standard error joins the error). The kubectl-miglayout built with
// the agent is first on its PATH, so "miglayout ..." arguments run this module's plugin
// as kubectl finds plugins.
func (c *Cluster) Kubectl(ctx context.Context, args ...string) ([]byte, error) {
	bin := c.KubectlPath()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = childEnv("KUBECONFIG="+c.Kubeconfig(), "PATH="+c.MiglayoutBinDir()+string(os.PathListSeparator)+os.Getenv("PATH"))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, fmt.Errorf("kubectl %v: %w: %s", args, err, stderr.String())
	}
	return out, nil
}

// MiglayoutBinDir is the directory of the miglayout binaries the cluster runs, and of
// kubectl-miglayout (put it first on PATH to run "kubectl miglayout").
func (c *Cluster) MiglayoutBinDir() string { return c.mlBinDir }

// KubectlPath is the kubectl binary built with the control plane.
func (c *Cluster) KubectlPath() string { return filepath.Join(c.binDir, "kubectl") }

// Apply server-side applies YAML or JSON manifests (several documents allowed), forcing
// conflicts, as field manager FieldManager.
func (c *Cluster) Apply(ctx context.Context, manifests []byte) error {
	objs, err := decodeManifests(manifests)
	if err != nil {
		return err
	}
	return c.applier.apply(ctx, objs)
}

// ApplyFile applies a manifest file; a relative path is relative to ModuleRoot.
func (c *Cluster) ApplyFile(ctx context.Context, path string) error {
	if !filepath.IsAbs(path) {
		path = filepath.Join(c.moduleRoot, path)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	return c.Apply(ctx, data)
}

// Exited reports the first process (control plane, controller, agent) that died without
// being stopped, with its log tail, or nil.
func (c *Cluster) Exited() error {
	if err := c.cp.Exited(); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	procs := []*harness.Process{c.controller}
	for _, name := range c.order {
		procs = append(procs, c.nodes[name].agent)
	}
	for _, p := range procs {
		if p != nil && p.Exited() && !p.Stopped() {
			return p.ExitError()
		}
	}
	return nil
}

// DumpLogs writes the last lines of every log (control plane, controller, agents,
// kubelets) to w.
func (c *Cluster) DumpLogs(w io.Writer, lines int) {
	files, _ := filepath.Glob(filepath.Join(c.logDir, "*.log"))
	sort.Strings(files)
	for _, f := range files {
		fmt.Fprintf(w, "==== last %d lines of %s\n%s\n", lines, f, harness.TailFile(f, lines))
	}
}

// Stop stops the kubelets, the agents and the controller, then the control plane, and
// removes a temporary StateDir. Safe to call more than once.
func (c *Cluster) Stop() error {
	c.stopOnce.Do(func() {
		c.mu.Lock()
		nodes := make([]*node, 0, len(c.nodes))
		for _, n := range c.nodes {
			nodes = append(nodes, n)
		}
		ctrl := c.controller
		c.mu.Unlock()
		for _, n := range nodes {
			if k := c.Kubelet(n.spec.Name); k != nil {
				k.Stop()
			}
		}
		var wg sync.WaitGroup
		for _, n := range nodes {
			if n.agent != nil {
				wg.Add(1)
				go func() { defer wg.Done(); n.agent.Stop(5 * time.Second) }()
			}
		}
		if ctrl != nil {
			wg.Add(1)
			go func() { defer wg.Done(); ctrl.Stop(5 * time.Second) }()
		}
		wg.Wait()
		if c.spawner != nil {
			c.spawner.Close()
		}
		if c.cp != nil {
			c.stopErr = c.cp.Stop()
		}
		if c.sockRoot != "" {
			_ = os.RemoveAll(c.sockRoot)
		}
		if c.tempState {
			c.stopErr = errors.Join(c.stopErr, os.RemoveAll(c.stateDir))
		}
	})
	return c.stopErr
}

// childEnv is the environment of the agents, the controller and kubectl: harness.ChildEnv
// without NODE_NAME (each agent gets its node by flag), plus extra.
func childEnv(extra ...string) []string {
	return append(harness.ChildEnv("NODE_NAME"), extra...)
}

// tempPrefix names the temporary state directories of clusters started
// without Options.StateDir.
const tempPrefix = "miglayout-cluster-"

// sweepStaleStateDirs removes the temporary state directories of clusters
// whose test binary was killed before Stop (their processes died with it):
// those whose control plane's pids file is over a minute old and names no
// live process.
func sweepStaleStateDirs() {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), tempPrefix+"*"))
	for _, d := range dirs {
		cp := filepath.Join(d, "controlplane")
		st, err := os.Stat(filepath.Join(cp, harness.PidsFile))
		if err != nil || time.Since(st.ModTime()) < time.Minute || len(harness.LivePids(cp)) > 0 {
			continue
		}
		_ = os.RemoveAll(d)
	}
}
