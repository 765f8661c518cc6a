package fullstack

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/miglayout/miglayout/pkg/slices"
	"github.com/miglayout/miglayout/test/cluster"
	"github.com/miglayout/miglayout/test/cluster/clustertest"
)

// bindingCondition returns whether the claim's status shows the binding condition typ
// True for its device dev.
func bindingCondition(c *resourceapi.ResourceClaim, dev, typ string) bool {
	for _, d := range c.Status.Devices {
		if d.Driver == cluster.Driver && d.Device == dev {
			return apimeta.IsStatusConditionTrue(d.Conditions, typ)
		}
	}
	return false
}

// TestBindingConditionsRefuseDrainingDevice plays a scheduler that decided on an
// inventory older than the drain taint: during a drain it allocates a draining device
// to a claim (writing the allocation as kube-scheduler does, binding conditions
// copied from the device). Without binding conditions the agent must keep such a
// device and the GPU stays Blocked; with them the agent refuses the binding
// (DeviceRemoved), repartitions, and a real pod scheduled afterwards is bound only
// once the agent has confirmed its device (DeviceReady).
func TestBindingConditionsRefuseDrainingDevice(t *testing.T) {
	ctx := clustertest.Context(t, 4*time.Minute)
	const name = "e2e-bind"
	selector := map[string]string{groupLabel: "bind"}
	t.Cleanup(func() { env.DeleteMigLayout(t, name) })
	ml := env.SetStaticMigLayout(t, ctx, name, selector, clustertest.Rule("halves", a100, map[string]int32{"3g.40gb": 2}))
	env.WaitReady(t, ctx, ml, 1)
	env.WaitPoolMatchesNVML(t, ctx, nodeBind)
	devs, err := env.PoolDevices(ctx, nodeBind)
	if err != nil {
		t.Fatal(err)
	}
	for n, d := range devs {
		if fmt.Sprint(d.Device.BindingConditions) != "["+slices.BindingConditionReady+"]" ||
			fmt.Sprint(d.Device.BindingFailureConditions) != "["+slices.BindingConditionRemoved+"]" {
			t.Fatalf("device %s is published with binding conditions %v / %v", n, d.Device.BindingConditions, d.Device.BindingFailureConditions)
		}
	}
	ns := env.NewNamespace(t, ctx, "bind")
	stale := env.CreateClaim(t, ctx, ns, "stale", "")

	// Repartition to 7x 1g.10gb: both 3g.40gb devices are drained for 3 s.
	ml = env.SetStaticMigLayout(t, ctx, name, selector, clustertest.Rule("sevenths", a100, map[string]int32{"1g.10gb": 7}))
	var victim resourceapi.Device
	clustertest.Poll(t, ctx, 30*time.Second, "the drain taint on "+nodeBind, func(ctx context.Context) (bool, string) {
		devs, err := env.PoolDevices(ctx, nodeBind)
		if err != nil {
			return false, err.Error()
		}
		for _, d := range devs {
			if d.Tainted {
				victim = d.Device
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d devices, none tainted", len(devs))
	})

	// The late decision lands on the draining device.
	now := metav1.Now()
	stale.Status.Allocation = &resourceapi.AllocationResult{
		AllocationTimestamp: &now,
		NodeSelector: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchFields: []corev1.NodeSelectorRequirement{
			{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{nodeBind}}}}}},
		Devices: resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{{
			Request: "gpu", Driver: cluster.Driver, Pool: nodeBind, Device: victim.Name,
			BindingConditions: victim.BindingConditions, BindingFailureConditions: victim.BindingFailureConditions,
		}}},
	}
	if _, err := env.Client.ResourceV1().ResourceClaims(ns).UpdateStatus(ctx, stale, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("allocating %s to claim %s: %v", victim.Name, stale.Name, err)
	}
	clustertest.Poll(t, ctx, 30*time.Second, "the agent refusing "+victim.Name, func(ctx context.Context) (bool, string) {
		c := env.GetClaim(t, ctx, ns, stale.Name)
		if bindingCondition(c, victim.Name, slices.BindingConditionReady) {
			t.Fatalf("the agent confirmed %s, a device it is draining", victim.Name)
		}
		return bindingCondition(c, victim.Name, slices.BindingConditionRemoved), fmt.Sprintf("status.devices %+v", c.Status.Devices)
	})

	// The repartition goes on: the GPU is not Blocked by an allocation no pod can bind.
	env.WaitReady(t, ctx, ml, 1)
	st := env.Snapshot(t, nodeBind)
	if got := profileCounts(gpuOf(st, 0)); got != "1g.10gb:7" {
		t.Errorf("GPU 0 holds %s, want 1g.10gb:7", got)
	}

	// A pod scheduled now waits in the scheduler's PreBind until the agent confirms.
	start := time.Now()
	c := env.CreateClaim(t, ctx, ns, "fresh", "")
	env.CreatePod(t, ctx, clustertest.Pod(ns, "fresh", clustertest.OnNode(nodeBind), c.Name, ""))
	env.WaitPodRunning(t, ctx, ns, "fresh", 60*time.Second)
	t.Logf("pod bound and running %s after its claim was created (the scheduler polls binding conditions every 5 s)", time.Since(start).Round(100*time.Millisecond))
	c = env.GetClaim(t, ctx, ns, "fresh")
	_, dev, ok := clustertest.Allocated(c)
	switch {
	case !ok:
		t.Fatalf("claim %s not allocated", c.Name)
	case !strings.Contains(dev, "-mig-1g10gb-"):
		t.Errorf("claim %s got %s, not one of the new 1g.10gb devices", c.Name, dev)
	case !bindingCondition(c, dev, slices.BindingConditionReady):
		t.Errorf("claim %s is bound but its device %s is not confirmed: %+v", c.Name, dev, c.Status.Devices)
	}
	env.WaitPoolMatchesNVML(t, ctx, nodeBind)
}
