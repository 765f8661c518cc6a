package clustertest

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	"github.com/miglayout/miglayout/test/harness"
)

// MIGDeviceClass is the DeviceClass of miglayout's MIG devices (deploy/deviceclasses).
const MIGDeviceClass = "mig.miglayout.io"

// NewNamespace creates a namespace named prefix-<random>. At cleanup its pods are deleted
// (the stand-in kubelet unprepares and removes them) and waited for, and so are its
// claims, so that no allocation is left to block a later test's layout change; then the
// namespace is deleted.
func (e *Env) NewNamespace(t testing.TB, ctx context.Context, prefix string) string {
	t.Helper()
	ns := prefix + "-" + rand.String(5)
	if _, err := harness.CreateNamespace(ctx, e.Client, ns); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.cleanupNamespace(t, ns) })
	return ns
}

func (e *Env) cleanupNamespace(t testing.TB, ns string) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	_ = e.Client.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
	err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		pods, err := e.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		return err == nil && len(pods.Items) == 0, nil
	})
	if err != nil {
		t.Errorf("cleanup: pods of %s not gone: %v", ns, err)
	}
	_ = e.Client.ResourceV1().ResourceClaims(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
	err = wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		claims, err := e.Client.ResourceV1().ResourceClaims(ns).List(ctx, metav1.ListOptions{})
		return err == nil && len(claims.Items) == 0, nil
	})
	if err != nil {
		t.Errorf("cleanup: claims of %s not gone: %v", ns, err)
	}
	_ = e.Client.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
}

// ClaimSpec asks for one device of the MIG class (request "gpu") matching the CEL
// expression ("" = any).
func ClaimSpec(cel string) resourceapi.ResourceClaimSpec {
	req := resourceapi.DeviceRequest{Name: "gpu", Exactly: &resourceapi.ExactDeviceRequest{
		DeviceClassName: MIGDeviceClass, AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 1,
	}}
	if cel != "" {
		req.Exactly.Selectors = []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: cel}}}
	}
	return resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{req}}}
}

// CreateClaim creates a claim with ClaimSpec(cel).
func (e *Env) CreateClaim(t testing.TB, ctx context.Context, ns, name, cel string) *resourceapi.ResourceClaim {
	t.Helper()
	c, err := e.Client.ResourceV1().ResourceClaims(ns).Create(ctx, &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: ClaimSpec(cel)}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating claim %s/%s: %v", ns, name, err)
	}
	return c
}

// GetClaim reads a claim.
func (e *Env) GetClaim(t testing.TB, ctx context.Context, ns, name string) *resourceapi.ResourceClaim {
	t.Helper()
	c, err := e.Client.ResourceV1().ResourceClaims(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("reading claim %s/%s: %v", ns, name, err)
	}
	return c
}

// Allocated returns the (pool, device) of a claim's single allocated device.
func Allocated(c *resourceapi.ResourceClaim) (pool, device string, ok bool) {
	if c.Status.Allocation == nil || len(c.Status.Allocation.Devices.Results) != 1 {
		return "", "", false
	}
	r := c.Status.Allocation.Devices.Results[0]
	return r.Pool, r.Device, true
}

// Pod is a pod with one container (a one-second grace period) using one claim "gpu": the
// claim of that name when claim is not "", else one from the ResourceClaimTemplate
// template.
func Pod(ns, name string, nodeSelector map[string]string, claim, template string) *corev1.Pod {
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

// OnNode is the node selector of one node.
func OnNode(node string) map[string]string { return map[string]string{corev1.LabelHostname: node} }

// PodClaim is the name of the pod's (single) claim: given, or generated from its template
// ("" until the claim controller has made it).
func PodClaim(p *corev1.Pod) string {
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

// CreatePod creates the pod.
func (e *Env) CreatePod(t testing.TB, ctx context.Context, pod *corev1.Pod) *corev1.Pod {
	t.Helper()
	p, err := e.Client.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating pod %s/%s: %v", pod.Namespace, pod.Name, err)
	}
	return p
}

// PodReady reports whether the pod's Ready condition is True.
func PodReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// WaitPodRunning waits until the pod is Running and Ready, and returns it.
func (e *Env) WaitPodRunning(t testing.TB, ctx context.Context, ns, name string, timeout time.Duration) *corev1.Pod {
	t.Helper()
	var pod *corev1.Pod
	Poll(t, ctx, timeout, "pod "+ns+"/"+name+" Running", func(ctx context.Context) (bool, string) {
		p, err := e.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		pod = p
		return p.Status.Phase == corev1.PodRunning && PodReady(p), fmt.Sprintf("phase %s, node %q, conditions %+v", p.Status.Phase, p.Spec.NodeName, p.Status.Conditions)
	})
	return pod
}

// WaitPodGone waits (60s at most) until the pod no longer exists.
func (e *Env) WaitPodGone(t testing.TB, ctx context.Context, ns, name string) {
	t.Helper()
	Poll(t, ctx, 60*time.Second, "pod "+ns+"/"+name+" to be gone", func(ctx context.Context) (bool, string) {
		p, err := e.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, ""
		}
		if err != nil {
			return false, err.Error()
		}
		return false, fmt.Sprintf("phase %s, deletionTimestamp %v", p.Status.Phase, p.DeletionTimestamp)
	})
}
