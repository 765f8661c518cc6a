// Command miglayout-demo shows miglayout end to end on one machine with nothing but Go
// (`make demo`): a real Kubernetes control plane on loopback, two nodes with simulated
// GPUs (node-a100: 4x A100-SXM4-80GB, node-h100: 2x H100-SXM5-80GB), miglayout-controller
// and one miglayout-agent per node as processes, and a stand-in kubelet per node (see
// test/cluster). It applies deploy/examples/demo-static.yaml, waits until the GPUs hold
// it, runs two pods with MIG devices allocated by the real kube-scheduler, then changes the
// layout while one pod holds its device and shows that device surviving in place, and last
// switches to Auto mode: a pending pod's claim for a profile no GPU holds makes the planner
// repartition a free GPU, and a claim no GPU model can satisfy is reported.
//
//	go run ./cmd/miglayout-demo            # run the steps, stop the cluster, exit 0 on success
//	go run ./cmd/miglayout-demo --keep     # leave the cluster up afterwards (KEEP=1 too)
//
// The first run builds the control-plane binaries from the Go module proxy
// (test/testbin/build.sh, 10 to 15 minutes on 2 cores); later runs start in seconds. A
// failing step is named and the exit code is 1.
package main

import (
	"bufio"
	"context"
	_ "embed"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/klog/v2"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"
	crlog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/miglayout/miglayout/api/v1alpha1"
	"github.com/miglayout/miglayout/pkg/managerrun"
	"github.com/miglayout/miglayout/test/cluster"
	"github.com/miglayout/miglayout/test/harness"
)

//go:embed workload.yaml
var workload string

const (
	nodeA100     = "node-a100"
	nodeH100     = "node-h100"
	layoutName   = "demo"
	layoutFile   = "deploy/examples/demo-static.yaml"
	namespace    = "demo"
	demoLabel    = "miglayout.io/demo"
	stepTimeout  = 3 * time.Minute
	buildTimeout = 45 * time.Minute
)

type demo struct {
	out      io.Writer
	keep     bool
	stateDir string
	root     string
	binDir   string
	t0       time.Time

	c   *cluster.Cluster
	crc crclient.Client

	// What step 5 found, checked in step 8.
	claimDevice string // e.g. gpu-0-mig-3g40gb-9-0
	claimUUID   string
	claimPIDs   []uint32
}

type step struct {
	title string
	run   func(ctx context.Context) error
}

func main() {
	keepDefault := os.Getenv("KEEP") != "" && os.Getenv("KEEP") != "0"
	keep := flag.Bool("keep", keepDefault, "leave the cluster up after the demo (until Ctrl-C); also KEEP=1")
	state := flag.String("state", "test/.state/demo", "state directory: kubeconfig, logs, simulator state, built binaries")
	flag.Parse()
	if err := managerrun.NoArgs(flag.Args()); err != nil {
		fmt.Fprintln(os.Stderr, "miglayout-demo:", err)
		os.Exit(2)
	}
	// The demo's controller-runtime client logs (rarely: a retried
	// request) through klog, to stderr.
	crlog.SetLogger(klog.Background())
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	d := &demo{out: os.Stdout, keep: *keep, stateDir: *state, t0: time.Now()}
	os.Exit(d.main(ctx))
}

func (d *demo) main(ctx context.Context) int {
	var err error
	if d.root, err = cluster.ModuleRoot(); err != nil {
		fmt.Fprintln(os.Stderr, "miglayout-demo: run me from the miglayout source tree:", err)
		return 2
	}
	if !filepath.IsAbs(d.stateDir) {
		d.stateDir = filepath.Join(d.root, d.stateDir)
	}
	steps := []step{
		{"Control-plane binaries (etcd, kube-apiserver, kube-scheduler, kube-controller-manager, kubectl)", d.binaries},
		{"Start the cluster: control plane, node-a100 (4x A100-SXM4-80GB) and node-h100 (2x H100-SXM5-80GB) with simulated GPUs, miglayout-controller, one miglayout-agent per node", d.start},
		{"Apply the MigLayout " + layoutFile + " and wait until every GPU holds it", d.applyLayout},
		{"What the scheduler sees: the nodes' ResourceSlices", d.showSlices},
		{"Claim one MIG device with memory >= 16000 MiB; pod trainer uses the claim", d.claimPod},
		{"A pod from a ResourceClaimTemplate gets a claim of its own", d.templatePod},
		{"kubectl describe miglayout " + layoutName, d.describe},
		{"Change the layout while trainer holds its device", d.changeLayout},
		{"Auto mode: a pending pod's claim repartitions a free GPU; an impossible one hears why", d.autoMode},
		{"An Xid on trainer's GPU instance: its container shows the device Unhealthy, the pool publishes it tainted until the mark is cleared", d.xidHealth},
	}
	d.printf("miglayout demo: declarative MIG layouts on a real Kubernetes %s control plane, GPUs simulated\n", harness.KubernetesVersion)
	for i, s := range steps {
		d.printf("\n[%d/%d] %s\n", i+1, len(steps), s.title)
		t := time.Now()
		if err := s.run(ctx); err != nil {
			d.printf("\nFAILED at step %d/%d (%s):\n  %v\n", i+1, len(steps), s.title, indentRest(err.Error()))
			if ctx.Err() != nil {
				d.printf("  (interrupted)\n")
			}
			if d.c != nil {
				d.printf("\nLast log lines (all logs in %s):\n", d.c.LogDir())
				d.c.DumpLogs(indent(d.out, "  "), 15)
			}
			d.finish(ctx, false)
			return 1
		}
		d.printf("  ✓ done in %s\n", since(t))
	}
	d.printf("\nAll %d steps passed in %s.\n", len(steps), since(d.t0))
	d.finish(ctx, true)
	return 0
}

// finish stops the cluster, or with --keep leaves it up until a signal.
func (d *demo) finish(ctx context.Context, ok bool) {
	if d.c == nil {
		return
	}
	if !d.keep || ctx.Err() != nil {
		d.printf("Stopping the cluster.\n")
		_ = d.c.Stop()
		d.printf("Its logs and binaries stay in %s (git-ignored, safe to delete;\n", d.stateDir)
		d.printf("the control plane's logs show errors of its own shutdown, which are expected).\n")
		return
	}
	d.printf(`
The cluster stays up (--keep). In another terminal:

  export KUBECONFIG=%s PATH=%s:$PATH
  alias kubectl=%s
  kubectl get miglayouts,nodemiglayouts
  kubectl get resourceslices,resourceclaims -A
  kubectl describe miglayout %s
  kubectl miglayout status

Logs: %s (controller.log, agent-<node>.log, kubelet-<node>.log, kube-*.log)
Stop it with Ctrl-C here, or: kill %d
`, d.c.Kubeconfig(), d.c.MiglayoutBinDir(), d.c.KubectlPath(), layoutName, d.c.LogDir(), os.Getpid())
	if !ok {
		d.printf("(left up after the failure, for inspection)\n")
	}
	<-ctx.Done()
	d.printf("\nStopping the cluster.\n")
	_ = d.c.Stop()
}

// ---- step 1 ----

func (d *demo) binaries(ctx context.Context) error {
	dir, err := harness.BinDir()
	if err == nil && executable(filepath.Join(dir, "kubectl")) {
		d.printf("  found in %s\n", dir)
		d.binDir = dir
		return nil
	}
	d.printf("  not built yet: building them from the Go module proxy with test/testbin/build.sh.\n")
	d.printf("  The first time this takes 10 to 15 minutes on 2 cores (kube-apiserver alone ~7 min,\n")
	d.printf("  Go build cache +4-5 GB); later runs skip it.\n")
	ctx, cancel := context.WithTimeout(ctx, buildTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", filepath.Join(d.root, "test", "testbin", "build.sh"))
	cmd.Dir = d.root
	// On the timeout the whole build goes, not bash alone: a go build left
	// running would hold the output pipe (and Wait with it) and the build
	// lock.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 10 * time.Second
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		return err
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			d.printf("  | %s\n", sc.Text())
		}
	}()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait(); pw.Close() }()
	t := time.Now()
	tick := time.NewTicker(30 * time.Second)
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			wg.Wait()
			if err != nil {
				return fmt.Errorf("test/testbin/build.sh: %w", err)
			}
			if d.binDir, err = harness.BinDir(); err != nil {
				return err
			}
			d.printf("  built in %s into %s\n", since(t), d.binDir)
			return nil
		case <-tick.C:
			d.printf("  ... still building (%s)\n", since(t))
		}
	}
}

// ---- step 2 ----

func (d *demo) start(ctx context.Context) error {
	labels := map[string]string{demoLabel: "true"}
	c, err := cluster.Start(ctx, cluster.Options{
		StateDir:   d.stateDir,
		BinDir:     d.binDir,
		ModuleRoot: d.root,
		Progress:   indent(d.out, "  "),
		Nodes: []cluster.NodeSpec{
			{Name: nodeA100, GPUs: "4xA100-SXM4-80GB", Labels: labels},
			{Name: nodeH100, GPUs: "2xH100-SXM5-80GB", Labels: labels},
		},
	})
	if err != nil {
		return err
	}
	d.c = c
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = v1alpha1.AddToScheme(scheme)
	d.crc, err = crclient.New(c.Config(), crclient.Options{Scheme: scheme})
	if err != nil {
		return err
	}
	return d.kubectl(ctx, "get", "nodes", "-L", demoLabel)
}

// ---- step 3 ----

// ---- step 4 ----

// ---- step 5 ----

// ---- step 6 ----

// ---- step 7 ----

// ---- step 8 ----

// ---- step 9 ----

// ---- helpers ----
