package fullstack

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	"github.com/miglayout/miglayout/api/v1alpha1"
	"github.com/miglayout/miglayout/test/cluster/clustertest"
)

// TestDevicePluginActiveWithholdsTheNode: the node's kubelet starts
// advertising NVIDIA's device plugin resources (nvidia.com/mig-3g.40gb in
// its allocatable): the agent, running as the chart's RBAC lets it (its own
// Node watched), withdraws every device of the node's pool, its GPU says
// why, and the MigLayout is Degraded with that reason. Once the resources
// drop to zero the pool is published again as NVML has it.
func TestDevicePluginActiveWithholdsTheNode(t *testing.T) {
	ctx := clustertest.Context(t, 3*time.Minute)
	const name = "e2e-device-plugin"
	t.Cleanup(func() { env.DeleteMigLayout(t, name) })
	ml := env.SetStaticMigLayout(t, ctx, name, map[string]string{groupLabel: "reset"},
		clustertest.Rule("halves", a100, map[string]int32{"3g.40gb": 2}))
	env.WaitReady(t, ctx, ml, 1)
	env.WaitPoolMatchesNVML(t, ctx, nodeReset)

	setAllocatable := func(ctx context.Context, q string) {
		t.Helper()
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			n, err := env.Client.CoreV1().Nodes().Get(ctx, nodeReset, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if n.Status.Allocatable == nil {
				n.Status.Allocatable = corev1.ResourceList{}
			}
			if n.Status.Capacity == nil {
				n.Status.Capacity = corev1.ResourceList{}
			}
			n.Status.Capacity["nvidia.com/mig-3g.40gb"] = resource.MustParse("2")
			n.Status.Allocatable["nvidia.com/mig-3g.40gb"] = resource.MustParse(q)
			_, err = env.Client.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	setAllocatable(ctx, "2")
	t.Cleanup(func() { setAllocatable(context.Background(), "0") }) // where the test stops early
	clustertest.Poll(t, ctx, 60*time.Second, "the pool withdrawn and the GPU withheld", func(ctx context.Context) (bool, string) {
		pool, err := env.PoolDevices(ctx, nodeReset)
		if err != nil {
			return false, err.Error()
		}
		nml := env.GetNodeMigLayout(t, ctx, nodeReset)
		for _, g := range nml.Status.GPUs {
			if g.Index == 0 {
				return len(pool) == 0 && g.Reason == v1alpha1.ReasonDevicePluginActive,
					fmt.Sprintf("%d devices published; GPU 0 %s (%s): %s", len(pool), g.Phase, g.Reason, g.Message)
			}
		}
		return false, "GPU 0 not reported"
	})
	env.WaitMigLayout(t, ctx, name, ml.Generation, 60*time.Second, "Degraded by the device plugin", func(ml *v1alpha1.MigLayout) bool {
		return clustertest.HasCondition(ml.Status.Conditions, v1alpha1.ConditionDegraded, metav1.ConditionTrue, v1alpha1.ReasonDevicePluginActive)
	})

	setAllocatable(ctx, "0")
	env.WaitPoolMatchesNVML(t, ctx, nodeReset)
	env.WaitReady(t, ctx, ml, 1)
}
