package fullstack

// Helpers of this package's tests only; the shared ones are in test/cluster/clustertest.

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/miglayout/miglayout/pkg/mig/nvmlsim"
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
