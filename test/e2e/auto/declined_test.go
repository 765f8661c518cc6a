package auto

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/miglayout/miglayout/pkg/controller"
	"github.com/miglayout/miglayout/test/cluster/clustertest"
)

// TestAutoPlansElsewhereWhenSchedulerDeclines: pod guard runs on node A with a
// 1g.10gb. Pod apart asks for a 1g.10gb too, with a required anti-affinity to guard
// per node, which the planner does not judge: it makes apart's 1g.10gb beside guard's
// on node A (no device destroyed), where kube-scheduler will not bind apart. Once that
// device has waited free for the controller's --auto-unbound-after, the planner leaves
// node A out of apart's plans, tells the pod so, and makes its 1g.10gb on node B,
// where it runs. Before, apart waited on node A for good. kube-scheduler runs with
// leader election here: the controller declines only once it has seen the scheduler
// renew its Lease (kube-system/kube-scheduler) for --auto-unbound-after; it reads it
// every few seconds from the first plan on.
func TestAutoPlansElsewhereWhenSchedulerDeclines(t *testing.T) {
	ctx := clustertest.Context(t, 3*time.Minute)
	wholeThenAuto(t, ctx)
	ns := env.NewNamespace(t, ctx, "declined")
	small := `device.attributes['mig.miglayout.io'].profile == '1g.10gb'`

	startGuard(t, ctx, ns)

	env.CreateClaim(t, ctx, ns, "apart-gpu", small)
	apart := clustertest.Pod(ns, "apart", nil, "apart-gpu", "")
	apart.Spec.Affinity = apartFromGuard()
	created := time.Now()
	env.CreatePod(t, ctx, apart)
	env.WaitPodRunning(t, ctx, ns, "apart", 2*time.Minute)
	pool, device, ok := clustertest.Allocated(env.GetClaim(t, ctx, ns, "apart-gpu"))
	if !ok || pool != nodeB || !strings.Contains(device, "-mig-1g10gb-") {
		t.Errorf("claim apart-gpu allocated %s/%s, want a 1g.10gb of %s", pool, device, nodeB)
	}
	t.Logf("pod apart runs on %s/%s %.1fs after it was created (--auto-unbound-after=%s)", pool, device, time.Since(created).Seconds(), unboundAfter)

	// The planner first served apart on node A, which kube-scheduler declined.
	list, err := env.Client.EventsV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "regarding.name=apart"})
	if err != nil {
		t.Fatal(err)
	}
	var seen []string
	declined := false
	for _, e := range list.Items {
		seen = append(seen, e.Reason+": "+e.Note)
		declined = declined || e.Reason == controller.EventSchedulerDeclinedNode && strings.HasPrefix(e.Note, "node "+nodeA+" is left out")
	}
	if !declined {
		t.Errorf("no %s event naming %s on pod apart; events:\n%s", controller.EventSchedulerDeclinedNode, nodeA, strings.Join(seen, "\n"))
	}

	// What a controller that starts, and kubectl miglayout plan, read
	// back: the events listed by reason, as they list them.
	byReason, err := env.Client.EventsV1().Events("").List(ctx, metav1.ListOptions{FieldSelector: "reason=" + controller.EventSchedulerDeclinedNode})
	if err != nil {
		t.Fatal(err)
	}
	pod, err := env.Client.CoreV1().Pods(ns).Get(ctx, "apart", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if back := controller.DeclinedNodes(byReason.Items, time.Now(), controller.DefaultDeclinedFor); !slices.Contains(back[pod.UID], nodeA) {
		t.Errorf("read back from %d %s events: %v, want %s left out for pod apart (%s)", len(byReason.Items), controller.EventSchedulerDeclinedNode, back, nodeA, pod.UID)
	}
}

// startGuard runs pod guard (label app=guard) on node A, with a 1g.10gb.
func startGuard(t *testing.T, ctx context.Context, ns string) {
	t.Helper()
	env.CreateClaim(t, ctx, ns, "guard-gpu", `device.attributes['mig.miglayout.io'].profile == '1g.10gb'`)
	guard := clustertest.Pod(ns, "guard", map[string]string{corev1.LabelHostname: nodeA}, "guard-gpu", "")
	guard.Labels = map[string]string{"app": "guard"}
	env.CreatePod(t, ctx, guard)
	env.WaitPodRunning(t, ctx, ns, "guard", 60*time.Second)
}

// apartFromGuard keeps a pod off pod guard's node (required anti-affinity),
// which Auto mode does not judge and kube-scheduler does.
func apartFromGuard() *corev1.Affinity {
	return &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "guard"}},
			TopologyKey:   corev1.LabelHostname,
		}},
	}}
}
