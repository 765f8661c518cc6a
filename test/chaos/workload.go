package chaos

import (
	"context"
	"fmt"

	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/miglayout/miglayout/test/cluster/clustertest"
	"github.com/miglayout/miglayout/test/kubelet"
)

// ProfileSelector is the CEL selector of a MIG device of one profile.
func ProfileSelector(profile string) string {
	return fmt.Sprintf("device.attributes['%s'].profile == '%s'", clustertest.MIGDeviceClass, profile)
}

// CreateWorkload creates a ResourceClaim for one MIG device matching cel ("" = any) and a
// pod pinned to node that uses it (clustertest.ClaimSpec, clustertest.Pod); both are
// named name. An idle pod runs no process on its device (kubelet.IdleLabel): NVML then
// refuses nothing, and only the agent's allocation and preparation checks keep the
// device.
func (e *Env) CreateWorkload(ctx context.Context, ns, name, node, cel string, idle bool) error {
	claim := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: clustertest.ClaimSpec(cel)}
	if _, err := e.Client.ResourceV1().ResourceClaims(ns).Create(ctx, claim, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating claim %s/%s: %w", ns, name, err)
	}
	pod := clustertest.Pod(ns, name, clustertest.OnNode(node), name, "")
	if idle {
		pod.Labels = map[string]string{kubelet.IdleLabel: "true"}
	}
	if _, err := e.Client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating pod %s/%s: %w", ns, name, err)
	}
	return nil
}

// DeleteWorkload deletes a workload's pod and then its claim (the claim stays until the
// pod is gone and the claim controller has released it).
func (e *Env) DeleteWorkload(ctx context.Context, ns, name string) error {
	err := e.Client.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	err = e.Client.ResourceV1().ResourceClaims(ns).Delete(ctx, name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	return nil
}
