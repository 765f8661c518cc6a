package fullstack

// Helpers of this package's tests only; the shared ones are in test/cluster/clustertest.

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miglayout/miglayout/pkg/mig/nvmlsim"
	"github.com/miglayout/miglayout/test/cluster/clustertest"
)

const (
	a100 = "A100-SXM4-80GB"
	h100 = "H100-SXM5-80GB"
)

// profileCounts returns "1g.10gb:2,3g.40gb:1"-style counts of a GPU's instances.
func profileCounts(g nvmlsim.GPU) string {
	counts := g.Layout().Counts()
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(counts)) {
		parts = append(parts, fmt.Sprintf("%s:%d", k, counts[k]))
	}
	return strings.Join(parts, ",")
}

// orphanGI reports a GPU instance without its compute instance.
func orphanGI(st nvmlsim.State) (string, bool) {
	for _, g := range st.GPUs {
		for _, gi := range g.GPUInstances {
			if len(gi.ComputeInstances) == 0 {
				return fmt.Sprintf("GPU %d: GI %d %s@%d has no compute instance", g.Index, gi.ID, gi.Profile, gi.Placement.Start), true
			}
		}
	}
	return "", false
}

// gpuOf returns the GPU with the given index.
func gpuOf(st nvmlsim.State, idx int) nvmlsim.GPU {
	for _, g := range st.GPUs {
		if g.Index == idx {
			return g
		}
	}
	return nvmlsim.GPU{Index: -1}
}

// describe runs kubectl describe and logs its output.
func describe(t *testing.T, ctx context.Context, args ...string) string {
	t.Helper()
	out, err := env.Cluster.Kubectl(ctx, append([]string{"describe"}, args...)...)
	if err != nil {
		t.Errorf("kubectl describe %v: %v", args, err)
	}
	return string(out)
}

// waitGPU0Blocked waits until node's GPU 0 is Blocked by a device in use
// (reason DeviceInUse).
func waitGPU0Blocked(t *testing.T, ctx context.Context, node, what string) {
	t.Helper()
	clustertest.Poll(t, ctx, 60*time.Second, what, func(context.Context) (bool, string) {
		for _, g := range env.GetNodeMigLayout(t, ctx, node).Status.GPUs {
			if g.Index == 0 {
				return g.Phase == "Blocked" && g.Reason == "DeviceInUse", fmt.Sprintf("GPU 0 %s (%s): %s", g.Phase, g.Reason, g.Message)
			}
		}
		return false, "GPU 0 not reported"
	})
}

// keptWhileBlocked checks, for d, that node's device dev keeps its UUID uuid
// (its claim holds it) and that no 7g device of a whole-GPU layout is made.
func keptWhileBlocked(t *testing.T, node, dev, uuid string, d time.Duration) {
	t.Helper()
	for deadline := time.Now().Add(d); time.Now().Before(deadline); time.Sleep(250 * time.Millisecond) {
		devs := clustertest.NVMLDevices(env.Snapshot(t, node))
		if devs[dev] != uuid {
			t.Fatalf("device %s (%s) is %q now: destroyed while its claim holds it", dev, uuid, devs[dev])
		}
		for name := range devs {
			if strings.Contains(name, "7g") {
				t.Fatalf("the new layout's %s was made over device %s", name, dev)
			}
		}
	}
}
