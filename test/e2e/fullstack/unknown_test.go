package fullstack

import (
	"context"
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/miglayout/miglayout/api/v1alpha1"
	"github.com/miglayout/miglayout/test/cluster"
	"github.com/miglayout/miglayout/test/cluster/clustertest"
)

// TestUnknownAllocationKeepsGPU plays a node taken over from another DRA driver of the
// same name: a claim holds a device of the node's pool under a name miglayout never
// gives ("gpu-0-mig-foreign-3g", on GPU 0). Asked to make every A100 one 7g.80gb, the
// agent repartitions GPU 1 but leaves GPU 0 as it is (Blocked, UnknownAllocation:
// either of its devices may be the one held), and goes on once the claim is gone.
func TestUnknownAllocationKeepsGPU(t *testing.T) {
	ctx := clustertest.Context(t, 4*time.Minute)
	setStatic(t, ctx)
	ns := env.NewNamespace(t, ctx, "unknown")
	const foreign = "gpu-0-mig-foreign-3g"

	claim := env.CreateClaim(t, ctx, ns, "foreign", "")
	now := metav1.Now()
	claim.Status.Allocation = &resourceapi.AllocationResult{
		AllocationTimestamp: &now,
		NodeSelector: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchFields: []corev1.NodeSelectorRequirement{
			{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{nodeA}}}}}},
		Devices: resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{{
			Request: "gpu", Driver: cluster.Driver, Pool: nodeA, Device: foreign,
		}}},
	}
	if _, err := env.Client.ResourceV1().ResourceClaims(ns).UpdateStatus(ctx, claim, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("allocating %s to claim %s: %v", foreign, claim.Name, err)
	}
	before := env.Snapshot(t, nodeA)

	ml := env.SetStaticMigLayout(t, ctx, staticLayout, staticNodes,
		clustertest.Rule("a100", a100, map[string]int32{"7g.80gb": 1}), h100Mixed)
	got := env.WaitMigLayout(t, ctx, staticLayout, ml.Generation, 60*time.Second, "Degraded with reason UnknownAllocation", func(ml *v1alpha1.MigLayout) bool {
		return clustertest.HasCondition(ml.Status.Conditions, v1alpha1.ConditionDegraded, metav1.ConditionTrue, v1alpha1.ReasonUnknownAllocation)
	})
	t.Logf("Degraded: %s", clustertest.Condition(got.Status.Conditions, v1alpha1.ConditionDegraded).Message)
	clustertest.Poll(t, ctx, 60*time.Second, "GPU 1 of "+nodeA+" made one 7g.80gb", func(context.Context) (bool, string) {
		g := gpuOf(env.Snapshot(t, nodeA), 1)
		return profileCounts(g) == "7g.80gb:1", profileCounts(g)
	})
	var nml v1alpha1.NodeMigLayout
	if err := env.CRC.Get(ctx, crclient.ObjectKey{Name: nodeA}, &nml); err != nil {
		t.Fatal(err)
	}
	for _, st := range nml.Status.GPUs {
		if st.Index != 0 {
			continue
		}
		t.Logf("GPU 0: %s %s: %s (in use %q)", st.Phase, st.Reason, st.Message, st.InUse)
		if st.Phase != v1alpha1.PhaseBlocked || st.Reason != v1alpha1.ReasonUnknownAllocation {
			t.Errorf("GPU 0 is %s/%s, want Blocked/UnknownAllocation", st.Phase, st.Reason)
		}
		if st.InUse != st.Layout {
			t.Errorf("GPU 0 reports %q in use, want its whole layout %q", st.InUse, st.Layout)
		}
	}
	// GPU 0 is not touched, for several settle periods.
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		if now := gpuOf(env.Snapshot(t, nodeA), 0); !reflect.DeepEqual(now.GPUInstances, gpuOf(before, 0).GPUInstances) {
			t.Fatalf("GPU 0 of %s changed from %v to %v while a claim may hold one of its devices", nodeA, gpuOf(before, 0).Layout(), now.Layout())
		}
		time.Sleep(200 * time.Millisecond)
	}

	// Once the claim is gone, the change goes through.
	if err := env.Client.ResourceV1().ResourceClaims(ns).Delete(ctx, claim.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	env.WaitReady(t, ctx, ml, 2)
	if got := profileCounts(gpuOf(env.Snapshot(t, nodeA), 0)); got != "7g.80gb:1" {
		t.Errorf("GPU 0 holds %s after the claim is gone, want 7g.80gb:1", got)
	}
}
