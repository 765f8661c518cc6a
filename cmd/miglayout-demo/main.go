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
// (test/testbin/build.sh, about 10 minutes on 2 cores); later runs start in seconds. A
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
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/miglayout/miglayout/api/v1alpha1"
	"github.com/miglayout/miglayout/pkg/mig"
	"github.com/miglayout/miglayout/pkg/mig/nvmlsim"
	migslices "github.com/miglayout/miglayout/pkg/slices"
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
		return
	}
	d.printf(`
The cluster stays up (--keep). In another terminal:

  export KUBECONFIG=%s
  alias kubectl=%s
  kubectl get miglayouts,nodemiglayouts
  kubectl get resourceslices,resourceclaims -A
  kubectl describe miglayout %s

Logs: %s (controller.log, agent-<node>.log, kubelet-<node>.log, kube-*.log)
Stop it with Ctrl-C here, or: kill %d
`, d.c.Kubeconfig(), d.c.KubectlPath(), layoutName, d.c.LogDir(), os.Getpid())
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
	d.printf("  The first time this takes about 10 minutes on 2 cores (kube-apiserver alone ~7 min,\n")
	d.printf("  Go build cache +4-5 GB); later runs skip it.\n")
	ctx, cancel := context.WithTimeout(ctx, buildTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", filepath.Join(d.root, "test", "testbin", "build.sh"))
	cmd.Dir = d.root
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

func (d *demo) applyLayout(ctx context.Context) error {
	data, err := os.ReadFile(filepath.Join(d.root, layoutFile))
	if err != nil {
		return err
	}
	d.printf("  $ kubectl apply -f %s\n", layoutFile)
	d.printYAML(string(data))
	if err := d.c.Apply(ctx, data); err != nil {
		return err
	}
	if err := d.waitLayoutReady(ctx); err != nil {
		return err
	}
	if err := d.kubectl(ctx, "get", "miglayouts"); err != nil {
		return err
	}
	return d.kubectl(ctx, "get", "nodemiglayouts")
}

// waitReady waits until the MigLayout is Ready at the generation, printing each change of
// the nodes' phases on the way.
// waitLayoutReady waits until the MigLayout's current generation is Ready.
func (d *demo) waitLayoutReady(ctx context.Context) error {
	var ml v1alpha1.MigLayout
	if err := d.crc.Get(ctx, crclient.ObjectKey{Name: layoutName}, &ml); err != nil {
		return err
	}
	return d.waitReady(ctx, ml.Generation)
}

func (d *demo) waitReady(ctx context.Context, generation int64) error {
	ctx, cancel := context.WithTimeout(ctx, stepTimeout)
	defer cancel()
	last := ""
	var ml v1alpha1.MigLayout
	err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		if err := d.crc.Get(ctx, crclient.ObjectKey{Name: layoutName}, &ml); err != nil {
			return false, nil
		}
		var rows []string
		for _, r := range ml.Status.Nodes {
			var gpus []string
			for _, g := range r.GPUs {
				gpus = append(gpus, fmt.Sprintf("gpu %d %s", g.Index, g.Phase))
			}
			rows = append(rows, fmt.Sprintf("%s %s (%s)", r.Node, r.Phase, strings.Join(gpus, ", ")))
		}
		if s := strings.Join(rows, "; "); s != "" && s != last {
			d.printf("  %s  %s\n", time.Now().Format("15:04:05"), s)
			last = s
		}
		c := meta.FindStatusCondition(ml.Status.Conditions, v1alpha1.ConditionReady)
		return ml.Status.ObservedGeneration >= generation && c != nil && c.Status == metav1.ConditionTrue, nil
	})
	if err != nil {
		var conds []string
		for _, c := range ml.Status.Conditions {
			conds = append(conds, fmt.Sprintf("%s=%s %s: %s", c.Type, c.Status, c.Reason, c.Message))
		}
		return fmt.Errorf("MigLayout %s not Ready at generation %d: %w\nconditions: %s", layoutName, generation, err, strings.Join(conds, "\n  "))
	}
	d.printf("  MigLayout %s is Ready (generation %d)\n", layoutName, generation)
	return nil
}

// ---- step 4 ----

func (d *demo) showSlices(ctx context.Context) error {
	if err := d.kubectl(ctx, "get", "resourceslices"); err != nil {
		return err
	}
	d.printf("\n  Their devices (driver %s; a claim's CEL selector reads these attributes):\n", cluster.Driver)
	return d.deviceTable(ctx, "")
}

func (d *demo) deviceTable(ctx context.Context, node string) error {
	list, err := d.c.Client().ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(indent(d.out, "  "), 0, 2, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tDEVICE\tPRODUCT\tPROFILE\tMEMORY SLICES\tMEMORY (MiB)\tUUID")
	sort.Slice(list.Items, func(i, j int) bool { return ptrStr(list.Items[i].Spec.NodeName) < ptrStr(list.Items[j].Spec.NodeName) })
	for _, s := range list.Items {
		if node != "" && ptrStr(s.Spec.NodeName) != node {
			continue
		}
		for _, dev := range s.Spec.Devices {
			a := dev.Attributes
			start, size := intAttr(a, migslices.AttrPlacementStart), intAttr(a, migslices.AttrPlacementSize)
			slicesCol := "-"
			if size != "" {
				slicesCol = start + "+" + size
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", ptrStr(s.Spec.NodeName), dev.Name,
				strAttr(a, migslices.AttrProductName), strAttr(a, migslices.AttrProfile), slicesCol,
				intAttr(a, migslices.AttrMemory), strAttr(a, migslices.AttrUUID))
		}
	}
	return tw.Flush()
}

// ---- step 5 ----

func (d *demo) claimPod(ctx context.Context) error {
	if _, err := harness.CreateNamespace(ctx, d.c.Client(), namespace); err != nil {
		return err
	}
	docs := workloadDocs("Namespace", "gpu-16g", "trainer")
	d.printf("  $ kubectl apply -f - <<EOF\n")
	d.printYAML(docs)
	d.printf("  EOF\n")
	if err := d.c.Apply(ctx, []byte(docs)); err != nil {
		return err
	}
	if err := d.waitRunning(ctx, "trainer"); err != nil {
		return err
	}
	if err := d.kubectl(ctx, "get", "pods,resourceclaims", "-n", namespace, "-o", "wide"); err != nil {
		return err
	}
	claim, err := d.c.Client().ResourceV1().ResourceClaims(namespace).Get(ctx, "gpu-16g", metav1.GetOptions{})
	if err != nil {
		return err
	}
	pool, dev, err := d.printAllocation(ctx, claim)
	if err != nil {
		return err
	}
	if pool != nodeA100 {
		return fmt.Errorf("claim gpu-16g allocated on %s, want %s (the pod is pinned there)", pool, nodeA100)
	}
	d.claimDevice = dev
	for _, p := range d.c.Kubelet(nodeA100).Pods() {
		if p.Namespace == namespace && p.Name == "trainer" {
			if len(p.DeviceUUIDs) != 1 {
				return fmt.Errorf("trainer's container sees devices %v, want one", p.DeviceUUIDs)
			}
			d.claimUUID, d.claimPIDs = p.DeviceUUIDs[0], p.PIDs
		}
	}
	if d.claimUUID == "" {
		return fmt.Errorf("the stand-in kubelet of %s does not run trainer", nodeA100)
	}
	d.printf("  The stand-in kubelet called NodePrepareResources on the agent's DRA socket; the CDI spec\n")
	d.printf("  gives the container NVIDIA_VISIBLE_DEVICES=%s, and a simulated process runs on it\n", d.claimUUID)
	d.printf("  (PID %s in the NVML simulator), so the agent sees the device in use.\n", joinPIDs(d.claimPIDs))
	return nil
}

// printAllocation prints a claim's allocated devices with their attributes.
func (d *demo) printAllocation(ctx context.Context, claim *resourceapi.ResourceClaim) (pool, device string, err error) {
	if claim.Status.Allocation == nil || len(claim.Status.Allocation.Devices.Results) == 0 {
		return "", "", fmt.Errorf("claim %s is not allocated", claim.Name)
	}
	r := claim.Status.Allocation.Devices.Results[0]
	d.printf("\n  Allocation of claim %s (status.allocation.devices.results):\n", claim.Name)
	d.printf("    request %s -> driver %s, pool %s, device %s\n", r.Request, r.Driver, r.Pool, r.Device)
	list, err := d.c.Client().ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{
		FieldSelector: "spec.nodeName=" + r.Pool + ",spec.driver=" + r.Driver})
	if err != nil {
		return "", "", err
	}
	for _, s := range list.Items {
		for _, dev := range s.Spec.Devices {
			if dev.Name == r.Device {
				a := dev.Attributes
				d.printf("    = %s %s at memory slices %s+%s, %s MiB, %s\n", strAttr(a, migslices.AttrProductName),
					strAttr(a, migslices.AttrProfile), intAttr(a, migslices.AttrPlacementStart),
					intAttr(a, migslices.AttrPlacementSize), intAttr(a, migslices.AttrMemory), strAttr(a, migslices.AttrUUID))
			}
		}
	}
	if len(claim.Status.ReservedFor) > 0 {
		d.printf("    reserved for %s %s\n", claim.Status.ReservedFor[0].Resource, claim.Status.ReservedFor[0].Name)
	}
	return r.Pool, r.Device, nil
}

func (d *demo) waitRunning(ctx context.Context, name string) error {
	ctx, cancel := context.WithTimeout(ctx, stepTimeout)
	defer cancel()
	var pod *corev1.Pod
	err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		p, err := d.c.Client().CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		pod = p
		return p.Status.Phase == corev1.PodRunning, nil
	})
	if err != nil {
		detail := ""
		if pod != nil {
			for _, c := range pod.Status.Conditions {
				detail += fmt.Sprintf("\n  %s=%s %s %s", c.Type, c.Status, c.Reason, c.Message)
			}
		}
		return fmt.Errorf("pod %s/%s not Running: %w%s", namespace, name, err, detail)
	}
	d.printf("  pod %s is Running on %s\n", name, pod.Spec.NodeName)
	return nil
}

// ---- step 6 ----

func (d *demo) templatePod(ctx context.Context) error {
	claim, err := d.runFromTemplate(ctx, workloadDocs("one-1g", "notebook"), "notebook")
	if err != nil {
		return err
	}
	d.printf("  The claim controller created claim %s for the pod (owned by it, deleted with it).\n", claim.Name)
	if _, _, err := d.printAllocation(ctx, claim); err != nil {
		return err
	}
	return d.kubectl(ctx, "get", "resourceclaims", "-n", namespace)
}

// printLayouts prints each GPU's layout before and after (only the GPUs that changed
// when changedOnly), with note's text, if any, in a last column; it returns how many GPUs
// changed.
func (d *demo) printLayouts(before, after map[string]nvmlsim.State, changedOnly bool, note func(node string, gpu int, before, after string) string) int {
	tw := tabwriter.NewWriter(indent(d.out, "    "), 0, 2, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tGPU\tBEFORE\tAFTER\t")
	changed := 0
	for _, node := range []string{nodeA100, nodeH100} {
		for i, g := range after[node].GPUs {
			b, a := before[node].GPUs[i].Layout().String(), g.Layout().String()
			if a != b {
				changed++
			} else if changedOnly {
				continue
			}
			text := ""
			if note != nil {
				text = note(node, g.Index, b, a)
			}
			fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\n", node, g.Index, b, a, text)
		}
	}
	_ = tw.Flush()
	return changed
}

// runFromTemplate applies docs (printing them), waits until pod runs and returns the
// claim the claim controller generated for it from its ResourceClaimTemplate.
func (d *demo) runFromTemplate(ctx context.Context, docs, pod string) (*resourceapi.ResourceClaim, error) {
	d.printf("  $ kubectl apply -f - <<EOF\n")
	d.printYAML(docs)
	d.printf("  EOF\n")
	if err := d.c.Apply(ctx, []byte(docs)); err != nil {
		return nil, err
	}
	if err := d.waitRunning(ctx, pod); err != nil {
		return nil, err
	}
	p, err := d.c.Client().CoreV1().Pods(namespace).Get(ctx, pod, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	if len(p.Status.ResourceClaimStatuses) == 0 || p.Status.ResourceClaimStatuses[0].ResourceClaimName == nil {
		return nil, fmt.Errorf("pod %s has no generated claim: %+v", pod, p.Status.ResourceClaimStatuses)
	}
	return d.c.Client().ResourceV1().ResourceClaims(namespace).Get(ctx, *p.Status.ResourceClaimStatuses[0].ResourceClaimName, metav1.GetOptions{})
}

// ---- step 7 ----

func (d *demo) describe(ctx context.Context) error {
	return d.kubectl(ctx, "describe", "miglayout", layoutName)
}

// ---- step 8 ----

func (d *demo) changeLayout(ctx context.Context) error {
	gpuIdx, _, _ := migslices.DeviceGPUIndex(d.claimDevice)
	before, err := d.snapshots()
	if err != nil {
		return err
	}
	kept, ok := findDevice(before[nodeA100], d.claimUUID)
	if !ok {
		return fmt.Errorf("device %s (%s) not in NVML", d.claimDevice, d.claimUUID)
	}
	// The agent reports the devices it must keep in NodeMigLayout.status; the controller
	// fits the new counts around them.
	if err := d.waitInUse(ctx, gpuIdx, kept); err != nil {
		return err
	}
	d.printf("  The agent of %s reports gpu %d's %s in use (NodeMigLayout status.gpus[%d].inUse).\n", nodeA100, gpuIdx, kept, gpuIdx)
	d.printf("  Edit the A100 rule: 3g.40gb x2 -> 3g.40gb + 2g.20gb + 1g.10gb.\n")
	patch := `[{"op":"replace","path":"/spec/rules/0/profiles","value":{"3g.40gb":1,"2g.20gb":1,"1g.10gb":1}}]`
	if err := d.kubectl(ctx, "patch", "miglayout", layoutName, "--type=json", "-p", patch); err != nil {
		return err
	}
	if err := d.waitLayoutReady(ctx); err != nil {
		return err
	}
	after, err := d.snapshots()
	if err != nil {
		return err
	}
	d.printf("\n  GPU layouts (NVML, via the simulator):\n")
	changed := d.printLayouts(before, after, false, func(node string, gpu int, b, a string) string {
		switch {
		case node == nodeA100 && gpu == gpuIdx:
			return "<- trainer's " + kept.String() + " stays"
		case a == b:
			return "(unchanged)"
		}
		return ""
	})
	// The claim's device: same placement, same UUID, process still running.
	now, ok := findDevice(after[nodeA100], d.claimUUID)
	if !ok || now != kept {
		return fmt.Errorf("trainer's device %s (%s) did not survive: now %v", kept, d.claimUUID, layoutsOf(after[nodeA100]))
	}
	running := 0
	for _, p := range after[nodeA100].Processes {
		if p.DeviceUUID == d.claimUUID && slices.Contains(d.claimPIDs, p.PID) {
			running++
		}
	}
	if running == 0 {
		return fmt.Errorf("trainer's process on %s is gone", d.claimUUID)
	}
	claim, err := d.c.Client().ResourceV1().ResourceClaims(namespace).Get(ctx, "gpu-16g", metav1.GetOptions{})
	if err != nil {
		return err
	}
	if claim.Status.Allocation == nil || claim.Status.Allocation.Devices.Results[0].Device != d.claimDevice {
		return fmt.Errorf("claim gpu-16g lost its allocation of %s", d.claimDevice)
	}
	if changed < 4 {
		return fmt.Errorf("only %d GPUs changed, want the four A100s", changed)
	}
	d.printf("\n  Claim gpu-16g still holds %s: same placement, same UUID %s,\n", d.claimDevice, d.claimUUID)
	d.printf("  trainer's process still running; the rest of node-a100 was repartitioned around it\n")
	d.printf("  (drained with a NoSchedule taint first, so the scheduler never saw a device that was about to go).\n\n")
	if err := d.deviceTable(ctx, nodeA100); err != nil {
		return err
	}
	return d.kubectl(ctx, "get", "miglayout", layoutName, "-o", "wide")
}

// ---- step 9 ----

func (d *demo) autoMode(ctx context.Context) error {
	d.printf("  Switch the MigLayout to Auto mode: pending claims decide the layouts from now on\n")
	d.printf("  (the devices in use stay; every GPU keeps its layout until demand needs a change).\n")
	if err := d.kubectl(ctx, "patch", "miglayout", layoutName, "--type=merge", "-p", `{"spec":{"mode":"Auto","rules":null}}`); err != nil {
		return err
	}
	if err := d.waitLayoutReady(ctx); err != nil {
		return err
	}
	before, err := d.snapshots()
	if err != nil {
		return err
	}
	d.printf("\n  No GPU holds a 4g.40gb device now. Pod finetune asks for one, pod oversized for\n")
	d.printf("  more memory than any GPU has:\n")
	claim, err := d.runFromTemplate(ctx, workloadDocs("four-g", "finetune", "too-big", "oversized"), "finetune")
	if err != nil {
		return err
	}
	if _, _, err := d.printAllocation(ctx, claim); err != nil {
		return err
	}
	after, err := d.snapshots()
	if err != nil {
		return err
	}
	d.printf("\n  GPUs the planner repartitioned (NVML, via the simulator):\n")
	changed := d.printLayouts(before, after, true, nil)
	if changed == 0 {
		return fmt.Errorf("finetune runs but no GPU was repartitioned")
	}
	if was, ok := findDevice(before[nodeA100], d.claimUUID); !ok {
		return fmt.Errorf("trainer's device %s (%s) is not in NVML", d.claimDevice, d.claimUUID)
	} else if now, ok := findDevice(after[nodeA100], d.claimUUID); !ok || now != was {
		return fmt.Errorf("trainer's device %s (%s) moved or went away: now %v", d.claimDevice, d.claimUUID, layoutsOf(after[nodeA100]))
	}
	d.printf("\n  What the planner told the pods (events):\n")
	for _, e := range []struct{ pod, reason string }{{"finetune", "WaitingForRepartition"}, {"oversized", "NotServableByAutoMode"}} {
		note, err := d.waitEvent(ctx, e.pod, e.reason)
		if err != nil {
			return err
		}
		d.printf("    pod %s: %s: %s\n", e.pod, e.reason, note)
	}
	ml, err := d.waitAutoStatus(ctx, func(a *v1alpha1.AutoStatus) bool { return a.PendingPods == 1 && a.NotServablePods == 1 })
	if err != nil {
		return err
	}
	out, err := yaml.Marshal(ml.Status.Auto)
	if err != nil {
		return err
	}
	d.printf("\n  The MigLayout's status.auto once finetune runs (kubectl describe miglayout %s shows it\n", layoutName)
	d.printf("  under Auto): only oversized is still pending.\n")
	d.printYAML(string(out))
	return nil
}

// waitEvent waits for an event with the reason about a pod of the demo's namespace and
// returns its note.
func (d *demo) waitEvent(ctx context.Context, pod, reason string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	note, seen := "", ""
	err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		list, err := d.c.Client().EventsV1().Events(namespace).List(ctx, metav1.ListOptions{FieldSelector: "regarding.name=" + pod})
		if err != nil {
			seen = err.Error()
			return false, nil
		}
		var reasons []string
		for _, e := range list.Items {
			if e.Regarding.Kind == "Pod" && e.Reason == reason {
				note = e.Note
				return true, nil
			}
			reasons = append(reasons, e.Reason+": "+e.Note)
		}
		seen = strings.Join(reasons, " | ")
		return false, nil
	})
	if err != nil {
		return "", fmt.Errorf("no %s event on pod %s: %w (seen: %s)", reason, pod, err, seen)
	}
	return note, nil
}

// waitAutoStatus waits until the MigLayout's status.auto satisfies ok.
func (d *demo) waitAutoStatus(ctx context.Context, ok func(*v1alpha1.AutoStatus) bool) (*v1alpha1.MigLayout, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var ml v1alpha1.MigLayout
	err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		if err := d.crc.Get(ctx, crclient.ObjectKey{Name: layoutName}, &ml); err != nil {
			return false, nil
		}
		return ml.Status.Auto != nil && ok(ml.Status.Auto), nil
	})
	if err != nil {
		return nil, fmt.Errorf("MigLayout %s: status.auto %+v: %w", layoutName, ml.Status.Auto, err)
	}
	return &ml, nil
}

func (d *demo) waitInUse(ctx context.Context, gpuIdx int, dev mig.Device) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		var nml v1alpha1.NodeMigLayout
		if err := d.crc.Get(ctx, crclient.ObjectKey{Name: nodeA100}, &nml); err != nil {
			return false, nil
		}
		for _, g := range nml.Status.GPUs {
			if int(g.Index) == gpuIdx {
				l, err := mig.ParseLayout(g.InUse)
				return err == nil && l.Contains(dev), nil
			}
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("the agent did not report %s on gpu %d in use: %w", dev, gpuIdx, err)
	}
	return nil
}

func (d *demo) snapshots() (map[string]nvmlsim.State, error) {
	out := map[string]nvmlsim.State{}
	for _, n := range []string{nodeA100, nodeH100} {
		sim, err := d.c.Sim(n)
		if err != nil {
			return nil, err
		}
		out[n] = sim.Snapshot()
	}
	return out, nil
}

func findDevice(st nvmlsim.State, uuid string) (mig.Device, bool) {
	for _, g := range st.GPUs {
		for _, gi := range g.GPUInstances {
			for _, ci := range gi.ComputeInstances {
				if ci.UUID == uuid {
					return mig.Device{Profile: gi.Profile, Start: gi.Placement.Start}, true
				}
			}
		}
	}
	return mig.Device{}, false
}

func layoutsOf(st nvmlsim.State) []string {
	var out []string
	for _, g := range st.GPUs {
		out = append(out, g.Layout().String())
	}
	return out
}

// ---- helpers ----

// kubectl runs the control plane's kubectl against the cluster and prints the command and
// its output.
func (d *demo) kubectl(ctx context.Context, args ...string) error {
	shown := make([]string, len(args))
	for i, a := range args {
		shown[i] = a
		if strings.ContainsAny(a, " {}[]\"'") {
			shown[i] = "'" + a + "'"
		}
	}
	d.printf("\n  $ kubectl %s\n", strings.Join(shown, " "))
	out, err := d.c.Kubectl(ctx, args...)
	for _, l := range strings.Split(strings.TrimRight(string(out), "\n"), "\n") {
		d.printf("    %s\n", l)
	}
	return err
}

func (d *demo) printYAML(s string) {
	for _, l := range strings.Split(strings.TrimRight(s, "\n"), "\n") {
		if strings.HasPrefix(l, "#") {
			continue
		}
		d.printf("    %s\n", l)
	}
}

func (d *demo) printf(format string, args ...any) { fmt.Fprintf(d.out, format, args...) }

// workloadDocs returns the documents of workload.yaml whose kind or name is one of keys.
func workloadDocs(keys ...string) string {
	var out []string
	for _, doc := range strings.Split(workload, "\n---\n") {
		for _, k := range keys {
			if strings.Contains(doc, "\nkind: "+k+"\n") || strings.Contains(doc, "\n  name: "+k+"\n") {
				out = append(out, strings.TrimSpace(stripComments(doc)))
				break
			}
		}
	}
	return strings.Join(out, "\n---\n") + "\n"
}

func stripComments(doc string) string {
	var keep []string
	for _, l := range strings.Split(doc, "\n") {
		if !strings.HasPrefix(l, "#") {
			keep = append(keep, l)
		}
	}
	return strings.Join(keep, "\n")
}

func strAttr(a map[resourceapi.QualifiedName]resourceapi.DeviceAttribute, name resourceapi.QualifiedName) string {
	if v, ok := a[name]; ok && v.StringValue != nil {
		return *v.StringValue
	}
	return ""
}

func intAttr(a map[resourceapi.QualifiedName]resourceapi.DeviceAttribute, name resourceapi.QualifiedName) string {
	if v, ok := a[name]; ok && v.IntValue != nil {
		return fmt.Sprint(*v.IntValue)
	}
	return ""
}

func ptrStr(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func executable(path string) bool {
	st, err := os.Stat(path)
	return err == nil && !st.IsDir() && st.Mode()&0o111 != 0
}

func joinPIDs(pids []uint32) string {
	var s []string
	for _, p := range pids {
		s = append(s, fmt.Sprint(p))
	}
	return strings.Join(s, ", ")
}

func since(t time.Time) string { return time.Since(t).Round(100 * time.Millisecond).String() }

func indentRest(s string) string { return strings.ReplaceAll(s, "\n", "\n  ") }

// indent returns a writer that prefixes every line written to w.
func indent(w io.Writer, prefix string) io.Writer { return &indenter{w: w, prefix: prefix, bol: true} }

type indenter struct {
	mu     sync.Mutex
	w      io.Writer
	prefix string
	bol    bool
}

func (in *indenter) Write(p []byte) (int, error) {
	in.mu.Lock()
	defer in.mu.Unlock()
	var b strings.Builder
	for _, c := range string(p) {
		if in.bol {
			b.WriteString(in.prefix)
			in.bol = false
		}
		b.WriteRune(c)
		if c == '\n' {
			in.bol = true
		}
	}
	if _, err := io.WriteString(in.w, b.String()); err != nil {
		return 0, err
	}
	return len(p), nil
}
