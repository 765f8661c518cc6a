package auto

// Helpers. They follow test/e2e/fullstack's helpers_test.go, which a test package cannot
// import; only what the Auto scenario needs is here.

import (
	"context"
	"fmt"
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

// setMigLayout creates the MigLayout or replaces its spec, and returns it with the new
// generation.
func setMigLayout(t *testing.T, ctx context.Context, name string, spec v1alpha1.MigLayoutSpec) *v1alpha1.MigLayout {
	t.Helper()
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
	t.Logf("MigLayout %s generation %d: mode %s", name, ml.Generation, spec.Mode)
	return ml
}

func hasCondition(conds []metav1.Condition, typ string, status metav1.ConditionStatus) bool {
	c := meta.FindStatusCondition(conds, typ)
	return c != nil && c.Status == status
}

// waitReady waits until the MigLayout's status for its generation says all nodes Ready.
func waitReady(t *testing.T, ctx context.Context, ml *v1alpha1.MigLayout, nodes int) {
	t.Helper()
	poll(t, ctx, 90*time.Second, fmt.Sprintf("MigLayout %s (generation %d) Ready on %d nodes", ml.Name, ml.Generation, nodes), func(ctx context.Context) (bool, string) {
		var got v1alpha1.MigLayout
		if err := crc.Get(ctx, crclient.ObjectKey{Name: ml.Name}, &got); err != nil {
			return false, err.Error()
		}
		return got.Status.ObservedGeneration >= ml.Generation &&
				hasCondition(got.Status.Conditions, v1alpha1.ConditionReady, metav1.ConditionTrue) &&
				got.Status.ReadyNodes == int32(nodes) && got.Status.SelectedNodes == int32(nodes),
			fmt.Sprintf("observedGeneration %d, conditions %+v", got.Status.ObservedGeneration, got.Status.Conditions)
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

// processesOn counts the simulated processes on the device with the given UUID.
func processesOn(st nvmlsim.State, uuid string) int {
	n := 0
	for _, p := range st.Processes {
		if p.DeviceUUID == uuid {
			n++
		}
	}
	return n
}

// poolDevices lists the devices of the newest generation of the node's pool: name →
// (UUID, tainted).
func poolDevices(ctx context.Context, node string) (map[string]string, map[string]bool, error) {
	list, err := client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{
		FieldSelector: "spec.nodeName=" + node + ",spec.driver=" + driver})
	if err != nil {
		return nil, nil, err
	}
	maxGen := int64(0)
	for _, s := range list.Items {
		maxGen = max(maxGen, s.Spec.Pool.Generation)
	}
	uuids, tainted := map[string]string{}, map[string]bool{}
	for _, s := range list.Items {
		if s.Spec.Pool.Generation != maxGen {
			continue
		}
		for _, d := range s.Spec.Devices {
			if a, ok := d.Attributes[migslices.AttrUUID]; ok && a.StringValue != nil {
				uuids[d.Name] = *a.StringValue
			}
			tainted[d.Name] = len(d.Taints) > 0
		}
	}
	return uuids, tainted, nil
}

// waitPoolMatchesNVML waits until the node's pool publishes exactly the devices NVML has,
// with their UUIDs and no drain taint (invariant 2).
func waitPoolMatchesNVML(t *testing.T, ctx context.Context, node string) {
	t.Helper()
	poll(t, ctx, 30*time.Second, "the pool of "+node+" to equal NVML", func(ctx context.Context) (bool, string) {
		want := nvmlDevices(snapshot(t, node))
		got, tainted, err := poolDevices(ctx, node)
		if err != nil {
			return false, err.Error()
		}
		var diff []string
		for name, uuid := range want {
			switch g, ok := got[name]; {
			case !ok:
				diff = append(diff, "missing "+name)
			case g != uuid:
				diff = append(diff, fmt.Sprintf("%s has uuid %s, NVML %s", name, g, uuid))
			case tainted[name]:
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
}

// ---- namespaces, claims, pods ----

// newNamespace creates a namespace; at cleanup its pods and claims are deleted and
// waited for.
func newNamespace(t *testing.T, ctx context.Context, prefix string) string {
	t.Helper()
	ns := prefix + "-" + rand.String(5)
	if _, err := harness.CreateNamespace(ctx, client, ns); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
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
		_ = client.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
	})
	return ns
}

// claimSpec asks for one device of the MIG class matching the CEL expression.
func claimSpec(cel string) resourceapi.ResourceClaimSpec {
	return resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{
		Name: "gpu", Exactly: &resourceapi.ExactDeviceRequest{
			DeviceClassName: migClass, AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 1,
			Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: cel}}},
		},
	}}}}
}

// pod is a pod with one container using one claim: by name (claim != "") or from the
// template.
func pod(ns, name string, nodeSelector map[string]string, claim, template string) *corev1.Pod {
	prc := corev1.PodResourceClaim{Name: "gpu"}
	if claim != "" {
		prc.ResourceClaimName = ptr.To(claim)
	} else {
		prc.ResourceClaimTemplateName = ptr.To(template)
	}
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
			ResourceClaims: []corev1.PodResourceClaim{prc},
		},
	}
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func waitPodRunning(t *testing.T, ctx context.Context, ns, name string, timeout time.Duration) *corev1.Pod {
	t.Helper()
	var pod *corev1.Pod
	poll(t, ctx, timeout, "pod "+ns+"/"+name+" Running", func(ctx context.Context) (bool, string) {
		p, err := client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		pod = p
		return p.Status.Phase == corev1.PodRunning && podReady(p), fmt.Sprintf("phase %s, node %q, conditions %+v", p.Status.Phase, p.Spec.NodeName, p.Status.Conditions)
	})
	return pod
}

// podClaim is the name of the pod's (single) claim: given, or generated from its template.
func podClaim(p *corev1.Pod) string {
	rc := p.Spec.ResourceClaims[0]
	if rc.ResourceClaimName != nil {
		return *rc.ResourceClaimName
	}
	for _, s := range p.Status.ResourceClaimStatuses {
		if s.Name == rc.Name && s.ResourceClaimName != nil {
			return *s.ResourceClaimName
		}
	}
	return ""
}

// allocated returns the (pool, device) of a claim's single allocated device.
func allocated(c *resourceapi.ResourceClaim) (pool, device string, ok bool) {
	if c.Status.Allocation == nil || len(c.Status.Allocation.Devices.Results) != 1 {
		return "", "", false
	}
	r := c.Status.Allocation.Devices.Results[0]
	return r.Pool, r.Device, true
}

func getClaim(t *testing.T, ctx context.Context, ns, name string) *resourceapi.ResourceClaim {
	t.Helper()
	c, err := client.ResourceV1().ResourceClaims(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("reading claim %s/%s: %v", ns, name, err)
	}
	return c
}
