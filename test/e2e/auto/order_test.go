package auto

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/miglayout/miglayout/api/v1alpha1"
	migslices "github.com/miglayout/miglayout/pkg/slices"
	"github.com/miglayout/miglayout/test/cluster/clustertest"
)

// TestSchedulerTakesTheDeviceThatSpoilsLeast: every GPU has two free 1g.10gb, at memory
// slice 0 (inside the only 4g.40gb placement of an A100) and at slice 6. The agents
// publish the one at 6 first (slices.SortDevices, least room lost), and kube-scheduler,
// whose allocator takes the first device a request accepts, gives a pod asking for a
// 1g.10gb that one on GPU 0 of whichever node it picks, not the one at slice 0: the
// planner's choice, made by the scheduler alone, with no plan.
func TestSchedulerTakesTheDeviceThatSpoilsLeast(t *testing.T) {
	ctx := clustertest.Context(t, 2*time.Minute)
	ml := env.SetMigLayout(t, ctx, layoutName, v1alpha1.MigLayoutSpec{
		NodeSelector: metav1.LabelSelector{MatchLabels: autoNodes},
		Mode:         v1alpha1.ModeStatic,
		Rules:        []v1alpha1.LayoutRule{{Name: "two-small", ProductName: a100, Layout: ptr.To("1g.10gb@0,1g.10gb@6")}},
	})
	env.WaitReady(t, ctx, ml, 2)
	for _, n := range []string{nodeA, nodeB} {
		env.WaitPoolMatchesNVML(t, ctx, n)
	}

	node, dev := runSmallPod(t, ctx, env.NewNamespace(t, ctx, "order"))
	if want := migslices.MIGDeviceName(0, "1g.10gb", 19, 6); dev != want {
		t.Errorf("the scheduler gave %s/%s, want %s: the free 1g.10gb outside the 4g.40gb placement, on the node's first GPU", node, dev, want)
	}
}
