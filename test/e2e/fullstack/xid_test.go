package fullstack

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/miglayout/miglayout/api/v1alpha1"
	"github.com/miglayout/miglayout/pkg/agent"
	"github.com/miglayout/miglayout/test/cluster/clustertest"
)

// TestXidMakesDeviceUnhealthy: an Xid critical error attributable to the
// GPU instance of a running pod's device shows that device Unhealthy in the
// pod's container status, naming the Xid, and the device published with
// the Xid taint, while an Xid the agent ignores by default (13, an
// application's error) on the other half of the GPU leaves the device
// there untainted. A restarted agent keeps the Xid; a request on the Node
// clears it.
func TestXidMakesDeviceUnhealthy(t *testing.T) {
	ctx := clustertest.Context(t, 3*time.Minute)
	lostNodeHalves(t, ctx, "e2e-xid")

	// Two pods on GPU 1's two halves.
	ns := env.NewNamespace(t, ctx, "e2e-xid")
	starts := map[string]int{}
	for _, pod := range []string{"hit", "spared"} {
		claim := env.CreateClaim(t, ctx, ns, pod, `device.attributes['mig.miglayout.io'].profile == '3g.40gb' && device.attributes['mig.miglayout.io'].parentIndex == 1`)
		env.CreatePod(t, ctx, clustertest.Pod(ns, pod, clustertest.OnNode(nodeLost), claim.Name, ""))
		env.WaitPodRunning(t, ctx, ns, pod, 60*time.Second)
		waitDeviceHealth(t, ctx, ns, pod, corev1.ResourceHealthStatusHealthy, "")
		c := env.GetClaim(t, ctx, ns, claim.Name)
		if c.Status.Allocation == nil || len(c.Status.Allocation.Devices.Results) != 1 {
			t.Fatalf("claim %s allocation %+v, want one device", claim.Name, c.Status.Allocation)
		}
		dev := c.Status.Allocation.Devices.Results[0].Device
		switch {
		case strings.HasSuffix(dev, "-0"):
			starts[pod] = 0
		case strings.HasSuffix(dev, "-4"):
			starts[pod] = 4
		default:
			t.Fatalf("pod %s's device %s is not a half of GPU 1", pod, dev)
		}
	}
	sim, err := env.Cluster.Sim(nodeLost)
	if err != nil {
		t.Fatal(err)
	}
	giAt := map[int]int{}
	for _, gi := range sim.Snapshot().GPUs[1].GPUInstances {
		giAt[gi.Placement.Start] = gi.ID
	}
	// The agent's watch delivers only the Xids of a GPU registered before
	// them; GPU 1 may have been off the bus in the test before, and is
	// registered again within 10 s of its recovery: inject again until the
	// pod shows the Xid.
	var injected time.Time
	clustertest.Poll(t, ctx, 60*time.Second, "pod hit's device Unhealthy with the Xid", func(ctx context.Context) (bool, string) {
		if err := sim.InjectXid(1, 13, giAt[starts["spared"]], -1); err != nil {
			return false, err.Error()
		}
		injected = time.Now()
		if err := sim.InjectXid(1, 94, giAt[starts["hit"]], -1); err != nil {
			return false, err.Error()
		}
		ok, last := false, ""
		for range 10 {
			if ok, last = podDeviceHealth(ctx, ns, "hit", corev1.ResourceHealthStatusUnhealthy, "Xid 94 on GPU"); ok {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		return ok, last
	})
	t.Logf("Xid 94 shown in the pod's status %v after it was last injected (health reports every 10s)", time.Since(injected).Round(time.Millisecond))
	// The pool publishes the device the Xid hit with the Xid taint, so that
	// no new claim gets it, and the other half, which only the ignored Xid
	// 13 (handled before the 94) named, without.
	devices := map[string]string{}
	for _, pod := range []string{"hit", "spared"} {
		devices[pod] = env.GetClaim(t, ctx, ns, pod).Status.Allocation.Devices.Results[0].Device
	}
	waitXidTaints(t, ctx, map[string]string{devices["hit"]: "94"})
	waitStatusXids(t, ctx, []v1alpha1.GPUXid{{Xid: 94, Device: devices["hit"]}})
	// And says so on the node's NodeMigLayout.
	clustertest.Poll(t, ctx, 30*time.Second, "an "+agent.EventXidError+" event naming "+devices["hit"], func(ctx context.Context) (bool, string) {
		list, err := env.Client.EventsV1().Events("").List(ctx, metav1.ListOptions{FieldSelector: "reason=" + agent.EventXidError})
		if err != nil {
			return false, err.Error()
		}
		for _, e := range list.Items {
			if e.Regarding.Kind == "NodeMigLayout" && e.Regarding.Name == nodeLost && e.Type == corev1.EventTypeWarning &&
				strings.Contains(e.Note, "Xid 94 on GPU 1") && strings.Contains(e.Note, devices["hit"]) && !strings.Contains(e.Note, devices["spared"]) {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d such events", len(list.Items))
	})

	// The marks outlive a restart of the agent in the node's boot: the
	// restarted agent publishes the taint again and reports the device
	// Unhealthy.
	env.Cluster.StopAgent(nodeLost)
	if err := env.Cluster.StartAgent(ctx, nodeLost); err != nil {
		t.Fatal(err)
	}
	waitXidTaints(t, ctx, map[string]string{devices["hit"]: "94"})
	waitDeviceHealth(t, ctx, ns, "hit", corev1.ResourceHealthStatusUnhealthy, "Xid 94 on GPU")

	// A request on the Node (kubectl miglayout clear-xids) clears them: an
	// XidsCleared event names the device, which is published untainted
	// and reported Healthy again.
	node, err := env.Client.CoreV1().Nodes().Get(ctx, nodeLost, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	request := `{"id":"e2e-` + string(node.UID) + `-` + node.ResourceVersion + `","gpus":[1]}`
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, v1alpha1.AnnotationClearXids, request)
	if _, err := env.Client.CoreV1().Nodes().Patch(ctx, nodeLost, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	waitXidTaints(t, ctx, map[string]string{})
	waitStatusXids(t, ctx, nil)
	waitDeviceHealth(t, ctx, ns, "hit", corev1.ResourceHealthStatusHealthy, "")
	clustertest.Poll(t, ctx, 30*time.Second, "an "+agent.EventXidsCleared+" event on Node "+nodeLost, func(ctx context.Context) (bool, string) {
		list, err := env.Client.EventsV1().Events("").List(ctx, metav1.ListOptions{FieldSelector: "reason=" + agent.EventXidsCleared})
		if err != nil {
			return false, err.Error()
		}
		for _, e := range list.Items {
			if e.Regarding.Kind == "Node" && e.Regarding.Name == nodeLost && strings.Contains(e.Note, "Xid 94") && strings.Contains(e.Note, "GPUs [1]") {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d such events", len(list.Items))
	})
}

// waitStatusXids waits until the status row of nodeLost's GPU 1 lists the
// Xids want.
func waitStatusXids(t *testing.T, ctx context.Context, want []v1alpha1.GPUXid) {
	t.Helper()
	clustertest.Poll(t, ctx, 30*time.Second, fmt.Sprintf("GPU 1's status Xids %v", want), func(ctx context.Context) (bool, string) {
		var nml v1alpha1.NodeMigLayout
		if err := env.CRC.Get(ctx, crclient.ObjectKey{Name: nodeLost}, &nml); err != nil {
			return false, err.Error()
		}
		for _, g := range nml.Status.GPUs {
			if g.Index == 1 {
				return cmp.Equal(want, g.Xids, cmpopts.EquateEmpty()), fmt.Sprintf("%v", g.Xids)
			}
		}
		return false, "no GPU 1 in the status"
	})
}

// waitXidTaints waits until the Xid taints of nodeLost's pool are want
// (device name to Xid).
func waitXidTaints(t *testing.T, ctx context.Context, want map[string]string) {
	t.Helper()
	clustertest.Poll(t, ctx, 30*time.Second, fmt.Sprintf("Xid taints %v", want), func(ctx context.Context) (bool, string) {
		pool, err := env.PoolDevices(ctx, nodeLost)
		if err != nil {
			return false, err.Error()
		}
		got := map[string]string{}
		for name, d := range pool {
			if d.Xid != "" {
				got[name] = d.Xid
			}
		}
		return maps.Equal(got, want), fmt.Sprintf("%v", got)
	})
}
