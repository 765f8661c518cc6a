package fullstack

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/miglayout/miglayout/api/v1alpha1"
	"github.com/miglayout/miglayout/test/cluster/clustertest"
)

// TestPausedMigLayoutLeavesHardwareAlone: a MigLayout paused and given new
// rules in one update (what an operator does to stage a change) writes no
// new layout and the GPUs keep theirs; its status says Paused and the
// nodes Pending, and `kubectl describe` and `kubectl miglayout status` show
// it. Resumed with `kubectl miglayout resume`, the rules apply.
func TestPausedMigLayoutLeavesHardwareAlone(t *testing.T) {
	ctx := clustertest.Context(t, 3*time.Minute)
	setStatic(t, ctx)
	before := map[string][]string{nodeA: clustertest.Layouts(env.Snapshot(t, nodeA)), nodeH: clustertest.Layouts(env.Snapshot(t, nodeH))}
	whole := []v1alpha1.LayoutRule{clustertest.Rule("a100", a100, map[string]int32{"7g.80gb": 1}), clustertest.Rule("h100", h100, map[string]int32{"7g.80gb": 1})}
	ml := env.SetMigLayout(t, ctx, staticLayout, v1alpha1.MigLayoutSpec{
		NodeSelector: metav1.LabelSelector{MatchLabels: staticNodes},
		Mode:         v1alpha1.ModeStatic,
		Rules:        whole,
		Paused:       true,
	})
	t.Cleanup(func() {
		// The package's other tests set their own specs; none expects a pause.
		_ = env.CRC.Patch(context.Background(), ml.DeepCopy(), crclient.RawPatch("application/merge-patch+json", []byte(`{"spec":{"paused":false}}`)))
	})
	ml = env.WaitMigLayout(t, ctx, staticLayout, ml.Generation, 60*time.Second, "Paused, both nodes paused", func(ml *v1alpha1.MigLayout) bool {
		paused := 0
		for _, row := range ml.Status.Nodes {
			if row.Phase == v1alpha1.PhasePending && strings.HasPrefix(row.Message, "paused (spec.paused)") {
				paused++
			}
		}
		return clustertest.HasCondition(ml.Status.Conditions, v1alpha1.ConditionPaused, metav1.ConditionTrue, v1alpha1.ReasonPaused) &&
			clustertest.HasCondition(ml.Status.Conditions, v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonNodesNotReady) && paused == 2
	})
	// The controller has reconciled the paused generation: the specs it
	// wrote are the layouts the GPUs hold, so the agents change nothing.
	for _, n := range []string{nodeA, nodeH} {
		nml := env.GetNodeMigLayout(t, ctx, n)
		for _, s := range nml.Spec.GPUs {
			if s.Layout == "7g.80gb@0" {
				t.Errorf("%s GPU %d given the paused rules' layout %q", n, s.Index, s.Layout)
			}
		}
		if got := clustertest.Layouts(env.Snapshot(t, n)); strings.Join(got, " ") != strings.Join(before[n], " ") {
			t.Errorf("%s holds %v in NVML while paused, want %v", n, got, before[n])
		}
	}
	out := describe(t, ctx, "miglayout", staticLayout)
	for _, want := range []string{"Paused", "spec.paused is set"} {
		if !strings.Contains(out, want) {
			t.Errorf("kubectl describe miglayout %s lacks %q:\n%s", staticLayout, want, out)
		}
	}

	status, err := env.Cluster.Kubectl(ctx, "miglayout", "status")
	if err != nil {
		t.Fatal(err)
	}
	if want := "MigLayout " + staticLayout + ": paused (spec.paused)"; !strings.Contains(string(status), want) {
		t.Errorf("kubectl miglayout status lacks %q:\n%s", want, status)
	}

	// Resumed as an operator does, with the kubectl plugin.
	resumed, err := env.Cluster.Kubectl(ctx, "miglayout", "resume", staticLayout)
	if err != nil {
		t.Fatal(err)
	}
	if want := "miglayout " + staticLayout + " resumed\n"; string(resumed) != want {
		t.Errorf("kubectl miglayout resume printed %q, want %q", resumed, want)
	}
	// The field is removed, not written false: the stored object reads as
	// one never paused.
	stored, err := env.Cluster.Kubectl(ctx, "get", "miglayout", staticLayout, "-o", "jsonpath={.spec.paused}")
	if err != nil {
		t.Fatal(err)
	}
	if len(stored) > 0 {
		t.Fatalf("kubectl miglayout resume left spec.paused %s stored, want the field removed", stored)
	}
	if err := env.CRC.Get(ctx, crclient.ObjectKey{Name: staticLayout}, ml); err != nil {
		t.Fatal(err)
	}
	env.WaitReady(t, ctx, ml, 2)
	for _, n := range []string{nodeA, nodeH} {
		for _, g := range env.Snapshot(t, n).GPUs {
			if got := g.Layout().String(); got != "7g.80gb@0" {
				t.Errorf("%s GPU %d holds %s in NVML once resumed, want 7g.80gb@0", n, g.Index, got)
			}
		}
	}
	var cur v1alpha1.MigLayout
	if err := env.CRC.Get(ctx, crclient.ObjectKey{Name: staticLayout}, &cur); err != nil {
		t.Fatal(err)
	}
	if !clustertest.HasCondition(cur.Status.Conditions, v1alpha1.ConditionPaused, metav1.ConditionFalse, v1alpha1.ReasonNotPaused) {
		t.Errorf("resumed: conditions %s, want Paused False", clustertest.ConditionsString(cur.Status.Conditions))
	}
}
