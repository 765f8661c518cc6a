package auto

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/miglayout/miglayout/api/v1alpha1"
	"github.com/miglayout/miglayout/test/cluster/clustertest"
)

// TestAutoReclaimGivesWayToPod: slowNode's GPU holds seven free 1g.10gb and is
// idle, so Auto mode gives it back as one 7g.80gb; its agent drains the seven for
// slowSettle first. A pod asking for a 1g.10gb arrives meanwhile. The controller
// cancels the reclaim before anything is destroyed, and the pod runs on one of the
// seven 1g.10gb that were there all along (same NVML UUID): the GPU is not made
// whole only to be split again.
func TestAutoReclaimGivesWayToPod(t *testing.T) {
	ctx := clustertest.Context(t, 3*time.Minute)
	const name = "e2e-auto-slow"
	slow := map[string]string{groupLabel: "slow"}
	t.Cleanup(func() { env.DeleteMigLayout(t, name) })
	ml := env.SetMigLayout(t, ctx, name, v1alpha1.MigLayoutSpec{
		NodeSelector: metav1.LabelSelector{MatchLabels: slow},
		Mode:         v1alpha1.ModeStatic,
		Rules:        []v1alpha1.LayoutRule{{Name: "sevenths", ProductName: a100, Profiles: map[string]int32{"1g.10gb": 7}}},
	})
	env.WaitReady(t, ctx, ml, 1)
	before := clustertest.NVMLDevices(env.Snapshot(t, slowNode))

	env.SetMigLayout(t, ctx, name, v1alpha1.MigLayoutSpec{
		NodeSelector: metav1.LabelSelector{MatchLabels: slow},
		Mode:         v1alpha1.ModeAuto,
		Policy:       &v1alpha1.AutoPolicy{ReclaimIdleGPUsAfterSeconds: ptr.To[int32](1)},
	})
	clustertest.Poll(t, ctx, 30*time.Second, slowNode+" GPU 0 draining to be given back whole", func(ctx context.Context) (bool, string) {
		nml := env.GetNodeMigLayout(t, ctx, slowNode)
		if len(nml.Spec.GPUs) == 0 || len(nml.Status.GPUs) == 0 {
			return false, "no GPU yet"
		}
		spec, st := nml.Spec.GPUs[0], nml.Status.GPUs[0]
		return spec.Layout == "7g.80gb@0" && st.Phase == v1alpha1.PhaseDraining, fmt.Sprintf("spec %q, status %s %q", spec.Layout, st.Phase, st.Layout)
	})
	drained := time.Now()

	ns := env.NewNamespace(t, ctx, "reclaim-cancel")
	env.CreateClaim(t, ctx, ns, "small-gpu", `device.attributes['mig.miglayout.io'].profile == '1g.10gb'`)
	env.CreatePod(t, ctx, clustertest.Pod(ns, "small", map[string]string{corev1.LabelHostname: slowNode}, "small-gpu", ""))
	env.WaitPodRunning(t, ctx, ns, "small", 90*time.Second)
	pool, device, ok := clustertest.Allocated(env.GetClaim(t, ctx, ns, "small-gpu"))
	if !ok || pool != slowNode {
		t.Fatalf("claim small-gpu allocated %s/%s, want a device of %s", pool, device, slowNode)
	}
	uuid, was := before[device]
	if now := clustertest.NVMLDevices(env.Snapshot(t, slowNode))[device]; !was || now != uuid {
		t.Errorf("pod small runs on %s (NVML UUID %s), not on one of the 1g.10gb there before the reclaim (%s had UUID %q): the GPU was repartitioned", device, now, device, uuid)
	}
	if after := clustertest.NVMLDevices(env.Snapshot(t, slowNode)); !maps.Equal(after, before) {
		t.Errorf("%s devices went from %v to %v, want the seven 1g.10gb it had, none destroyed", slowNode, before, after)
	}
	spec := env.GetNodeMigLayout(t, ctx, slowNode).Spec.GPUs[0]
	if !strings.Contains(spec.Reason, "cancels giving the GPU back as 7g.80gb@0") {
		t.Errorf("GPU 0 spec %q, reason %q; want the reclaim cancelled", spec.Layout, spec.Reason)
	}
	t.Logf("pod small runs on %s/%s %.1fs after the drain began (settle period %s)", pool, device, time.Since(drained).Seconds(), slowSettle)
}
