package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/miglayout/miglayout/api/v1alpha1"
	"github.com/miglayout/miglayout/pkg/mig"
	migslices "github.com/miglayout/miglayout/pkg/slices"
	"github.com/miglayout/miglayout/test/cluster"
	"github.com/miglayout/miglayout/test/harness"
)

func (d *demo) applyLayout(ctx context.Context) error {
	data, err := os.ReadFile(filepath.Join(d.root, layoutFile))
	if err != nil {
		return err
	}
	d.printf("  $ kubectl apply --server-side -f %s\n", layoutFile)
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
			row := fmt.Sprintf("%s %s", r.Node, r.Phase)
			if len(gpus) > 0 {
				row += " (" + strings.Join(gpus, ", ") + ")"
			} else {
				row += " (no GPU reported yet)"
			}
			rows = append(rows, row)
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
	sort.Slice(list.Items, func(i, j int) bool {
		return ptr.Deref(list.Items[i].Spec.NodeName, "") < ptr.Deref(list.Items[j].Spec.NodeName, "")
	})
	for _, s := range list.Items {
		if node != "" && ptr.Deref(s.Spec.NodeName, "") != node {
			continue
		}
		for _, dev := range s.Spec.Devices {
			a := dev.Attributes
			start, size := intAttr(a, migslices.AttrPlacementStart), intAttr(a, migslices.AttrPlacementSize)
			slicesCol := "-"
			if size != "" {
				slicesCol = memorySlices(start, size)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", ptr.Deref(s.Spec.NodeName, ""), dev.Name,
				strAttr(a, migslices.AttrProductName), strAttr(a, migslices.AttrProfile), slicesCol,
				intAttr(a, migslices.AttrMemory), strAttr(a, migslices.AttrUUID))
		}
	}
	return tw.Flush()
}

func (d *demo) claimPod(ctx context.Context) error {
	if _, err := harness.CreateNamespace(ctx, d.c.Client(), namespace); err != nil {
		return err
	}
	docs := workloadDocs("Namespace", "gpu-16g", "trainer")
	d.printf("  $ kubectl apply --server-side -f - <<EOF\n")
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

// runFromTemplate applies docs (printing them), waits until pod runs and returns the
// claim the claim controller generated for it from its ResourceClaimTemplate.
func (d *demo) runFromTemplate(ctx context.Context, docs, pod string) (*resourceapi.ResourceClaim, error) {
	d.printf("  $ kubectl apply --server-side -f - <<EOF\n")
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

func (d *demo) describe(ctx context.Context) error {
	return d.kubectl(ctx, "describe", "miglayout", layoutName)
}

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
	d.printf("  (drained with a NoSchedule taint first, so the scheduler never allocated a device that was about to go).\n\n")
	if err := d.deviceTable(ctx, nodeA100); err != nil {
		return err
	}
	return d.kubectl(ctx, "get", "miglayout", layoutName, "-o", "wide")
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

// memorySlices shows a placement (start and size, in memory slices, as the
// device's attributes give them) as the slices it takes: "4-7", or "6" for
// one; start+size where either is not a number.
func memorySlices(start, size string) string {
	s, err1 := strconv.Atoi(start)
	n, err2 := strconv.Atoi(size)
	switch {
	case err1 != nil || err2 != nil || n < 1:
		return start + "+" + size
	case n == 1:
		return start
	}
	return fmt.Sprintf("%d-%d", s, s+n-1)
}
