package agent

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"

	"github.com/miglayout/miglayout/api/v1alpha1"
	"github.com/miglayout/miglayout/pkg/mig/gpu"
)

// withdraw publishes the pool of obs without the devices that work's GPUs
// drained (gpuPlan.drain), and waits until the API server serves it
// (Inventory.Publish): from then on no claim can be allocated one of them,
// whatever it tolerates. A whole GPU drained for MIG mode to go on leaves
// the pool with its GPU. Nothing is published where nothing was drained.
// Drain taints the API server drops on the devices a pending MIG mode
// change removes do not fail it: ErrDrainTaintsDropped comes only once the
// withdrawal is served, taints aside (PoolInventory.Publish). The error is
// the publication's.
func (r *Repartitioner) withdraw(ctx context.Context, obs []GPUState, work []*gpuPlan) error {
	gone := sets.New[string]()
	for _, p := range work {
		gone.Insert(p.drain...)
	}
	if gone.Len() == 0 {
		return nil
	}
	klog.FromContext(ctx).Info("Withdrawing drained devices before repartitioning", "devices", sets.List(gone))
	err := r.publish(ctx, r.without(obs, gone), nil)
	if err != nil && !errors.Is(err, ErrDrainTaintsDropped) {
		return fmt.Errorf("withdrawing drained devices: %w", err)
	}
	return nil
}

// allocatedWhileWithdrawn reads the allocations from the API server once
// the withdrawal is served, and returns work less the GPUs that must destroy
// a device allocated since the live re-check after the drain (a claim that
// tolerates the drain taint, allocated from the tainted publication before
// the withdrawal reached the scheduler), or an allocation under a name the
// agent does not publish that may hold one of its devices (unknownIn): each
// gets Blocked (DeviceInUse, or UnknownAllocation) in res, its journal
// entry ended, and a retry. apply reads the API server again just before
// each GPU's lock. Nothing is read where nothing was drained. The error is
// the read's.
func (r *Repartitioner) allocatedWhileWithdrawn(ctx context.Context, work []*gpuPlan, res *SyncResult) ([]*gpuPlan, error) {
	if !slices.ContainsFunc(work, func(p *gpuPlan) bool { return len(p.drain) > 0 }) {
		return work, nil
	}
	live, err := r.Allocations.AllocatedDevices(ctx, true)
	if err != nil {
		return nil, fmt.Errorf("reading ResourceClaim allocations after the withdrawal: %w", err)
	}
	kept := work[:0]
	var unknown unknownAllocations
	if len(work) > 0 {
		unknown = r.unknownIn(live, work[0].obs)
	}
	for _, p := range work {
		// Allocations under names the agent does not publish, which the
		// drain's taints and withdrawal do not cover, as at the live
		// re-check after the drain.
		if names := unknown.on(p.index); len(p.drain) > 0 && len(names) > 0 {
			klog.FromContext(ctx).Info("Allocation under a name the agent does not publish found once the devices were withdrawn; keeping the GPU's devices", "gpu", p.index, "names", names)
			res.Results[p.index] = r.unknownAllocationResult(p.index, names)
			res.Retry = true
			r.keepMode(ctx, res, p.index)
			continue
		}
		busy := live.Intersection(sets.New(p.drain...))
		if busy.Len() == 0 {
			kept = append(kept, p)
			continue
		}
		klog.FromContext(ctx).Info("Device got allocated while being withdrawn; keeping it", "gpu", p.index, "devices", sets.List(busy))
		res.Results[p.index] = GPUResult{Phase: v1alpha1.PhaseBlocked, Reason: v1alpha1.ReasonDeviceInUse,
			Message: fmt.Sprintf("in use, not destroyed: %s (allocated while being withdrawn)%s", strings.Join(sets.List(busy), ", "), r.holdersNote(ctx, busy))}
		res.Retry = true
		r.keepMode(ctx, res, p.index)
	}
	return kept, nil
}

// undrain is err, for a pass that stops after its drain publication and
// before its withdrawal (the publication failed, the agent is stopping, the
// allocations could not be read), with the pool published again as NVML has
// it (restore): nothing was destroyed, and a failure that persists would
// otherwise keep the tainted devices, which exist, from every claim until a
// pass gets through.
func (r *Repartitioner) undrain(ctx context.Context, obs []GPUState, err error) error {
	r.restore(ctx, obs)
	return err
}

// restore publishes obs, the pool as the pass found it (nothing destroyed
// yet), untainted, after a drain publication or a withdrawal that failed:
// either may have been written all the same, and the devices it tainted or
// left out exist. An agent
// told to stop restores for at most stopRepublishTimeout. A failure is
// logged; the next pass publishes again.
func (r *Repartitioner) restore(ctx context.Context, obs []GPUState) {
	if ctx.Err() != nil {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), stopRepublishTimeout)
		defer cancel()
	}
	if err := r.publish(ctx, obs, nil); err != nil && !errors.Is(err, ErrDrainTaintsDropped) {
		klog.FromContext(ctx).Error(err, "Publishing the pool again untainted after a failed drain or withdrawal; the next pass publishes it")
	}
}

// without is obs less the devices named in gone: a GPU whose whole-GPU
// device is named is left out, a MIG device named is left out of its
// GPU's devices.
func (r *Repartitioner) without(obs []GPUState, gone sets.Set[string]) []GPUState {
	out := make([]GPUState, 0, len(obs))
	for _, g := range obs {
		if !g.GPU.MIGMode.Current && gone.Has(r.Inventory.DeviceName(g.GPU, nil)) {
			continue
		}
		g.Devices = slices.DeleteFunc(slices.Clone(g.Devices), func(d gpu.MIGDevice) bool {
			return gone.Has(r.Inventory.DeviceName(g.GPU, &d))
		})
		out = append(out, g)
	}
	return out
}

// unfinishedDestroys are the names of the devices of obs that a change this
// pass stopped part way through has still to destroy: a GPU of applied
// (those whose NVML work the pass began) that the journal records as
// destroying (StepDestroying) with some of its destroys done. Drained and
// withdrawn before the first destroy, they exist but are going. An agent
// stopped so keeps them out of the pool it publishes last, as a killed
// agent's last publication (the withdrawal) does: published untainted, a
// claim could be given one until the next agent drains it again, and the
// change would then wait for that claim with the GPU half made. Where no
// destroy was done the GPU holds its layout, which is published as it is.
func (r *Repartitioner) unfinishedDestroys(obs []GPUState, applied sets.Set[int]) sets.Set[string] {
	gone := sets.New[string]()
	for _, e := range r.Journal.Entries() {
		if !applied.Has(e.GPU) || e.Step != StepDestroying || len(e.Done) == 0 || len(e.Done) >= len(e.Destroy) {
			continue
		}
		left := sets.New(e.Destroy[len(e.Done):]...)
		for _, g := range obs {
			if g.GPU.UUID != e.UUID {
				continue
			}
			for i := range g.Devices {
				if left.Has(g.Devices[i].Device().String()) {
					gone.Insert(r.Inventory.DeviceName(g.GPU, &g.Devices[i]))
				}
			}
		}
	}
	return gone
}

// publish is Inventory.Publish of obs less the whole GPUs the pass
// withholds (Repartitioner.withheld).
func (r *Repartitioner) publish(ctx context.Context, obs []GPUState, draining sets.Set[string]) error {
	if r.withheld.Len() > 0 {
		obs = r.without(obs, r.withheld)
	}
	return r.Inventory.Publish(ctx, obs, draining)
}

// withheldWhole returns the names of the whole-GPU devices of obs's GPUs
// with MIG mode off that unknown (the allocations under names obs lacks)
// holds MIG devices of, by the agent's names of the GPU's index: such a GPU
// lost its MIG mode with its instances (a reboot, a driver reload or a GPU
// reset on Hopper and newer, where the mode is the driver's) while claims
// still hold devices of it, which restoreHeld makes again once it turns MIG
// mode on. Published meanwhile, the whole GPU could be allocated to another
// claim, which would then hold the same hardware, and keep the held devices
// from being made again.
func (r *Repartitioner) withheldWhole(obs []GPUState, unknown unknownAllocations) sets.Set[string] {
	var out sets.Set[string]
	for _, g := range obs {
		if g.GPU.MIGMode.Current || !g.GPU.MIGCapable {
			continue
		}
		// Names of this GPU's index only: not those that may be any
		// GPU's (anyGPU), nor another GPU's in NVIDIA's numbering by
		// minor number (gpusNamed), which would keep GPUs out of the
		// pool for claims of other hardware.
		if holdsOwnMIGNames(unknown, g.GPU.Index) {
			if out == nil {
				out = sets.New[string]()
			}
			out.Insert(r.Inventory.DeviceName(g.GPU, nil))
		}
	}
	return out
}
