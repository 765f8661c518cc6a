package harness

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
)

// CreateNode creates a Node without a kubelet behind it: capacity and allocatable cpu 8,
// memory 32Gi, pods 110, the usual kubernetes.io/{hostname,os,arch} labels (overridable by
// labels) and a Ready condition. The status is written with UpdateStatus. The control plane
// runs without node-lifecycle-controller and TaintNodesByCondition, so the node stays Ready
// and untainted for as long as it exists.
func CreateNode(ctx context.Context, client kubernetes.Interface, name string, labels map[string]string) (*corev1.Node, error) {
	l := map[string]string{
		corev1.LabelHostname:   name,
		corev1.LabelOSStable:   "linux",
		corev1.LabelArchStable: "amd64",
	}
	for k, v := range labels {
		l[k] = v
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: l}}
	created, err := client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("creating node %s: %w", name, err)
	}
	res := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("8"),
		corev1.ResourceMemory: resource.MustParse("32Gi"),
		corev1.ResourcePods:   resource.MustParse("110"),
	}
	now := metav1.Now()
	status := corev1.NodeStatus{
		Capacity:    res,
		Allocatable: res.DeepCopy(),
		Phase:       corev1.NodeRunning,
		Conditions: []corev1.NodeCondition{{
			Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
			Message: "fake node (miglayout test harness)", LastHeartbeatTime: now, LastTransitionTime: now,
		}},
		Addresses: []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: name}},
		NodeInfo: corev1.NodeSystemInfo{
			KubeletVersion: "v" + KubernetesVersion, OperatingSystem: "linux", Architecture: "amd64",
		},
	}
	// Controllers (ttl, ...) annotate a new Node right away: retry on a stale resourceVersion.
	var updated *corev1.Node
	n := created
	err = retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		if n == nil {
			var err error
			if n, err = client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{}); err != nil {
				return err
			}
		}
		n.Status = status
		u, err := client.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{})
		if err != nil {
			n = nil // re-read before the next try
			return err
		}
		updated = u
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("writing status of node %s: %w", name, err)
	}
	return updated, nil
}

// CreateNamespace creates a namespace and waits until its "default" ServiceAccount exists
// (before that, pods in it are refused).
func CreateNamespace(ctx context.Context, client kubernetes.Interface, name string) (*corev1.Namespace, error) {
	ns, err := client.CoreV1().Namespaces().Create(ctx,
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("creating namespace %s: %w", name, err)
	}
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := client.CoreV1().ServiceAccounts(name).Get(ctx, "default", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil, err
	})
	if err != nil {
		return nil, fmt.Errorf("waiting for ServiceAccount %s/default: %w", name, err)
	}
	return ns, nil
}

// ForceDeletePod deletes a pod at once (grace period 0). Without a kubelet, a graceful
// delete of a pod bound to a node never finishes. A missing pod is not an error.
func ForceDeletePod(ctx context.Context, client kubernetes.Interface, namespace, name string) error {
	zero := int64(0)
	err := client.CoreV1().Pods(namespace).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}
