package fullstack

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/miglayout/miglayout/api/v1alpha1"
	"github.com/miglayout/miglayout/pkg/mig/nvmlsim"
	migslices "github.com/miglayout/miglayout/pkg/slices"
	"github.com/miglayout/miglayout/test/cluster"
	"github.com/miglayout/miglayout/test/harness"
)

const (
	driver   = cluster.Driver
	migClass = "mig.miglayout.io"
	a100     = "A100-SXM4-80GB"
	h100     = "H100-SXM5-80GB"
)

func ctxFor(t *testing.T, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), d)
	t.Cleanup(cancel)
	return ctx
}

// poll calls cond every 100ms until it is true; on timeout it fails the test with what
// and the last detail cond returned.
func poll(t *testing.T, ctx context.Context, timeout time.Duration, what string, cond func(ctx context.Context) (bool, string)) {
	t.Helper()
	var last string
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		ok, detail := cond(ctx)
		last = detail
		return ok, nil
	})
	if err != nil {
		t.Fatalf("waiting for %s: %v; last: %s", what, err, last)
	}
}

// ---- MigLayouts ----

func rule(name, product string, p map[string]int32) v1alpha1.LayoutRule {
	return v1alpha1.LayoutRule{Name: name, ProductName: product, Profiles: p}
}

// setMigLayout creates the MigLayout or replaces its spec, and returns it with the new
// generation.
func setMigLayout(t *testing.T, ctx context.Context, name string, selector map[string]string, rules ...v1alpha1.LayoutRule) *v1alpha1.MigLayout {
	t.Helper()
	spec := v1alpha1.MigLayoutSpec{
		NodeSelector: metav1.LabelSelector{MatchLabels: selector},
		Mode:         v1alpha1.ModeStatic,
		Rules:        rules,
	}
	ml := &v1alpha1.MigLayout{}
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		err := crc.Get(ctx, crclient.ObjectKey{Name: name}, ml)
		if apierrors.IsNotFound(err) {
			ml = &v1alpha1.MigLayout{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec}
			return crc.Create(ctx, ml)
		}
		if err != nil {
			return err
		}
		ml.Spec = spec
		return crc.Update(ctx, ml)
	})
	if err != nil {
		t.Fatalf("setting MigLayout %s: %v", name, err)
	}
	t.Logf("MigLayout %s generation %d: %s", name, ml.Generation, describeRules(rules))
	return ml
}

func describeRules(rules []v1alpha1.LayoutRule) string {
	var parts []string
	for _, r := range rules {
		keys := slices.Sorted(maps.Keys(r.Profiles))
		var ps []string
		for _, k := range keys {
			ps = append(ps, fmt.Sprintf("%s:%d", k, r.Profiles[k]))
		}
		parts = append(parts, fmt.Sprintf("%s[%s]{%s}", r.Name, r.ProductName, strings.Join(ps, ",")))
	}
	return strings.Join(parts, " ")
}

func deleteMigLayout(t *testing.T, name string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := crc.Delete(ctx, &v1alpha1.MigLayout{ObjectMeta: metav1.ObjectMeta{Name: name}})
	if err != nil && !apierrors.IsNotFound(err) {
		t.Errorf("deleting MigLayout %s: %v", name, err)
	}
}

func condition(conds []metav1.Condition, typ string) *metav1.Condition {
	return meta.FindStatusCondition(conds, typ)
}

func hasCondition(conds []metav1.Condition, typ string, status metav1.ConditionStatus, reason string) bool {
	c := condition(conds, typ)
	return c != nil && c.Status == status && (reason == "" || c.Reason == reason)
}

func conditionsString(conds []metav1.Condition) string {
	var parts []string
	for _, c := range conds {
		parts = append(parts, fmt.Sprintf("%s=%s(%s: %s)", c.Type, c.Status, c.Reason, c.Message))
	}
	return strings.Join(parts, "; ")
}

// waitMigLayout waits until the MigLayout's status for the given generation satisfies ok.
func waitMigLayout(t *testing.T, ctx context.Context, name string, generation int64, timeout time.Duration, what string, ok func(*v1alpha1.MigLayout) bool) *v1alpha1.MigLayout {
	t.Helper()
	var ml v1alpha1.MigLayout
	poll(t, ctx, timeout, fmt.Sprintf("MigLayout %s (generation %d): %s", name, generation, what), func(ctx context.Context) (bool, string) {
		if err := crc.Get(ctx, crclient.ObjectKey{Name: name}, &ml); err != nil {
			return false, err.Error()
		}
		detail := fmt.Sprintf("observedGeneration %d, %s, nodes %+v", ml.Status.ObservedGeneration, conditionsString(ml.Status.Conditions), ml.Status.Nodes)
		return ml.Status.ObservedGeneration >= generation && ok(&ml), detail
	})
	return &ml
}

func waitReady(t *testing.T, ctx context.Context, ml *v1alpha1.MigLayout, nodes int) *v1alpha1.MigLayout {
	t.Helper()
	return waitMigLayout(t, ctx, ml.Name, ml.Generation, 90*time.Second, "Ready", func(ml *v1alpha1.MigLayout) bool {
		return hasCondition(ml.Status.Conditions, v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonAllNodesReady) &&
			ml.Status.ReadyNodes == int32(nodes) && ml.Status.SelectedNodes == int32(nodes)
	})
}

func getNodeMigLayout(t *testing.T, ctx context.Context, node string) *v1alpha1.NodeMigLayout {
	t.Helper()
	var nml v1alpha1.NodeMigLayout
	if err := crc.Get(ctx, crclient.ObjectKey{Name: node}, &nml); err != nil {
		t.Fatalf("reading NodeMigLayout %s: %v", node, err)
	}
	return &nml
}

// ---- simulated hardware and published pools ----

func snapshot(t *testing.T, node string) nvmlsim.State {
	t.Helper()
	sim, err := cl.Sim(node)
	if err != nil {
		t.Fatal(err)
	}
	return sim.Snapshot()
}

// layouts returns each GPU's layout in canonical text form ("-" for MIG off).
func layouts(st nvmlsim.State) []string {
	var out []string
	for _, g := range st.GPUs {
		if !g.MIGCurrent {
			out = append(out, "-")
			continue
		}
		out = append(out, g.Layout().String())
	}
	return out
}

// profileCounts returns "1g.10gb:2,3g.40gb:1"-style counts of a GPU's instances.
func profileCounts(g nvmlsim.GPU) string {
	counts := g.Layout().Counts()
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(counts)) {
		parts = append(parts, fmt.Sprintf("%s:%d", k, counts[k]))
	}
	return strings.Join(parts, ",")
}

// orphanGI reports a GPU instance without its compute instance.
func orphanGI(st nvmlsim.State) (string, bool) {
	for _, g := range st.GPUs {
		for _, gi := range g.GPUInstances {
			if len(gi.ComputeInstances) == 0 {
				return fmt.Sprintf("GPU %d: GI %d %s@%d has no compute instance", g.Index, gi.ID, gi.Profile, gi.Placement.Start), true
			}
		}
	}
	return "", false
}

// nvmlDevices is what the node's pool must publish according to NVML: device name → UUID.
func nvmlDevices(st nvmlsim.State) map[string]string {
	out := map[string]string{}
	for _, g := range st.GPUs {
		if !g.MIGCurrent {
			out[migslices.GPUDeviceName(g.Index)] = g.UUID
			continue
		}
		for _, gi := range g.GPUInstances {
			for _, ci := range gi.ComputeInstances {
				out[migslices.MIGDeviceName(g.Index, gi.Profile, gi.ProfileID, gi.Placement.Start)] = ci.UUID
			}
		}
	}
	return out
}

type publishedDevice struct {
	uuid    string
	tainted bool
	device  resourceapi.Device
}

// poolDevices lists the devices the node's ResourceSlices publish.
func poolDevices(ctx context.Context, node string) (map[string]publishedDevice, error) {
	list, err := client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{
		FieldSelector: "spec.nodeName=" + node + ",spec.driver=" + driver})
	if err != nil {
		return nil, err
	}
	out := map[string]publishedDevice{}
	maxGen := int64(0)
	for _, s := range list.Items {
		maxGen = max(maxGen, s.Spec.Pool.Generation)
	}
	for _, s := range list.Items {
		if s.Spec.Pool.Generation != maxGen {
			continue // an old generation is ignored by the scheduler too
		}
		for _, d := range s.Spec.Devices {
			pd := publishedDevice{device: d, tainted: len(d.Taints) > 0}
			if a, ok := d.Attributes[migslices.AttrUUID]; ok && a.StringValue != nil {
				pd.uuid = *a.StringValue
			}
			out[d.Name] = pd
		}
	}
	return out, nil
}

// waitPoolMatchesNVML waits until the node's pool publishes exactly the devices NVML has,
// with their UUIDs and no drain taint (invariant 2).
func waitPoolMatchesNVML(t *testing.T, ctx context.Context, node string) map[string]string {
	t.Helper()
	var want map[string]string
	poll(t, ctx, 30*time.Second, "the pool of "+node+" to equal NVML", func(ctx context.Context) (bool, string) {
		want = nvmlDevices(snapshot(t, node))
		got, err := poolDevices(ctx, node)
		if err != nil {
			return false, err.Error()
		}
		var diff []string
		for name, uuid := range want {
			pd, ok := got[name]
			switch {
			case !ok:
				diff = append(diff, "missing "+name)
			case pd.uuid != uuid:
				diff = append(diff, fmt.Sprintf("%s has uuid %s, NVML %s", name, pd.uuid, uuid))
			case pd.tainted:
				diff = append(diff, name+" is still tainted")
			}
		}
		for name := range got {
			if _, ok := want[name]; !ok {
				diff = append(diff, "phantom "+name)
			}
		}
		sort.Strings(diff)
		return len(diff) == 0, strings.Join(diff, "; ")
	})
	return want
}

// ---- namespaces, claims, pods ----

// newNamespace creates a namespace; at cleanup its pods are deleted (the stand-in kubelet
// unprepares and removes them) and waited for, and so are its claims, so that no
// allocation is left to block a later test's layout change.
func newNamespace(t *testing.T, ctx context.Context, prefix string) string {
	t.Helper()
	ns := prefix + "-" + rand.String(5)
	if _, err := harness.CreateNamespace(ctx, client, ns); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cleanupNamespace(t, ns) })
	return ns
}

func cleanupNamespace(t *testing.T, ns string) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	_ = client.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
	err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		pods, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		return err == nil && len(pods.Items) == 0, nil
	})
	if err != nil {
		t.Errorf("cleanup: pods of %s not gone: %v", ns, err)
	}
	_ = client.ResourceV1().ResourceClaims(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
	err = wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		claims, err := client.ResourceV1().ResourceClaims(ns).List(ctx, metav1.ListOptions{})
		return err == nil && len(claims.Items) == 0, nil
	})
	if err != nil {
		t.Errorf("cleanup: claims of %s not gone: %v", ns, err)
	}
	_ = client.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
}

// claimSpec asks for one device of the MIG class matching the CEL expression ("" = any).
func claimSpec(cel string) resourceapi.ResourceClaimSpec {
	req := resourceapi.DeviceRequest{Name: "gpu", Exactly: &resourceapi.ExactDeviceRequest{
		DeviceClassName: migClass, AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 1,
	}}
	if cel != "" {
		req.Exactly.Selectors = []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: cel}}}
	}
	return resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{req}}}
}

func createClaim(t *testing.T, ctx context.Context, ns, name, cel string) *resourceapi.ResourceClaim {
	t.Helper()
	c, err := client.ResourceV1().ResourceClaims(ns).Create(ctx, &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: claimSpec(cel)}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating claim %s/%s: %v", ns, name, err)
	}
	return c
}

// podFor is a pod with one container using one claim, pinned by node selector.
func podFor(ns, name string, nodeSelector map[string]string, claim resourceapi.ResourceClaim) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.PodSpec{
			NodeSelector:                  nodeSelector,
			TerminationGracePeriodSeconds: ptr.To(int64(1)),
			Containers: []corev1.Container{{
				Name: "cuda", Image: "nvcr.io/nvidia/cuda:12.9.0-base-ubuntu24.04",
				Command:   []string{"nvidia-smi", "-L"},
				Resources: corev1.ResourceRequirements{Claims: []corev1.ResourceClaim{{Name: "gpu"}}},
			}},
			ResourceClaims: []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimName: ptr.To(claim.Name)}},
		},
	}
}

func onNode(node string) map[string]string { return map[string]string{corev1.LabelHostname: node} }

func createPod(t *testing.T, ctx context.Context, pod *corev1.Pod) *corev1.Pod {
	t.Helper()
	p, err := client.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating pod %s/%s: %v", pod.Namespace, pod.Name, err)
	}
	return p
}

func waitPodRunning(t *testing.T, ctx context.Context, ns, name string) *corev1.Pod {
	t.Helper()
	var pod *corev1.Pod
	poll(t, ctx, 60*time.Second, "pod "+ns+"/"+name+" Running", func(ctx context.Context) (bool, string) {
		p, err := client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		pod = p
		return p.Status.Phase == corev1.PodRunning && podReady(p), fmt.Sprintf("phase %s, node %q, conditions %+v", p.Status.Phase, p.Spec.NodeName, p.Status.Conditions)
	})
	return pod
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func waitPodGone(t *testing.T, ctx context.Context, ns, name string) {
	t.Helper()
	poll(t, ctx, 60*time.Second, "pod "+ns+"/"+name+" to be gone", func(ctx context.Context) (bool, string) {
		p, err := client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, ""
		}
		if err != nil {
			return false, err.Error()
		}
		return false, fmt.Sprintf("phase %s, deletionTimestamp %v", p.Status.Phase, p.DeletionTimestamp)
	})
}

func getClaim(t *testing.T, ctx context.Context, ns, name string) *resourceapi.ResourceClaim {
	t.Helper()
	c, err := client.ResourceV1().ResourceClaims(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("reading claim %s/%s: %v", ns, name, err)
	}
	return c
}

// allocated returns the (pool, device) of a claim's single allocated device.
func allocated(c *resourceapi.ResourceClaim) (pool, device string, ok bool) {
	if c.Status.Allocation == nil || len(c.Status.Allocation.Devices.Results) != 1 {
		return "", "", false
	}
	r := c.Status.Allocation.Devices.Results[0]
	return r.Pool, r.Device, true
}

// processesOn returns the simulated processes on the device with the given UUID.
func processesOn(st nvmlsim.State, uuid string) []nvmlsim.Process {
	var out []nvmlsim.Process
	for _, p := range st.Processes {
		if p.DeviceUUID == uuid {
			out = append(out, p)
		}
	}
	return out
}

// gpuOf returns the GPU with the given index.
func gpuOf(st nvmlsim.State, idx int) nvmlsim.GPU {
	for _, g := range st.GPUs {
		if g.Index == idx {
			return g
		}
	}
	return nvmlsim.GPU{Index: -1}
}

// describe runs kubectl describe and logs its output.
func describe(t *testing.T, ctx context.Context, args ...string) string {
	t.Helper()
	out, err := cl.Kubectl(ctx, append([]string{"describe"}, args...)...)
	if err != nil {
		t.Errorf("kubectl describe %v: %v", args, err)
	}
	return string(out)
}
