package agent

import (
	"context"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/miglayout/miglayout/api/v1alpha1"
	"github.com/miglayout/miglayout/pkg/mig"
	"github.com/miglayout/miglayout/pkg/mig/gpu"
)

// guardedAllocations reads the allocations of the cache that may still get
// a pod bound (GuardedAllocations where r.Allocations has it).
func (r *Repartitioner) guardedAllocations(ctx context.Context) (sets.Set[string], error) {
	var out sets.Set[string]
	var err error
	if g, ok := r.Allocations.(GuardedAllocations); ok {
		out, err = g.GuardedDevices(ctx)
	} else {
		out, err = r.Allocations.AllocatedDevices(ctx, false)
	}
	if err != nil {
		return nil, fmt.Errorf("reading ResourceClaim allocations: %w", err)
	}
	return out, nil
}

// unlistedGPUs holds, by GPU index, the error of NVML's process listing on
// the GPUs whose compute processes could not be listed (an NVML error on
// that GPU alone, such as ERROR_GPU_IS_LOST or ERROR_UNKNOWN): whether their
// devices run a process is not known, so none of them is destroyed.
type unlistedGPUs map[int]error

// refusal is the result of GPU idx, whose change must destroy the devices
// named (drain), where its processes could not be listed (unlisted): they
// may run one, so the GPU is left as it is and retried with the failing
// backoff, as for a failed step (failure): Failed with NVMLError for an
// NVML error, else Pending with PassFailed. It is nil where the GPU's
// processes were listed or nothing is destroyed.
func (r *Repartitioner) refusal(unlisted unlistedGPUs, idx int, drain []string) *GPUResult {
	err := unlisted[idx]
	if err == nil || len(drain) == 0 {
		return nil
	}
	msg := fmt.Sprintf("not destroyed: %s (whether they run a process is not known: %v); retrying", strings.Join(drain, ", "), err)
	if !gpu.IsNVMLError(err) {
		r.Metrics.countFailedPass()
		return &GPUResult{Phase: v1alpha1.PhasePending, Reason: ReasonPassFailed, Message: msg}
	}
	r.Metrics.countNVMLError(err)
	return &GPUResult{Phase: v1alpha1.PhaseFailed, Reason: v1alpha1.ReasonNVMLError, Message: msg}
}

// inUse returns the published names of devices that must not be destroyed:
// referenced by a ResourceClaim allocation, prepared by the kubelet plugin,
// or running a process; and the GPUs whose processes could not be listed.
func (r *Repartitioner) inUse(ctx context.Context, obs []GPUState, live bool) (sets.Set[string], unlistedGPUs, error) {
	allocated, err := r.Allocations.AllocatedDevices(ctx, live)
	if err != nil {
		return nil, nil, fmt.Errorf("reading ResourceClaim allocations: %w", err)
	}
	return r.inUseWith(ctx, obs, allocated)
}

// inUseAndUnknown is inUse from the cache, with the allocations it read
// that name no device of obs (unknownIn).
func (r *Repartitioner) inUseAndUnknown(ctx context.Context, obs []GPUState) (sets.Set[string], unknownAllocations, unlistedGPUs, error) {
	allocated, err := r.Allocations.AllocatedDevices(ctx, false)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("reading ResourceClaim allocations: %w", err)
	}
	inUse, unlisted, err := r.inUseWith(ctx, obs, allocated)
	if err != nil {
		return nil, nil, nil, err
	}
	return inUse, r.unknownIn(allocated, obs), unlisted, nil
}

// inUseWith is inUse given the allocated device names. A GPU whose process
// listing fails is left out of the processes' count and named in the
// unlistedGPUs returned; the error returned is the context's only (the
// pass is stopping).
func (r *Repartitioner) inUseWith(ctx context.Context, obs []GPUState, allocated sets.Set[string]) (sets.Set[string], unlistedGPUs, error) {
	out := allocated.Union(r.preparedNames(obs))
	unlisted := unlistedGPUs{}
	for i := range obs {
		g := &obs[i]
		if err := r.processesInUse(ctx, g, out); err != nil {
			if ctx.Err() != nil {
				return nil, nil, err
			}
			unlisted[g.GPU.Index] = err
		}
	}
	return out, unlisted, nil
}

// preparedNames returns the names of the devices the kubelet plugin holds
// prepared (none without r.Prepared): the names it prepared them under,
// and, where it reports their UUIDs (PreparedUUIDs), the names the devices
// of obs with those UUIDs are published under now, which differ from the
// first where NVML numbered the GPUs anew since the prepare.
func (r *Repartitioner) preparedNames(obs []GPUState) sets.Set[string] {
	if r.Prepared == nil {
		return sets.New[string]()
	}
	out := r.Prepared.PreparedDevices().Clone()
	byUUID, ok := r.Prepared.(PreparedUUIDs)
	if !ok {
		return out
	}
	uuids := byUUID.PreparedUUIDs()
	if uuids.Len() == 0 {
		return out
	}
	for i := range obs {
		g := &obs[i]
		if uuids.Has(g.GPU.UUID) {
			out.Insert(r.Inventory.DeviceName(g.GPU, nil))
		}
		for j := range g.Devices {
			if d := &g.Devices[j]; d.UUID != "" && uuids.Has(d.UUID) {
				out.Insert(r.Inventory.DeviceName(g.GPU, d))
			}
		}
	}
	return out
}

// processesInUse adds to out the devices of g that run a compute process.
func (r *Repartitioner) processesInUse(ctx context.Context, g *GPUState, out sets.Set[string]) error {
	if g.GPU.MIGCapable && !g.GPU.MIGMode.Current {
		// The whole GPU is the device: a process on it (started outside
		// any claim) keeps MIG mode from being enabled.
		procs, err := r.GPUs.GPUProcesses(ctx, g.GPU.Index)
		if err != nil {
			return err
		}
		if len(procs) > 0 {
			out.Insert(r.Inventory.DeviceName(g.GPU, nil))
		}
	}
	if len(g.Devices) == 0 {
		return nil
	}
	procs, err := r.GPUs.MIGProcesses(ctx, g.GPU.Index)
	if err != nil {
		return err
	}
	for j := range g.Devices {
		d := &g.Devices[j]
		if d.CIID >= 0 && len(procs[d.Device()]) > 0 {
			out.Insert(r.Inventory.DeviceName(g.GPU, d))
		}
	}
	return nil
}

// inUseLayouts returns, per GPU index, the MIG devices that may not be
// destroyed now: in use (inUse), or every device of a GPU that an
// allocation the agent cannot resolve may hold (unknownAllocated) or whose
// processes could not be listed (unlistedGPUs, returned).
func (r *Repartitioner) inUseLayouts(ctx context.Context, obs []GPUState) (map[int]mig.Layout, unlistedGPUs, error) {
	names, unknown, unlisted, err := r.inUseAndUnknown(ctx, obs)
	if err != nil {
		return nil, nil, err
	}
	out := map[int]mig.Layout{}
	for i := range obs {
		g := &obs[i]
		all := len(unknown.on(g.GPU.Index)) > 0 || unlisted[g.GPU.Index] != nil
		for j := range g.Devices {
			if all || names.Has(r.Inventory.DeviceName(g.GPU, &g.Devices[j])) {
				out[g.GPU.Index] = append(out[g.GPU.Index], g.Devices[j].Device())
			}
		}
	}
	return out, unlisted, nil
}
