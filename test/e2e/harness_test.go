package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/miglayout/miglayout/test/harness"
)

// Smoke tests of the harness itself: the real kube-scheduler allocates DRA claims against
// hand-made ResourceSlices and binds pods to hand-made Nodes.

const (
	exampleDriver = "gpu.example.com"
	exampleClass  = "gpu.example.com"
)

func ctxFor(t *testing.T, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), d)
	t.Cleanup(cancel)
	return ctx
}

// fixture is a namespace plus one node publishing two example GPUs (8000 and 24000 "memory").
type fixture struct {
	ns, node string
}

func newFixture(t *testing.T, ctx context.Context) fixture {
	t.Helper()
	suffix := rand.String(5)
	f := fixture{ns: "e2e-" + suffix, node: "node-" + suffix}
	ensureDeviceClass(t, ctx)
	if _, err := harness.CreateNamespace(ctx, client, f.ns); err != nil {
		t.Fatal(err)
	}
	if _, err := harness.CreateNode(ctx, client, f.node, map[string]string{"miglayout.test/fixture": suffix}); err != nil {
		t.Fatal(err)
	}
	slice := &resourceapi.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: f.node + "-" + exampleDriver},
		Spec: resourceapi.ResourceSliceSpec{
			Driver:   exampleDriver,
			NodeName: &f.node,
			Pool:     resourceapi.ResourcePool{Name: f.node, Generation: 1, ResourceSliceCount: 1},
			Devices:  []resourceapi.Device{exampleGPU("gpu-0", 8000), exampleGPU("gpu-1", 24000)},
		},
	}
	if _, err := client.ResourceV1().ResourceSlices().Create(ctx, slice, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		pods, err := client.CoreV1().Pods(f.ns).List(ctx, metav1.ListOptions{})
		if err == nil {
			for _, p := range pods.Items {
				_ = harness.ForceDeletePod(ctx, client, f.ns, p.Name)
			}
		}
		_ = client.CoreV1().Namespaces().Delete(ctx, f.ns, metav1.DeleteOptions{})
		_ = client.ResourceV1().ResourceSlices().Delete(ctx, slice.Name, metav1.DeleteOptions{})
		_ = client.CoreV1().Nodes().Delete(ctx, f.node, metav1.DeleteOptions{})
	})
	return f
}

func exampleGPU(name string, memory int64) resourceapi.Device {
	return resourceapi.Device{
		Name: name,
		Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
			"memory":      {IntValue: ptr.To(memory)},
			"productName": {StringValue: ptr.To(fmt.Sprintf("Example GPU %d", memory))},
		},
	}
}

func ensureDeviceClass(t *testing.T, ctx context.Context) {
	t.Helper()
	dc := &resourceapi.DeviceClass{
		ObjectMeta: metav1.ObjectMeta{Name: exampleClass},
		Spec: resourceapi.DeviceClassSpec{Selectors: []resourceapi.DeviceSelector{{
			CEL: &resourceapi.CELDeviceSelector{Expression: "device.driver == '" + exampleDriver + "'"},
		}}},
	}
	_, err := client.ResourceV1().DeviceClasses().Create(ctx, dc, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

// podWithClaim returns a pod (pinned to node) whose container uses the pod-level claim "gpu".
func podWithClaim(ns, name, node string, claim corev1.PodResourceClaim) *corev1.Pod {
	claim.Name = "gpu"
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.PodSpec{
			NodeSelector:   map[string]string{corev1.LabelHostname: node},
			ResourceClaims: []corev1.PodResourceClaim{claim},
			Containers: []corev1.Container{{
				Name:      "c",
				Image:     "registry.invalid/none:1",
				Resources: corev1.ResourceRequirements{Claims: []corev1.ResourceClaim{{Name: "gpu"}}},
			}},
		},
	}
}

func claimSpec(cel string) resourceapi.ResourceClaimSpec {
	req := resourceapi.DeviceRequest{Name: "gpu", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: exampleClass}}
	if cel != "" {
		req.Exactly.Selectors = []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: cel}}}
	}
	return resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{req}}}
}

// waitBound waits until the pod is bound to a node and returns it.
func waitBound(t *testing.T, ctx context.Context, ns, name string) *corev1.Pod {
	t.Helper()
	var pod *corev1.Pod
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		var err error
		pod, err = client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return pod.Spec.NodeName != "", nil
	})
	if err != nil {
		t.Fatalf("pod %s/%s not bound: %v; conditions: %+v", ns, name, err, podConditions(pod))
	}
	return pod
}

func podConditions(pod *corev1.Pod) string {
	if pod == nil {
		return "<no pod>"
	}
	var b strings.Builder
	for _, c := range pod.Status.Conditions {
		fmt.Fprintf(&b, "%s=%s (%s: %s); ", c.Type, c.Status, c.Reason, c.Message)
	}
	return b.String()
}

func checkAllocation(t *testing.T, claim *resourceapi.ResourceClaim, node string, wantDevices ...string) {
	t.Helper()
	if claim.Status.Allocation == nil {
		t.Fatalf("claim %s not allocated", claim.Name)
	}
	results := claim.Status.Allocation.Devices.Results
	var got []string
	for _, r := range results {
		if r.Driver != exampleDriver || r.Pool != node || r.Request != "gpu" {
			t.Errorf("claim %s: unexpected result %+v (want driver %s, pool %s, request gpu)", claim.Name, r, exampleDriver, node)
		}
		got = append(got, r.Device)
	}
	if len(wantDevices) > 0 && strings.Join(got, ",") != strings.Join(wantDevices, ",") {
		t.Errorf("claim %s: allocated devices %v, want %v", claim.Name, got, wantDevices)
	}
	if len(got) != 1 {
		t.Errorf("claim %s: %d devices allocated, want 1", claim.Name, len(got))
	}
	if claim.Status.Allocation.NodeSelector == nil {
		t.Errorf("claim %s: allocation has no node selector", claim.Name)
	}
	reserved := false
	for _, r := range claim.Status.ReservedFor {
		reserved = reserved || r.Resource == "pods"
	}
	if !reserved {
		t.Errorf("claim %s: not reserved for the pod: %+v", claim.Name, claim.Status.ReservedFor)
	}
}

// The scheduler evaluates the claim's CEL selector against the slice: only the 24000 device fits.
func TestSchedulerAllocatesClaimByCEL(t *testing.T) {
	ctx := ctxFor(t, 2*time.Minute)
	f := newFixture(t, ctx)

	claim := &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "big-gpu"},
		Spec:       claimSpec("device.attributes['" + exampleDriver + "'].memory >= 16000"),
	}
	if _, err := client.ResourceV1().ResourceClaims(f.ns).Create(ctx, claim, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	pod := podWithClaim(f.ns, "pod-claim", f.node, corev1.PodResourceClaim{ResourceClaimName: ptr.To("big-gpu")})
	if _, err := client.CoreV1().Pods(f.ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod = waitBound(t, ctx, f.ns, pod.Name)
	t.Logf("pod bound to %s %v after creation", pod.Spec.NodeName, time.Since(start).Round(time.Millisecond))
	if pod.Spec.NodeName != f.node {
		t.Errorf("pod bound to %q, want %q", pod.Spec.NodeName, f.node)
	}
	got, err := client.ResourceV1().ResourceClaims(f.ns).Get(ctx, "big-gpu", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	checkAllocation(t, got, f.node, "gpu-1")
	if len(got.Status.ReservedFor) != 1 || got.Status.ReservedFor[0].UID != pod.UID {
		t.Errorf("claim reserved for %+v, want pod %s", got.Status.ReservedFor, pod.UID)
	}
}

// No device satisfies the selector: the pod stays pending, marked unschedulable.
func TestSchedulerLeavesUnsatisfiableClaimPending(t *testing.T) {
	ctx := ctxFor(t, 2*time.Minute)
	f := newFixture(t, ctx)

	claim := &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "huge-gpu"},
		Spec:       claimSpec("device.attributes['" + exampleDriver + "'].memory >= 32000"),
	}
	if _, err := client.ResourceV1().ResourceClaims(f.ns).Create(ctx, claim, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod := podWithClaim(f.ns, "pod-huge", f.node, corev1.PodResourceClaim{ResourceClaimName: ptr.To("huge-gpu")})
	if _, err := client.CoreV1().Pods(f.ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var last *corev1.Pod
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		p, err := client.CoreV1().Pods(f.ns).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		last = p
		if p.Spec.NodeName != "" {
			return false, fmt.Errorf("pod bound to %s although no device has memory >= 32000", p.Spec.NodeName)
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("pod not marked unschedulable: %v; conditions: %s", err, podConditions(last))
	}
	got, err := client.ResourceV1().ResourceClaims(f.ns).Get(ctx, "huge-gpu", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Status.Allocation != nil {
		t.Errorf("claim allocated: %+v", got.Status.Allocation)
	}
}

// A pod with a ResourceClaimTemplate gets its own claim, generated by kube-controller-manager
// (owned by the pod), which the scheduler then allocates.
func TestClaimTemplateGeneratesClaimPerPod(t *testing.T) {
	ctx := ctxFor(t, 2*time.Minute)
	f := newFixture(t, ctx)

	tmpl := &resourceapi.ResourceClaimTemplate{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "any-gpu"},
		Spec:       resourceapi.ResourceClaimTemplateSpec{Spec: claimSpec("")},
	}
	if _, err := client.ResourceV1().ResourceClaimTemplates(f.ns).Create(ctx, tmpl, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	claimNames := map[string]bool{}
	devices := map[string]bool{}
	for _, name := range []string{"pod-template-a", "pod-template-b"} {
		pod := podWithClaim(f.ns, name, f.node, corev1.PodResourceClaim{ResourceClaimTemplateName: ptr.To("any-gpu")})
		if _, err := client.CoreV1().Pods(f.ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		pod = waitBound(t, ctx, f.ns, name)
		if pod.Spec.NodeName != f.node {
			t.Errorf("pod %s bound to %q, want %q", name, pod.Spec.NodeName, f.node)
		}
		if len(pod.Status.ResourceClaimStatuses) != 1 || pod.Status.ResourceClaimStatuses[0].ResourceClaimName == nil {
			t.Fatalf("pod %s: resourceClaimStatuses %+v, want one generated claim", name, pod.Status.ResourceClaimStatuses)
		}
		claimName := *pod.Status.ResourceClaimStatuses[0].ResourceClaimName
		claimNames[claimName] = true
		claim, err := client.ResourceV1().ResourceClaims(f.ns).Get(ctx, claimName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		owner := metav1.GetControllerOf(claim)
		if owner == nil || owner.Kind != "Pod" || owner.UID != pod.UID {
			t.Errorf("claim %s: controller %+v, want pod %s (%s)", claimName, owner, name, pod.UID)
		}
		checkAllocation(t, claim, f.node)
		for _, r := range claim.Status.Allocation.Devices.Results {
			devices[r.Device] = true
		}
	}
	if len(claimNames) != 2 {
		t.Errorf("generated claims %v, want one per pod", claimNames)
	}
	if len(devices) != 2 {
		t.Errorf("allocated devices %v, want both GPUs (one per pod)", devices)
	}
}

// Identities made by the harness authenticate as themselves and meet RBAC.
func TestHarnessIdentities(t *testing.T) {
	ctx := ctxFor(t, time.Minute)
	cases := []struct {
		name    string
		groups  []string
		canList bool
	}{
		{"alice", nil, false},
		{"root-ish", []string{"system:masters"}, true},
	}
	for _, c := range cases {
		cs, err := kubernetesFor(cp.ConfigForUser(c.name, c.groups))
		if err != nil {
			t.Fatal(err)
		}
		review, err := cs.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("%s: self subject review: %v", c.name, err)
		}
		if review.Status.UserInfo.Username != c.name {
			t.Errorf("authenticated as %q, want %q", review.Status.UserInfo.Username, c.name)
		}
		_, err = cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if c.canList && err != nil {
			t.Errorf("%s: list nodes: %v", c.name, err)
		}
		if !c.canList && !apierrors.IsForbidden(err) {
			t.Errorf("%s: list nodes: got %v, want Forbidden", c.name, err)
		}
	}

	saCfg, err := cp.ConfigForServiceAccount(ctx, "default", "default")
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetesFor(saCfg)
	if err != nil {
		t.Fatal(err)
	}
	review, err := cs.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if want := "system:serviceaccount:default:default"; review.Status.UserInfo.Username != want {
		t.Errorf("service account authenticated as %q, want %q", review.Status.UserInfo.Username, want)
	}
}

func kubernetesFor(cfg *rest.Config) (kubernetes.Interface, error) {
	return kubernetes.NewForConfig(cfg)
}
