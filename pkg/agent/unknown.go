package agent

import (
	"context"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/miglayout/miglayout/api/v1alpha1"
	"github.com/miglayout/miglayout/pkg/slices"
)

// anyGPU keys the unknown allocated names that name no GPU index
// (slices.DeviceGPUIndex): they may hold a device of any GPU of the node.
const anyGPU = -1

// unknownAllocations maps a GPU index (or anyGPU) to the device names that
// ResourceClaim allocations of this node's driver and pool reference on it
// but that name no device the node has under the agent's names
// (Inventory.DeviceName of the GPUs and MIG devices in obs; unknownIn).
type unknownAllocations map[int][]string

// on returns the unknown names that may hold a device of GPU idx.
func (u unknownAllocations) on(idx int) []string {
	if len(u) == 0 {
		return nil
	}
	return append(append([]string(nil), u[idx]...), u[anyGPU]...)
}

// unknownIn returns the names of allocated (the allocations of this
// node's driver and pool, as the cache shows them) that name no device of
// obs, by the GPUs they may hold a device of (gpusNamed): claims allocated from another publisher of the same driver name and
// pool (a DRA driver miglayout took over from), from names of another
// version, or to a device gone from NVML. The agent cannot tell which
// device such an allocation holds, so it reports all of the GPU's devices
// in use (inUseLayouts) and, once confirmLive confirms the name, destroys
// none there (Sync).
func (r *Repartitioner) unknownIn(allocated sets.Set[string], obs []GPUState) unknownAllocations {
	known := sets.New[string]()
	for i := range obs {
		g := &obs[i]
		if !g.GPU.MIGCapable || !g.GPU.MIGMode.Current {
			// Published whole only with MIG mode off: a GPU in MIG
			// mode has no device of its whole-GPU name.
			known.Insert(r.Inventory.DeviceName(g.GPU, nil))
		}
		for j := range g.Devices {
			known.Insert(r.Inventory.DeviceName(g.GPU, &g.Devices[j]))
		}
	}
	unknown := allocated.Difference(known)
	if unknown.Len() == 0 {
		return nil
	}
	out := unknownAllocations{}
	for _, name := range sets.List(unknown) {
		for _, idx := range r.gpusNamed(name, obs) {
			out[idx] = append(out[idx], name)
		}
	}
	return out
}

// gpusNamed are the GPUs an unknown allocated name may hold a device of:
// the GPU whose NVML index the name gives (miglayout's names, of this
// version or another), where NVML counts it, and the GPU whose minor number
// it is (NVIDIA's DRA driver names devices "gpu-<minor>..."; minors also
// stay where NVML numbers the GPUs anew, one gone); anyGPU for a name of no
// GPU number, or one that is neither.
func (r *Repartitioner) gpusNamed(name string, obs []GPUState) []int {
	n, _, ok := slices.DeviceGPUIndex(name)
	if !ok {
		return []int{anyGPU}
	}
	var out []int
	if r.counted == nil || r.counted.Has(n) {
		out = append(out, n)
	}
	for _, g := range obs {
		if g.GPU.Minor == n && g.GPU.Index != n {
			out = append(out, g.GPU.Index)
		}
	}
	if len(out) == 0 {
		return []int{anyGPU}
	}
	return out
}

// confirmLive keeps the names of u that the API server still shows
// allocated (a live read, made only where a GPU that u may hold would lose
// devices), so that a release the cache has not seen yet blocks nothing.
// The result is never nil.
func (r *Repartitioner) confirmLive(ctx context.Context, u unknownAllocations) (unknownAllocations, error) {
	live, err := r.Allocations.AllocatedDevices(ctx, true)
	if err != nil {
		return nil, fmt.Errorf("reading ResourceClaim allocations: %w", err)
	}
	out := unknownAllocations{}
	for idx, names := range u {
		for _, name := range names {
			if live.Has(name) {
				out[idx] = append(out[idx], name)
			}
		}
	}
	return out, nil
}

// unknownAllocationResult is the result of a GPU whose change would destroy
// devices while allocations name devices the agent cannot find (names).
func (r *Repartitioner) unknownAllocationResult(idx int, names []string) GPUResult {
	return GPUResult{Phase: v1alpha1.PhaseBlocked, Reason: v1alpha1.ReasonUnknownAllocation,
		Message: fmt.Sprintf("not destroyed: ResourceClaim allocations of driver %s name %s, no device of this node under the agent's names "+
			"(another publisher of the same driver name and pool, names of another version, or a device gone from NVML), "+
			"so any device of GPU %d may be the one allocated; waiting for the allocation to be released",
			r.driver(), strings.Join(names, ", "), idx)}
}

// holdsOwnMIGNames reports whether unknown holds, for GPU idx, a MIG device
// name of the agent's naming that numbers idx itself: not a name that may be
// any GPU's (anyGPU), nor another GPU's in NVIDIA's DRA driver's numbering
// by minor number (gpusNamed). Such names are the devices claims hold that
// restoreHeld makes again on idx.
func holdsOwnMIGNames(unknown unknownAllocations, idx int) bool {
	for _, name := range unknown[idx] {
		if k, ok := slices.ParseMIGDeviceName(name); ok && k.GPUIndex == idx {
			return true
		}
	}
	return false
}
