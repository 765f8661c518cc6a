package auto

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/miglayout/miglayout/api/v1alpha1"
	"github.com/miglayout/miglayout/pkg/planner"
	"github.com/miglayout/miglayout/test/cluster/clustertest"
)

// TestAutoWaitsForNodeResources: node A (8 CPUs allocatable) runs a pod of 7 CPUs
// and no claim. A pending pod asking for a 1g.10gb and 2 CPUs on node A could never be
// bound there now: the planner makes no device for it and tells it it waits for the
// node's resources. Once the 7-CPU pod is deleted, the planner (woken by that pod,
// though it has no claim) makes the 1g.10gb and kube-scheduler binds the pod.
func TestAutoWaitsForNodeResources(t *testing.T) {
	ctx := clustertest.Context(t, 2*time.Minute)
	ml := wholeThenAuto(t, ctx)
	ns := env.NewNamespace(t, ctx, "room")
	onA := map[string]string{corev1.LabelHostname: nodeA}
	cpu := func(n string) corev1.ResourceList {
		return corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(n)}
	}

	busy := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "busy"}, Spec: corev1.PodSpec{
		NodeSelector: onA, TerminationGracePeriodSeconds: ptr.To(int64(0)),
		Containers: []corev1.Container{{Name: "work", Image: "busybox", Resources: corev1.ResourceRequirements{Requests: cpu("7")}}},
	}}
	env.CreatePod(t, ctx, busy)
	clustertest.Poll(t, ctx, 30*time.Second, "pod busy bound to "+nodeA, func(ctx context.Context) (bool, string) {
		p, err := env.Client.CoreV1().Pods(ns).Get(ctx, "busy", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return p.Spec.NodeName == nodeA, "node " + p.Spec.NodeName
	})
	before := env.GetNodeMigLayout(t, ctx, nodeA).Spec.GPUs

	env.CreateClaim(t, ctx, ns, "small-gpu", `device.attributes['mig.miglayout.io'].profile == '1g.10gb'`)
	small := clustertest.Pod(ns, "small", onA, "small-gpu", "")
	small.Spec.Containers[0].Resources.Requests = cpu("2")
	env.CreatePod(t, ctx, small)
	waitPodEventNote(t, ctx, ns, "small", planner.WaitsForNodeResources)
	env.WaitMigLayout(t, ctx, layoutName, ml.Generation, 30*time.Second, "status.auto counting the pod that waits for room", func(ml *v1alpha1.MigLayout) bool {
		a := ml.Status.Auto
		return a != nil && a.PendingPods == 1 && a.WaitingForRoomPods == 1 && a.NotServablePods == 0
	})
	if after := env.GetNodeMigLayout(t, ctx, nodeA).Spec.GPUs; fmt.Sprint(after) != fmt.Sprint(before) {
		t.Errorf("%s's desired layouts changed for a pod that cannot run there: %v -> %v", nodeA, before, after)
	}

	deleted := time.Now()
	if err := env.Client.CoreV1().Pods(ns).Delete(ctx, "busy", metav1.DeleteOptions{GracePeriodSeconds: ptr.To(int64(0))}); err != nil {
		t.Fatal(err)
	}
	env.WaitPodRunning(t, ctx, ns, "small", 60*time.Second)
	pool, device, ok := clustertest.Allocated(env.GetClaim(t, ctx, ns, "small-gpu"))
	if !ok || pool != nodeA || !strings.Contains(device, "-mig-1g10gb-") {
		t.Errorf("claim small-gpu allocated %s/%s, want a 1g.10gb of %s", pool, device, nodeA)
	}
	t.Logf("pod small runs on %s/%s %.1fs after the 7-CPU pod was deleted", pool, device, time.Since(deleted).Seconds())
}

// waitPodEventNote waits for an event on the pod whose note contains note.
func waitPodEventNote(t *testing.T, ctx context.Context, ns, pod, note string) {
	t.Helper()
	clustertest.Poll(t, ctx, 30*time.Second, fmt.Sprintf("event on pod %s/%s saying %q", ns, pod, note), func(ctx context.Context) (bool, string) {
		list, err := env.Client.EventsV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "regarding.name=" + pod})
		if err != nil {
			return false, err.Error()
		}
		var seen []string
		for _, e := range list.Items {
			if e.Regarding.Kind == "Pod" && strings.Contains(e.Note, note) {
				t.Logf("pod %s: %s: %s", pod, e.Reason, e.Note)
				return true, ""
			}
			seen = append(seen, e.Reason+": "+e.Note)
		}
		return false, "events: " + strings.Join(seen, " | ")
	})
}
