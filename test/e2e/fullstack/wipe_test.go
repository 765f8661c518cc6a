package fullstack

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/miglayout/miglayout/pkg/agent"
	migslices "github.com/miglayout/miglayout/pkg/slices"
	"github.com/miglayout/miglayout/test/cluster"
	"github.com/miglayout/miglayout/test/cluster/clustertest"
	"github.com/miglayout/miglayout/test/kubelet"
)

// TestSlicesWipedWhileAgentDown: the agent stays down longer than the
// kubelet's wipe delay, and the kubelet deletes the node's ResourceSlices
// (it does not let the scheduler send pods to a driver that is gone). The
// pod on the node keeps running on its device, which nothing destroys; a
// pod that asks for a device meanwhile finds none. When the agent comes
// back it publishes the same devices, with the same UUIDs, and the waiting
// pod is served.
func TestSlicesWipedWhileAgentDown(t *testing.T) {
	ctx := clustertest.Context(t, 3*time.Minute)
	ns, claim, dev, before := idlePodOnSevenths(t, ctx, "e2e-wipe-down")

	stopped := time.Now()
	env.Cluster.StopAgent(nodeWipe)
	restarted := false
	t.Cleanup(func() {
		if !restarted {
			_ = env.Cluster.StartAgent(context.Background(), nodeWipe)
		}
	})
	waitNoSlices(t, ctx, nodeWipe)
	if took := time.Since(stopped); took < wipeDelay {
		t.Errorf("the node's ResourceSlices went %s after the agent stopped, before the kubelet's wipe delay %s", took, wipeDelay)
	} else {
		t.Logf("the kubelet deleted the node's ResourceSlices %s after the agent stopped", took.Round(100*time.Millisecond))
	}

	// A pod that asks for a device meanwhile is unschedulable: nothing is published.
	late := env.CreateClaim(t, ctx, ns, "late", `device.attributes['mig.miglayout.io'].profile == '1g.10gb'`)
	env.CreatePod(t, ctx, clustertest.Pod(ns, "late", clustertest.OnNode(nodeWipe), late.Name, ""))
	waitUnschedulable(t, ctx, ns, "late")
	if diff := cmp.Diff(before, clustertest.NVMLDevices(env.Snapshot(t, nodeWipe))); diff != "" {
		t.Errorf("NVML changed while the agent was down (-before +now):\n%s", diff)
	}

	restarted = true
	if err := env.Cluster.StartAgent(ctx, nodeWipe); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(before, env.WaitPoolMatchesNVML(t, ctx, nodeWipe)); diff != "" {
		t.Errorf("the pool published again differs from the one before the outage (-before +after):\n%s", diff)
	}
	env.WaitPodRunning(t, ctx, ns, "late", 60*time.Second)
	checkKept(t, ctx, ns, claim.Name, dev, before[dev])
}

// TestKubeletRestartWipesSlices: the kubelet restarts, and at its start
// deletes the node's ResourceSlices (no driver is usable before its plugin
// registers again). The agent's plugin registers with the new kubelet and
// the pool is published again as it was; the running pod keeps its device
// and its preparation; the new kubelet prepares a new pod's claim, and
// unprepares the old pod's when it ends.
func TestKubeletRestartWipesSlices(t *testing.T) {
	ctx := clustertest.Context(t, 3*time.Minute)
	ns, claim, dev, before := idlePodOnSevenths(t, ctx, "e2e-wipe-restart")

	w := watchSlices(t, ctx, nodeWipe)

	restarted := time.Now()
	if err := env.Cluster.RestartKubelet(ctx, nodeWipe); err != nil {
		t.Fatal(err)
	}
	// What a watcher (the scheduler) sees: the node's slice deleted (the restarted
	// kubelet deletes it beside the plugin's registration, before or after), then
	// published again by the agent once it sees its pool deleted. Without that the
	// ResourceSlice controller would write the pool again only after its sync delay
	// (30 s) or the agent's next resync (10 min on this node).
	var seen []watch.EventType
	var deletedAt time.Time
	for added := false; !added; {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatalf("the watch of the node's ResourceSlices ended; events so far %v", seen)
			}
			seen = append(seen, ev.Type)
			if s, isSlice := ev.Object.(*resourceapi.ResourceSlice); isSlice && s.Spec.Driver == cluster.Driver {
				if ev.Type == watch.Deleted && deletedAt.IsZero() {
					deletedAt = time.Now()
				}
				added = !deletedAt.IsZero() && ev.Type == watch.Added
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("no deletion of the node's slice and publication after it seen; events %v", seen)
		}
	}
	t.Logf("slice deleted %s after the kubelet restart began, published again %s after that",
		deletedAt.Sub(restarted).Round(10*time.Millisecond), time.Since(deletedAt).Round(10*time.Millisecond))
	poolDeletedEvent(t, ctx, restarted)
	clustertest.Poll(t, ctx, 10*time.Second, "the restarted kubelet's count of deletions", func(context.Context) (bool, string) {
		n := env.Cluster.Kubelet(nodeWipe).SliceWipes()
		return n == 1, fmt.Sprintf("%d deletions of the node's ResourceSlices, want once at its start", n)
	})
	if diff := cmp.Diff(before, env.WaitPoolMatchesNVML(t, ctx, nodeWipe)); diff != "" {
		t.Errorf("the pool published again differs from the one before the restart (-before +after):\n%s", diff)
	}
	checkKept(t, ctx, ns, claim.Name, dev, before[dev])
	var pods []kubelet.PodInfo
	for _, p := range env.Cluster.Kubelet(nodeWipe).Pods() {
		if p.Namespace == ns {
			pods = append(pods, p)
		}
	}
	if len(pods) != 1 || pods[0].Name != "infer" || !pods[0].Running || fmt.Sprint(pods[0].DeviceUUIDs) != fmt.Sprint([]string{before[dev]}) {
		t.Errorf("the restarted kubelet runs %+v in %s, want pod infer running on %s as before", pods, ns, before[dev])
	}

	late := env.CreateClaim(t, ctx, ns, "late", `device.attributes['mig.miglayout.io'].profile == '1g.10gb'`)
	env.CreatePod(t, ctx, clustertest.Pod(ns, "late", clustertest.OnNode(nodeWipe), late.Name, ""))
	env.WaitPodRunning(t, ctx, ns, "late", 60*time.Second)

	// The new kubelet ends the pod it took over: it unprepares the claim, which is
	// then released.
	if err := env.Client.CoreV1().Pods(ns).Delete(ctx, "infer", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	env.WaitPodGone(t, ctx, ns, "infer")
	clustertest.Poll(t, ctx, 30*time.Second, "claim infer released", func(ctx context.Context) (bool, string) {
		c := env.GetClaim(t, ctx, ns, claim.Name)
		return len(c.Status.ReservedFor) == 0, fmt.Sprintf("reserved for %v", c.Status.ReservedFor)
	})
}

// TestKubeletRestartWhileDraining: the kubelet restarts while the agent
// drains (its settle period, 3 s on this node, has begun). The pool is published
// again at once as it was last published, the drain taints included, while
// NVML still holds the devices being drained: the pass under way does not
// hold it back. Then the change goes on, and the pool ends as the new
// layout.
func TestKubeletRestartWhileDraining(t *testing.T) {
	ctx := clustertest.Context(t, 3*time.Minute)
	const name = "e2e-wipe-drain"
	sevenths(t, ctx, name)
	before := env.WaitPoolMatchesNVML(t, ctx, nodeWipe)
	w := watchSlices(t, ctx, nodeWipe)
	next := func(what string, match func(watch.EventType, *resourceapi.ResourceSlice) bool) *resourceapi.ResourceSlice {
		t.Helper()
		for {
			select {
			case ev, ok := <-w.ResultChan():
				if !ok {
					t.Fatalf("the watch of the node's ResourceSlices ended before %s", what)
				}
				if s, isSlice := ev.Object.(*resourceapi.ResourceSlice); isSlice && s.Spec.Driver == cluster.Driver && match(ev.Type, s) {
					return s
				}
			case <-time.After(30 * time.Second):
				t.Fatalf("no %s seen within 30s", what)
			}
		}
	}
	// drained reports whether s publishes the devices of before, each with the drain taint.
	drained := func(s *resourceapi.ResourceSlice) bool {
		n := 0
		for _, d := range s.Spec.Devices {
			if _, ok := before[d.Name]; ok && slices.ContainsFunc(d.Taints, func(t resourceapi.DeviceTaint) bool { return t.Key == migslices.DrainTaintKey }) {
				n++
			}
		}
		return n == len(before) && len(s.Spec.Devices) == len(before)
	}

	ml := env.SetStaticMigLayout(t, ctx, name, wipeSelector, clustertest.Rule("whole", a100, map[string]int32{"7g.80gb": 1}))
	next("the seven devices published with the drain taint", func(typ watch.EventType, s *resourceapi.ResourceSlice) bool {
		return typ == watch.Modified && drained(s)
	})
	restarted := time.Now()
	if err := env.Cluster.RestartKubelet(ctx, nodeWipe); err != nil {
		t.Fatal(err)
	}
	next("the node's slice deleted", func(typ watch.EventType, _ *resourceapi.ResourceSlice) bool { return typ == watch.Deleted })
	deletedAt := time.Now()
	back := next("the pool published again", func(typ watch.EventType, _ *resourceapi.ResourceSlice) bool { return typ == watch.Added })
	nvml := clustertest.NVMLDevices(env.Snapshot(t, nodeWipe))
	t.Logf("slice deleted %s after the kubelet restart began, published again %s after that",
		deletedAt.Sub(restarted).Round(10*time.Millisecond), time.Since(deletedAt).Round(10*time.Millisecond))
	if !drained(back) {
		t.Errorf("the pool published again is %+v, want the seven devices being drained, each with the drain taint", back.Spec.Devices)
	}
	if diff := cmp.Diff(before, nvml); diff != "" {
		t.Errorf("NVML changed before the pool was published again (-before +then): the publication waited for the pass:\n%s", diff)
	}
	poolDeletedEvent(t, ctx, restarted)

	env.WaitReady(t, ctx, ml, 1)
	after := env.WaitPoolMatchesNVML(t, ctx, nodeWipe)
	if len(after) != 1 {
		t.Errorf("pool %v after the change, want one 7g.80gb device", after)
	}
}

// watchSlices watches node's ResourceSlices from now on, until the test ends.
func watchSlices(t *testing.T, ctx context.Context, node string) watch.Interface {
	t.Helper()
	list, err := env.Client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
	if err != nil {
		t.Fatal(err)
	}
	w, err := env.Client.ResourceV1().ResourceSlices().Watch(ctx, metav1.ListOptions{
		FieldSelector: "spec.nodeName=" + node, ResourceVersion: list.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	return w
}

// poolDeletedEvent waits for a Normal PoolDeleted event on nodeWipe's
// NodeMigLayout, recorded since since: the agent tells that it published
// the pool again.
func poolDeletedEvent(t *testing.T, ctx context.Context, since time.Time) {
	t.Helper()
	clustertest.Poll(t, ctx, 30*time.Second, "a "+agent.EventPoolDeleted+" event", func(ctx context.Context) (bool, string) {
		list, err := env.Client.EventsV1().Events("").List(ctx, metav1.ListOptions{FieldSelector: "reason=" + agent.EventPoolDeleted})
		if err != nil {
			return false, err.Error()
		}
		for _, e := range list.Items {
			at := e.EventTime.Time
			if e.Series != nil {
				at = e.Series.LastObservedTime.Time
			}
			if e.Regarding.Kind == "NodeMigLayout" && e.Regarding.Name == nodeWipe && e.Type == corev1.EventTypeNormal &&
				!at.Before(since.Truncate(time.Microsecond)) && strings.Contains(e.Note, "published the pool again, served") {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d such events, none on NodeMigLayout %s since %s", len(list.Items), nodeWipe, since.Format(time.StampMicro))
	})
}

// idlePodOnSevenths applies the MigLayout name (seven 1g.10gb on nodeWipe's
// A100, deleted at the test's end) and runs an idle pod "infer" (no process:
// only its allocation and preparation keep the device) whose claim asks for
// a 1g.10gb. It returns the pod's namespace, its claim, the claim's device
// and the node's pool as published then (device name → UUID).
func idlePodOnSevenths(t *testing.T, ctx context.Context, name string) (string, *resourceapi.ResourceClaim, string, map[string]string) {
	t.Helper()
	ns := sevenths(t, ctx, name)
	claim := env.CreateClaim(t, ctx, ns, "infer", `device.attributes['mig.miglayout.io'].profile == '1g.10gb'`)
	pod := clustertest.Pod(ns, "infer", clustertest.OnNode(nodeWipe), claim.Name, "")
	pod.Labels = map[string]string{kubelet.IdleLabel: "true"}
	env.CreatePod(t, ctx, pod)
	env.WaitPodRunning(t, ctx, ns, "infer", 60*time.Second)
	pool, dev, ok := clustertest.Allocated(env.GetClaim(t, ctx, ns, claim.Name))
	if !ok || pool != nodeWipe {
		t.Fatalf("claim allocated from pool %q device %q, want a device of %s", pool, dev, nodeWipe)
	}
	before := env.WaitPoolMatchesNVML(t, ctx, nodeWipe)
	if len(before) != 7 {
		t.Fatalf("pool %v, want seven 1g.10gb devices", before)
	}
	return ns, claim, dev, before
}

// sevenths applies the MigLayout name (seven 1g.10gb on nodeWipe's A100,
// deleted at the test's end), waits until the pool shows them, and returns
// a new namespace for the test's pods.
func sevenths(t *testing.T, ctx context.Context, name string) string {
	t.Helper()
	t.Cleanup(func() { env.DeleteMigLayout(t, name) })
	ml := env.SetStaticMigLayout(t, ctx, name, wipeSelector, clustertest.Rule("sevenths", a100, map[string]int32{"1g.10gb": 7}))
	env.WaitReady(t, ctx, ml, 1)
	env.WaitPoolMatchesNVML(t, ctx, nodeWipe)
	return env.NewNamespace(t, ctx, name)
}

// wipeSelector selects nodeWipe.
var wipeSelector = map[string]string{groupLabel: "wipe"}

// waitNoSlices waits until the node has no ResourceSlice of miglayout's driver.
func waitNoSlices(t *testing.T, ctx context.Context, node string) {
	t.Helper()
	clustertest.Poll(t, ctx, 30*time.Second, "the ResourceSlices of "+node+" deleted", func(ctx context.Context) (bool, string) {
		list, err := env.Client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{
			FieldSelector: "spec.nodeName=" + node + ",spec.driver=" + cluster.Driver})
		if err != nil {
			return false, err.Error()
		}
		return len(list.Items) == 0, fmt.Sprintf("%d slices", len(list.Items))
	})
}

// waitUnschedulable waits until the scheduler has found no node for the pod.
func waitUnschedulable(t *testing.T, ctx context.Context, ns, name string) {
	t.Helper()
	clustertest.Poll(t, ctx, 30*time.Second, "pod "+name+" unschedulable", func(ctx context.Context) (bool, string) {
		p, err := env.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		if p.Spec.NodeName != "" {
			t.Fatalf("pod %s bound to %s while its node publishes no device", name, p.Spec.NodeName)
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
				return true, ""
			}
		}
		return false, fmt.Sprintf("conditions %+v", p.Status.Conditions)
	})
}

// checkKept checks that claim (in ns) is still allocated device dev, that
// NVML still has that device with its UUID, and that the pool publishes it
// with that UUID.
func checkKept(t *testing.T, ctx context.Context, ns, claim, dev, uuid string) {
	t.Helper()
	c := env.GetClaim(t, ctx, ns, claim)
	if pool, got, ok := clustertest.Allocated(c); !ok || pool != nodeWipe || got != dev {
		t.Errorf("claim %s allocated %q/%q, want %s/%s as before", claim, pool, got, nodeWipe, dev)
	}
	if got := clustertest.NVMLDevices(env.Snapshot(t, nodeWipe))[dev]; got != uuid {
		t.Errorf("device %s is %q in NVML, was %s: destroyed under its claim", dev, got, uuid)
	}
	pool, err := env.PoolDevices(ctx, nodeWipe)
	if err != nil {
		t.Fatal(err)
	}
	if got := pool[dev].UUID; got != uuid {
		t.Errorf("device %s published with uuid %q, was %s", dev, got, uuid)
	}
}
