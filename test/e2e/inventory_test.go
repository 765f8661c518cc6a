package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/dynamic-resource-allocation/resourceslice"
	"k8s.io/klog/v2/ktesting"
	drapb "k8s.io/kubelet/pkg/apis/dra/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/miglayout/miglayout/pkg/gpulock"
	"github.com/miglayout/miglayout/pkg/mig"
	"github.com/miglayout/miglayout/pkg/mig/gpu"
	"github.com/miglayout/miglayout/pkg/mig/gpu/gputest"
	"github.com/miglayout/miglayout/pkg/mig/nvmlsim"
	"github.com/miglayout/miglayout/pkg/plugin"
	migslices "github.com/miglayout/miglayout/pkg/slices"
	"github.com/miglayout/miglayout/test/harness"
)

// The DRA inventory against the real kube-apiserver and kube-scheduler: the
// kubelet plugin helper publishes a simulated A100's MIG devices for a fake
// node, a layout change is one update of one ResourceSlice, the drain taint
// keeps the scheduler off a device, a claim selecting memory >= 16000 is
// allocated by the scheduler to the one MIG device that has it, and the
// helper's kubelet-facing gRPC service prepares and unprepares that claim
// (as the stand-in kubelet will).

const invDriver = migslices.DefaultDriverName

// invNode is one fake node with a simulated GPU, the agent's kubelet plugin
// and the kubeletplugin helper running for it.
type invNode struct {
	name      string
	gpus      *gpu.NVMLManager
	hostRoot  string
	cdiDir    string
	pluginDir string
	plugin    *plugin.Plugin
	helper    *kubeletplugin.Helper
}

func startInvNode(t *testing.T, ctx context.Context, name, spec string) *invNode {
	t.Helper()
	if _, err := harness.CreateNode(ctx, client, name, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = client.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{})
		_ = client.ResourceV1().ResourceSlices().DeleteCollection(ctx, metav1.DeleteOptions{},
			metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("spec.nodeName", name).String()})
	})
	_, m := gputest.Simulated(t, nvmlsim.Config{Spec: spec, Seed: name})
	// Short paths: unix socket names are limited to 108 bytes.
	dir, err := os.MkdirTemp("", "inv-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	n := &invNode{name: name, gpus: m, hostRoot: filepath.Join(dir, "host"), cdiDir: filepath.Join(dir, "cdi"), pluginDir: filepath.Join(dir, "plugin")}
	registry := filepath.Join(dir, "registry")
	for _, d := range []string{registry, n.pluginDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	n.plugin, err = plugin.New(plugin.Config{DriverName: invDriver, NodeName: name, GPUs: m, Locks: gpulock.New(),
		CDIDir: n.cdiDir, CheckpointDir: n.pluginDir, HostRoot: n.hostRoot,
		OnFatalError: func(err error) { t.Errorf("kubelet plugin: fatal error: %v", err) }})
	if err != nil {
		t.Fatal(err)
	}
	n.helper, err = n.plugin.Start(ctx, client,
		kubeletplugin.RegistrarDirectoryPath(registry),
		kubeletplugin.PluginDataDirectoryPath(n.pluginDir))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.helper.Stop)
	return n
}

// setLayout makes GPU 0's MIG devices equal to layout (MIG mode on),
// writes their capability files, and returns NVML's inventory.
func (n *invNode) setLayout(t *testing.T, ctx context.Context, layout string) migslices.Inventory {
	t.Helper()
	if _, err := n.gpus.SetMIGMode(ctx, 0, true); err != nil {
		t.Fatal(err)
	}
	current, err := n.gpus.MIGDevices(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := mig.MustParseLayout(layout)
	for _, d := range current {
		if !want.Contains(d.Device()) {
			if err := n.gpus.DestroyMIGDevice(ctx, 0, d.Device()); err != nil {
				t.Fatal(err)
			}
		}
	}
	gpus, err := n.gpus.GPUs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range want {
		if slices.ContainsFunc(current, func(c gpu.MIGDevice) bool { return c.Device() == d }) {
			continue
		}
		md, err := n.gpus.CreateMIGDevice(ctx, 0, d)
		if err != nil {
			t.Fatal(err)
		}
		if err := plugin.WriteFakeCapabilities(n.hostRoot, gpus[0].Minor, md); err != nil {
			t.Fatal(err)
		}
	}
	inv, err := migslices.ReadInventory(ctx, n.gpus)
	if err != nil {
		t.Fatal(err)
	}
	return inv
}

func nodeSlices(t *testing.T, ctx context.Context, node string) []resourceapi.ResourceSlice {
	t.Helper()
	l, err := client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{
		FieldSelector: fields.AndSelectors(fields.OneTermEqualSelector("spec.nodeName", node), fields.OneTermEqualSelector("spec.driver", invDriver)).String(),
	})
	if err != nil {
		t.Fatal(err)
	}
	return l.Items
}

func sliceDeviceNames(ss []resourceapi.ResourceSlice) []string {
	var out []string
	for _, s := range ss {
		for _, d := range s.Spec.Devices {
			out = append(out, d.Name)
		}
	}
	return out
}

// waitSlices waits until the node's slices hold exactly the devices named.
func waitSlices(t *testing.T, ctx context.Context, node string, names ...string) []resourceapi.ResourceSlice {
	t.Helper()
	var got []resourceapi.ResourceSlice
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		got = nodeSlices(t, ctx, node)
		return sets.New(sliceDeviceNames(got)...).Equal(sets.New(names...)) && len(sliceDeviceNames(got)) == len(names), nil
	})
	if err != nil {
		t.Fatalf("node %s: waiting for devices %v: %v; have %v", node, names, err, sliceDeviceNames(got))
	}
	return got
}

// applyDeviceClasses creates the DeviceClasses of deploy/deviceclasses.
func applyDeviceClasses(t *testing.T, ctx context.Context) {
	t.Helper()
	data, err := os.ReadFile("../../deploy/deviceclasses/deviceclasses.yaml")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, doc := range strings.Split(string(data), "\n---\n") {
		var dc resourceapi.DeviceClass
		if err := yaml.UnmarshalStrict([]byte(doc), &dc); err != nil {
			t.Fatalf("parsing deviceclasses.yaml: %v", err)
		}
		if dc.Name == "" {
			continue
		}
		n++
		if _, err := client.ResourceV1().DeviceClasses().Create(ctx, &dc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("creating DeviceClass %s: %v", dc.Name, err)
		}
	}
	if n != 2 {
		t.Fatalf("deviceclasses.yaml holds %d DeviceClasses, want 2", n)
	}
}

// watchEvents collects the events of w until events is called, which stops
// the watch (the client's own stop can surface as an ERROR event; it is
// dropped).
func watchEvents(w watch.Interface) (events func() []watch.Event, stop func()) {
	var got []watch.Event
	var stopping atomic.Bool
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			if !stopping.Load() {
				got = append(got, ev)
			}
		}
	}()
	stop = func() { stopping.Store(true); w.Stop() }
	return func() []watch.Event { stop(); <-done; return got }, stop
}

// publishAndObserve publishes inv (draining tainted) and waits for the
// node's slices to hold it; it returns the slices and the watch events seen
// from before the publication until then.
func publishAndObserve(t *testing.T, ctx context.Context, n *invNode, inv migslices.Inventory, draining sets.Set[string], fromRV string) ([]resourceapi.ResourceSlice, []watch.Event) {
	t.Helper()
	w, err := client.ResourceV1().ResourceSlices().Watch(ctx, metav1.ListOptions{
		FieldSelector:   fields.OneTermEqualSelector("spec.nodeName", n.name).String(),
		ResourceVersion: fromRV,
	})
	if err != nil {
		t.Fatal(err)
	}
	events, stop := watchEvents(w)
	defer stop()
	if err := migslices.Publish(ctx, n.helper, n.name, inv, draining); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range inv.Sources() {
		names = append(names, s.Name)
	}
	got := waitSlices(t, ctx, n.name, names...)
	// Wait until the slices carry the taints asked for (a taint-only change).
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		got = nodeSlices(t, ctx, n.name)
		for _, s := range got {
			for _, d := range s.Spec.Devices {
				if (len(d.Taints) > 0) != draining.Has(d.Name) {
					return false, nil
				}
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("node %s: taints on %v never published (is DRADeviceTaints off?): %v", n.name, sets.List(draining), err)
	}
	time.Sleep(500 * time.Millisecond) // let any further write show up in the watch
	return got, events()
}

func TestInventoryPublishUpdateAllocatePrepare(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithTimeout(ctx, 4*time.Minute)
	defer cancel()
	suffix := rand.String(5)
	ns := "inv-" + suffix
	applyDeviceClasses(t, ctx)
	if _, err := harness.CreateNamespace(ctx, client, ns); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if pods, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{}); err == nil {
			for _, p := range pods.Items {
				_ = harness.ForceDeletePod(ctx, client, ns, p.Name)
			}
		}
		_ = client.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
	})
	n := startInvNode(t, ctx, "inv-node-"+suffix, "1xA100-SXM4-80GB")

	// 1. Publish layout A and read the slice back: one slice, pool = node,
	// owned by the Node, devices exactly as pkg/slices builds them.
	invA := n.setLayout(t, ctx, "2g.20gb@0,1g.10gb@2,1g.10gb@3,3g.40gb@4")
	if err := migslices.Publish(ctx, n.helper, n.name, invA, nil); err != nil {
		t.Fatal(err)
	}
	namesA := []string{"gpu-0-mig-2g20gb-14-0", "gpu-0-mig-1g10gb-19-2", "gpu-0-mig-1g10gb-19-3", "gpu-0-mig-3g40gb-9-4"}
	got := waitSlices(t, ctx, n.name, namesA...)
	if len(got) != 1 {
		t.Fatalf("layout A published as %d slices, want 1", len(got))
	}
	first := got[0]
	node, err := client.CoreV1().Nodes().Get(ctx, n.name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if first.Spec.Pool.Name != n.name || first.Spec.Pool.ResourceSliceCount != 1 || ptr.Deref(first.Spec.NodeName, "") != n.name {
		t.Errorf("slice %s: pool %+v nodeName %v", first.Name, first.Spec.Pool, first.Spec.NodeName)
	}
	if len(first.OwnerReferences) != 1 || first.OwnerReferences[0].Kind != "Node" || first.OwnerReferences[0].UID != node.UID {
		t.Errorf("slice %s: owners %+v, want the Node %s", first.Name, first.OwnerReferences, node.UID)
	}
	built, err := migslices.BuildPool(n.name, invA.GPUs, invA.MIGs, nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := built.Pools[n.name].Slices[0].Devices; !apiequality.Semantic.DeepEqual(want, first.Spec.Devices) {
		t.Errorf("the apiserver holds other devices than published:\nwant %+v\ngot  %+v", want, first.Spec.Devices)
	}

	// 2. Layout B, its only device with >= 16000 MiB (2g.20gb@4) published
	// draining: one update of the same object, devices swapped.
	invB := n.setLayout(t, ctx, "1g.10gb@0,1g.10gb@1,1g.10gb@2,1g.10gb@3,2g.20gb@4,1g.10gb@6")
	const big = "gpu-0-mig-2g20gb-14-4"
	second, events := publishAndObserve(t, ctx, n, invB, sets.New(big), first.ResourceVersion)
	checkOneUpdate(t, "layout change", first, second, events)

	// 3. A claim for >= 16000 MiB: nothing matches but the draining device,
	// so the real scheduler leaves the pod pending.
	claim := &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "big-mig"},
		Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{
			Name: "mig",
			Exactly: &resourceapi.ExactDeviceRequest{
				DeviceClassName: "mig.miglayout.io",
				Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{
					Expression: "device.attributes['mig.miglayout.io'].memory >= 16000",
				}}},
			},
		}}}},
	}
	if claim, err = client.ResourceV1().ResourceClaims(ns).Create(ctx, claim, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "trainer"},
		Spec: corev1.PodSpec{
			NodeSelector:   map[string]string{corev1.LabelHostname: n.name},
			ResourceClaims: []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimName: ptr.To(claim.Name)}},
			Containers: []corev1.Container{{Name: "c", Image: "registry.invalid/none:1",
				Resources: corev1.ResourceRequirements{Claims: []corev1.ResourceClaim{{Name: "gpu"}}}}},
		},
	}
	if _, err := client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		p, err := client.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if p.Spec.NodeName != "" {
			return false, fmt.Errorf("pod bound to %s while the only matching device is draining", p.Spec.NodeName)
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("pod with only a draining device to use: %v", err)
	}
	if c, err := client.ResourceV1().ResourceClaims(ns).Get(ctx, claim.Name, metav1.GetOptions{}); err != nil || c.Status.Allocation != nil {
		t.Fatalf("claim allocated to a draining device: %v %+v", err, c.Status.Allocation)
	}

	// 4. The drain is called off (no taint): one more update, and the
	// scheduler allocates the claim to that device and binds the pod.
	third, events := publishAndObserve(t, ctx, n, invB, nil, second[0].ResourceVersion)
	checkOneUpdate(t, "untaint", second[0], third, events)
	var bound *corev1.Pod
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		bound, err = client.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
		return err == nil && bound.Spec.NodeName != "", err
	})
	if err != nil {
		t.Fatalf("pod not bound after the drain ended: %v", err)
	}
	if bound.Spec.NodeName != n.name {
		t.Errorf("pod bound to %s, want %s", bound.Spec.NodeName, n.name)
	}
	claim, err = client.ResourceV1().ResourceClaims(ns).Get(ctx, claim.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if claim.Status.Allocation == nil || len(claim.Status.Allocation.Devices.Results) != 1 {
		t.Fatalf("claim allocation %+v, want one device", claim.Status.Allocation)
	}
	res := claim.Status.Allocation.Devices.Results[0]
	if res.Driver != invDriver || res.Pool != n.name || res.Device != big {
		t.Errorf("allocated %s/%s/%s, want %s/%s/%s", res.Driver, res.Pool, res.Device, invDriver, n.name, big)
	}
	for _, d := range third[0].Spec.Devices {
		if d.Name == res.Device && *d.Attributes[migslices.AttrMemory].IntValue < 16000 {
			t.Errorf("allocated device %s has memory %d < 16000", d.Name, *d.Attributes[migslices.AttrMemory].IntValue)
		}
	}

	// 5. The kubelet's call: NodePrepareResources over the helper's gRPC
	// socket, with the claim as the apiserver has it.
	conn, err := grpc.NewClient("unix://"+filepath.Join(n.pluginDir, "dra.sock"), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	dra := drapb.NewDRAPluginClient(conn)
	pbClaim := &drapb.Claim{Namespace: ns, Name: claim.Name, Uid: string(claim.UID)}
	prep, err := dra.NodePrepareResources(ctx, &drapb.NodePrepareResourcesRequest{Claims: []*drapb.Claim{pbClaim}})
	if err != nil {
		t.Fatal(err)
	}
	r := prep.Claims[string(claim.UID)]
	if r == nil || r.Error != "" || len(r.Devices) != 1 || r.Devices[0].DeviceName != big || len(r.Devices[0].CdiDeviceIds) != 1 {
		t.Fatalf("NodePrepareResources = %+v", prep.Claims)
	}
	wantID := "k8s.mig.miglayout.io/claim=" + string(claim.UID) + "-" + big
	if r.Devices[0].CdiDeviceIds[0] != wantID {
		t.Errorf("CDI device ID %s, want %s", r.Devices[0].CdiDeviceIds[0], wantID)
	}
	var bigUUID string
	for _, s := range invB.Sources() {
		if s.Name == big {
			bigUUID = s.MIG.UUID
		}
	}
	specPath := filepath.Join(n.cdiDir, "k8s.mig.miglayout.io-claim_"+string(claim.UID)+".json")
	spec, err := os.ReadFile(specPath)
	if err != nil || !strings.Contains(string(spec), "NVIDIA_VISIBLE_DEVICES="+bigUUID) {
		t.Errorf("CDI spec %s: %v; want NVIDIA_VISIBLE_DEVICES=%s in %s", specPath, err, bigUUID, spec)
	}
	if got := n.plugin.PreparedDevices(); len(got[big]) != 1 {
		t.Errorf("PreparedDevices = %v, want %s prepared", got, big)
	}
	unprep, err := dra.NodeUnprepareResources(ctx, &drapb.NodeUnprepareResourcesRequest{Claims: []*drapb.Claim{pbClaim}})
	if err != nil {
		t.Fatal(err)
	}
	if u := unprep.Claims[string(claim.UID)]; u == nil || u.Error != "" {
		t.Errorf("NodeUnprepareResources = %+v", unprep.Claims)
	}
	if _, err := os.Stat(specPath); !os.IsNotExist(err) {
		t.Errorf("CDI spec still there after unprepare: %v", err)
	}
}

// checkOneUpdate checks that the pool changed through exactly one update of
// the one slice it had: same name, new resourceVersion, same generation, no
// slice created or deleted.
func checkOneUpdate(t *testing.T, what string, before resourceapi.ResourceSlice, after []resourceapi.ResourceSlice, events []watch.Event) {
	t.Helper()
	if len(after) != 1 || after[0].Name != before.Name || after[0].ResourceVersion == before.ResourceVersion ||
		after[0].Spec.Pool.Generation != before.Spec.Pool.Generation {
		t.Errorf("%s: before slice %s rv %s gen %d; after %d slices %v; want the same single slice updated at the same generation",
			what, before.Name, before.ResourceVersion, before.Spec.Pool.Generation, len(after), sliceSummary(after))
	}
	var kinds []string
	for _, ev := range events {
		name := ""
		if s, ok := ev.Object.(*resourceapi.ResourceSlice); ok {
			name = s.Name
		} else {
			name = fmt.Sprintf("%+v", ev.Object)
		}
		kinds = append(kinds, string(ev.Type)+" "+name)
	}
	if len(kinds) != 1 || kinds[0] != string(watch.Modified)+" "+before.Name {
		t.Errorf("%s: watch saw %v, want exactly one MODIFIED %s", what, kinds, before.Name)
	}
}

func sliceSummary(ss []resourceapi.ResourceSlice) []string {
	var out []string
	for _, s := range ss {
		out = append(out, fmt.Sprintf("%s(rv %s, gen %d, %d/%d, %d devices)", s.Name, s.ResourceVersion, s.Spec.Pool.Generation,
			len(out)+1, s.Spec.Pool.ResourceSliceCount, len(s.Spec.Devices)))
	}
	return out
}

// A pool too big for one slice (here 130 devices) is published as several
// slices of one pool at one generation, and a change of more than one of
// them bumps the generation, so the scheduler never combines slices of two
// states. The resourceslice controller runs directly here, owned by the
// Node as under the helper.
func TestInventorySplitPoolGenerationBump(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	name := "inv-split-" + rand.String(5)
	if _, err := harness.CreateNode(ctx, client, name, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = client.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{})
		_ = client.ResourceV1().ResourceSlices().DeleteCollection(ctx, metav1.DeleteOptions{},
			metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("spec.nodeName", name).String()})
	})
	devices := func(prefix string) []resourceapi.Device {
		model, _ := mig.DefaultCatalog().Model("A100-SXM4-80GB")
		out := make([]resourceapi.Device, 130)
		for i := range out {
			d, err := migslices.PlannedMIGDevice(migslices.PlannedGPU(model, i/7), mig.Device{Profile: "1g.10gb", Start: i % 7})
			if err != nil {
				t.Fatal(err)
			}
			d.Name = fmt.Sprintf("%s-%d", prefix, i)
			out[i] = d
		}
		return out
	}
	res, err := migslices.BuildPoolFromDevices(name, devices("a"))
	if err != nil {
		t.Fatal(err)
	}
	ctrl, err := resourceslice.StartController(ctx, resourceslice.Options{
		DriverName: invDriver, KubeClient: client, Resources: &res,
		Owner: &resourceslice.Owner{APIVersion: "v1", Kind: "Node", Name: name},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer ctrl.Stop()
	pub := migslices.ControllerPublisher{Controller: ctrl}
	var names []string
	for _, d := range devices("a") {
		names = append(names, d.Name)
	}
	got := waitSlices(t, ctx, name, names...)
	if len(got) != 2 {
		t.Fatalf("130 devices published as %v, want 2 slices", sliceSummary(got))
	}
	gen := got[0].Spec.Pool.Generation
	for _, s := range got {
		if s.Spec.Pool.Generation != gen || s.Spec.Pool.ResourceSliceCount != 2 || s.Spec.Pool.Name != name {
			t.Errorf("slices %v: want one pool %s of 2 slices at one generation", sliceSummary(got), name)
		}
	}
	res2, err := migslices.BuildPoolFromDevices(name, devices("b"))
	if err != nil {
		t.Fatal(err)
	}
	if err := pub.PublishResources(ctx, res2); err != nil {
		t.Fatal(err)
	}
	names = names[:0]
	for _, d := range devices("b") {
		names = append(names, d.Name)
	}
	got = waitSlices(t, ctx, name, names...)
	for _, s := range got {
		if s.Spec.Pool.Generation <= gen {
			t.Errorf("changing both slices kept generation %d: %v", gen, sliceSummary(got))
		}
	}
}
