package fullstack

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/miglayout/miglayout/api/v1alpha1"
	"github.com/miglayout/miglayout/pkg/agent"
	"github.com/miglayout/miglayout/test/cluster/clustertest"
)

// TestOrphanedClaimReleased plays a kubelet that loses its record of a prepared claim:
// the node's stand-in kubelet stops, and the pod and its claim are deleted, so the
// claim is never unprepared. Its device, still recorded as prepared, keeps the GPU from
// being repartitioned (Blocked) while the pod's process runs on, past the agent's grace
// period (5 s here), and until the agent sees no process there and releases the
// preparation: then the GPU takes its new layout, the claim's CDI spec is gone, and the
// release is told in an OrphanedClaimReleased event.
func TestOrphanedClaimReleased(t *testing.T) {
	ctx := clustertest.Context(t, 4*time.Minute)
	const name = "e2e-orphan"
	t.Cleanup(func() { env.DeleteMigLayout(t, name) })
	selector := map[string]string{groupLabel: "orphan"}
	ml := env.SetStaticMigLayout(t, ctx, name, selector, clustertest.Rule("halves", a100, map[string]int32{"3g.40gb": 2}))
	env.WaitReady(t, ctx, ml, 1)
	env.WaitPoolMatchesNVML(t, ctx, nodeOrphan)

	ns := env.NewNamespace(t, ctx, "orphan")
	claim := env.CreateClaim(t, ctx, ns, "orphan", `device.attributes['mig.miglayout.io'].profile == '3g.40gb'`)
	env.CreatePod(t, ctx, clustertest.Pod(ns, "orphan", clustertest.OnNode(nodeOrphan), claim.Name, ""))
	env.WaitPodRunning(t, ctx, ns, "orphan", 60*time.Second)
	pool, dev, ok := clustertest.Allocated(env.GetClaim(t, ctx, ns, claim.Name))
	if !ok || pool != nodeOrphan {
		t.Fatalf("claim allocated from pool %q device %q, want a device of %s", pool, dev, nodeOrphan)
	}
	spec := cdiSpecOf(t, nodeOrphan, string(claim.UID))

	// The kubelet goes; the pod and claim are deleted behind its back. The pod's
	// process runs on for now, like a container the kubelet never stopped.
	env.Cluster.Kubelet(nodeOrphan).Stop()
	if err := env.Client.CoreV1().Pods(ns).Delete(ctx, "orphan", metav1.DeleteOptions{GracePeriodSeconds: ptr.To(int64(0))}); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.ResourceV1().ResourceClaims(ns).Delete(ctx, claim.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	clustertest.Poll(t, ctx, 60*time.Second, "claim "+claim.Name+" gone", func(ctx context.Context) (bool, string) {
		c, err := env.Client.ResourceV1().ResourceClaims(ns).Get(ctx, claim.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, ""
		}
		if err != nil {
			return false, err.Error()
		}
		return false, fmt.Sprintf("finalizers %v, reserved for %v", c.Finalizers, c.Status.ReservedFor)
	})
	if _, err := os.Stat(spec); err != nil {
		t.Fatalf("the claim's CDI spec is gone before the agent released it: %v; the test shows nothing", err)
	}

	// One whole 7g.80gb destroys the claim's device: the GPU waits for its release,
	// which waits for the process, well past the grace period.
	ml = env.SetStaticMigLayout(t, ctx, name, selector, clustertest.Rule("whole", a100, map[string]int32{"7g.80gb": 1}))
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if got := profileCounts(gpuOf(env.Snapshot(t, nodeOrphan), 0)); got != "3g.40gb:2" {
			t.Fatalf("GPU 0 holds %s while the gone claim's process still runs on %s, want 3g.40gb:2 kept", got, dev)
		}
		time.Sleep(250 * time.Millisecond)
	}
	if _, err := os.Stat(spec); err != nil {
		t.Fatalf("the claim's CDI spec while its process still runs: %v, want it kept", err)
	}
	sim, err := env.Cluster.Sim(nodeOrphan)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range sim.Snapshot().Processes {
		if err := sim.StopProcess(p.PID); err != nil {
			t.Fatal(err)
		}
	}
	released := time.Now()
	env.WaitReady(t, ctx, ml, 1)
	t.Logf("repartitioned %v after the process stopped", time.Since(released).Round(time.Second))
	if got := profileCounts(gpuOf(env.Snapshot(t, nodeOrphan), 0)); got != "7g.80gb:1" {
		t.Errorf("GPU 0 holds %s, want 7g.80gb:1", got)
	}
	if _, err := os.Stat(spec); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the released claim's CDI spec %s: %v, want it removed", spec, err)
	}
	clustertest.Poll(t, ctx, 30*time.Second, "an "+agent.EventOrphanedClaimReleased+" event", func(ctx context.Context) (bool, string) {
		list, err := env.Client.EventsV1().Events("").List(ctx, metav1.ListOptions{FieldSelector: "reason=" + agent.EventOrphanedClaimReleased})
		if err != nil {
			return false, err.Error()
		}
		for _, e := range list.Items {
			if e.Regarding.Kind == "NodeMigLayout" && e.Regarding.Name == nodeOrphan && strings.Contains(e.Note, string(claim.UID)) && strings.Contains(e.Note, dev) {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d such events, none on NodeMigLayout %s naming the claim and %s", len(list.Items), nodeOrphan, dev)
	})
	nml := env.GetNodeMigLayout(t, ctx, nodeOrphan)
	if !clustertest.HasCondition(nml.Status.Conditions, v1alpha1.ConditionReady, metav1.ConditionTrue, "") {
		t.Errorf("NodeMigLayout %s not Ready: %s", nodeOrphan, clustertest.ConditionsString(nml.Status.Conditions))
	}
}

// cdiSpecOf returns the path of the CDI spec the node's agent wrote for the claim of uid.
func cdiSpecOf(t *testing.T, node, uid string) string {
	t.Helper()
	matches, err := filepath.Glob(filepath.Join(env.Cluster.CDIDir(node), "*"+uid+"*"))
	if err != nil || len(matches) != 1 {
		t.Fatalf("CDI specs of claim %s on %s: %v, %v; want one", uid, node, matches, err)
	}
	return matches[0]
}
