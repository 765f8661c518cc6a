package auto

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/miglayout/miglayout/pkg/mig"
	migslices "github.com/miglayout/miglayout/pkg/slices"
	"github.com/miglayout/miglayout/test/cluster/clustertest"
)

// TestAutoLeavesNodesADeviceTaintRuleTaints: an administrator takes node A's GPUs out
// of scheduling with a DeviceTaintRule (its whole pool, NoSchedule). A pending pod that
// either node could serve is planned on node B: a change on node A would make devices
// the scheduler may not allocate, and the pod would wait on them for ever.
func TestAutoLeavesNodesADeviceTaintRuleTaints(t *testing.T) {
	ctx := clustertest.Context(t, 2*time.Minute)
	wholeThenAuto(t, ctx)

	rule := &resourceapi.DeviceTaintRule{ObjectMeta: metav1.ObjectMeta{Name: "e2e-maintenance-" + nodeA},
		Spec: resourceapi.DeviceTaintRuleSpec{
			DeviceSelector: &resourceapi.DeviceTaintSelector{Driver: ptr.To("mig.miglayout.io"), Pool: ptr.To(nodeA)},
			Taint:          resourceapi.DeviceTaint{Key: "example.com/maintenance", Effect: resourceapi.DeviceTaintEffectNoSchedule},
		}}
	createTaintRule(t, ctx, rule)

	before := len(plannedChanges(t)) // earlier tests' changes

	ns := env.NewNamespace(t, ctx, "taintrule")
	env.CreateClaim(t, ctx, ns, "small-gpu", `device.attributes['mig.miglayout.io'].profile == '1g.10gb'`)
	env.CreatePod(t, ctx, clustertest.Pod(ns, "small", autoNodes, "small-gpu", ""))
	clustertest.Poll(t, ctx, 60*time.Second, "pod small to be bound on node B with a 1g.10gb", func(ctx context.Context) (bool, string) {
		p, err := env.Client.CoreV1().Pods(ns).Get(ctx, "small", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		pool, dev, ok := clustertest.Allocated(env.GetClaim(t, ctx, ns, "small-gpu"))
		return ok && p.Spec.NodeName == nodeB && pool == nodeB && strings.Contains(dev, "-mig-1g10gb-"),
			fmt.Sprintf("bound to %q, claim allocated %s/%s", p.Spec.NodeName, pool, dev)
	})
	for _, change := range plannedChanges(t)[before:] {
		if change.node == nodeA {
			t.Errorf("node A was changed (%+v) though a DeviceTaintRule takes its devices out of scheduling", change)
		}
	}
}

// TestAutoMakesNoDeviceADeviceTaintRuleNames: an administrator takes the 1g.10gb at
// the last placement of every GPU out of scheduling before any exists (DeviceTaintRules
// by device name, every pool). A pending pod asking for a 1g.10gb is served by one the
// planner makes at another placement: one made where a rule names it would be kept
// from the pod, which would wait for ever.
func TestAutoMakesNoDeviceADeviceTaintRuleNames(t *testing.T) {
	ctx := clustertest.Context(t, 2*time.Minute)
	wholeThenAuto(t, ctx)

	var names []string
	for gpu := range 2 {
		name := migslices.MIGDeviceName(gpu, "1g.10gb", 19, 6)
		names = append(names, name)
		rule := &resourceapi.DeviceTaintRule{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("e2e-faulty-slice-%d", gpu)},
			Spec: resourceapi.DeviceTaintRuleSpec{
				DeviceSelector: &resourceapi.DeviceTaintSelector{Driver: ptr.To("mig.miglayout.io"), Device: ptr.To(name)},
				Taint:          resourceapi.DeviceTaint{Key: "example.com/faulty", Effect: resourceapi.DeviceTaintEffectNoSchedule},
			}}
		createTaintRule(t, ctx, rule)
	}

	ns := env.NewNamespace(t, ctx, "taintname")
	env.CreateClaim(t, ctx, ns, "small-gpu", `device.attributes['mig.miglayout.io'].profile == '1g.10gb'`)
	env.CreatePod(t, ctx, clustertest.Pod(ns, "small", autoNodes, "small-gpu", ""))
	clustertest.Poll(t, ctx, 60*time.Second, "pod small to be bound with a 1g.10gb no rule names", func(ctx context.Context) (bool, string) {
		p, err := env.Client.CoreV1().Pods(ns).Get(ctx, "small", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		pool, dev, ok := clustertest.Allocated(env.GetClaim(t, ctx, ns, "small-gpu"))
		return ok && p.Spec.NodeName != "" && strings.Contains(dev, "-mig-1g10gb-") && !slices.Contains(names, dev),
			fmt.Sprintf("bound to %q, claim allocated %s/%s", p.Spec.NodeName, pool, dev)
	})
	// No device a rule names was made on the way (one made would stay: the planner
	// never destroys a device a rule names).
	for _, n := range []string{nodeA, nodeB} {
		for _, g := range env.Snapshot(t, n).GPUs {
			if g.Layout().Contains(mig.Device{Profile: "1g.10gb", Start: 6}) {
				t.Errorf("%s GPU %d holds 1g.10gb@6 (%s), a device a DeviceTaintRule names", n, g.Index, g.Layout())
			}
		}
	}
}

// createTaintRule creates rule and deletes it when the test ends.
func createTaintRule(t *testing.T, ctx context.Context, rule *resourceapi.DeviceTaintRule) {
	t.Helper()
	if _, err := env.Client.ResourceV1().DeviceTaintRules().Create(ctx, rule, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = env.Client.ResourceV1().DeviceTaintRules().Delete(ctx, rule.Name, metav1.DeleteOptions{})
	})
}
