package agent

import (
	"context"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"

	"github.com/miglayout/miglayout/api/v1alpha1"
	"github.com/miglayout/miglayout/pkg/mig"
	"github.com/miglayout/miglayout/pkg/mig/gpu"
	"github.com/miglayout/miglayout/pkg/slices"
)

// restoreHeld makes again the MIG devices that ResourceClaim allocations
// hold under the agent's names but NVML no longer has: GPU and compute
// instances do not outlive a reboot, a driver reload or a GPU reset, while
// the claims keep their allocations and their pods (bound to the node)
// wait for prepares that fail until the device is back. Without this a
// pass would lay the GPU's desired layout over the lost device's
// placement, so that the device could never be made again and every
// device of the GPU would count as held by the unknown allocation, or,
// on a GPU no spec lists, leave the GPU empty for good.
//
// A device is made again on the GPU its name numbers (a readable GPU in MIG
// mode, of a catalogued model, whose GPU instances were all rolled back
// whole: orphaned is rollbackOrphans' result), where its placement is free
// and the GPU's layout with it is one the catalog and the GPU's NVML
// accept; names are taken in order, so two stale names of one placement
// make one device. Only allocations the API server confirms (a live read,
// made only where there is a device to make) count, so a release the
// cache has not seen yet makes nothing. Each GPU's creates are journaled
// and made under the GPU's lock, as a pass's (apply); a MIG mode the agent
// set that the GPU's entry carries stays in it. It reports whether it made
// a device (the caller observes NVML again, and the prepared claims' CDI
// specs are refreshed after the pass) and the GPUs whose restore failed,
// by index, with the failure: the pass goes on, and such a GPU is not
// planned that pass (its layout would take the placements), the failure
// being its result.
func (r *Repartitioner) restoreHeld(ctx context.Context, obs []GPUState, orphaned map[int]error) (bool, map[int]GPUResult, error) {
	allocated, err := r.Allocations.AllocatedDevices(ctx, false)
	if err != nil {
		return false, nil, fmt.Errorf("reading ResourceClaim allocations: %w", err)
	}
	unknown := r.unknownIn(allocated, obs)
	if len(unknown) == 0 {
		return false, nil, nil
	}
	plans := r.restorePlans(obs, orphaned, unknown, allocated)
	if len(plans) == 0 {
		return false, nil, nil
	}
	live, err := r.Allocations.AllocatedDevices(ctx, true)
	if err != nil {
		return false, nil, fmt.Errorf("reading ResourceClaim allocations: %w", err)
	}
	// Planned again on the names the API server confirms.
	confirmed := unknownAllocations{}
	for idx, names := range unknown {
		for _, name := range names {
			if live.Has(name) {
				confirmed[idx] = append(confirmed[idx], name)
			}
		}
	}
	plans = r.restorePlans(obs, orphaned, confirmed, live)
	logger := klog.FromContext(ctx)
	made, failed := false, map[int]GPUResult{}
	for _, p := range plans {
		logger.Info("Making again MIG devices that ResourceClaims hold but the GPU lost (a reboot or a GPU reset destroys GPU instances)",
			"gpu", p.index, "devices", joinDevices(p.plan.Create), "names", p.drain, "enablingMIG", p.enableMIG)
		names := p.drain
		p.drain = nil
		r.refreshed = false // the prepared claims' CDI specs name the lost UUIDs
		res := r.apply(ctx, p)
		if res.Phase != v1alpha1.PhaseReady {
			res.Message = fmt.Sprintf("making again %s, which ResourceClaims hold: %s", strings.Join(names, ", "), res.Message)
			if p.enableMIG {
				res.Message += r.undoRestoreEnable(ctx, p.index)
			}
			failed[p.index] = res
			continue
		}
		made = true
		r.Metrics.countRestored(len(p.plan.Create))
		// Done: the entry keeps only a MIG mode set before, if any.
		if err := r.Journal.KeepMode(p.index); err != nil {
			logger.Error(err, "Could not end the GPU's journal entry of the devices made again; a later pass does", "gpu", p.index)
		}
	}
	return made, failed, nil
}

// restorePlans returns, per GPU with a device to make again (restoreHeld),
// a plan creating those devices; a plan's drain holds the names it makes
// again (nothing is drained).
//
// A GPU whose MIG mode is off, none pending, on a model that applies it
// without a reset (Hopper and newer, !MIGModeNeedsReset) gets a plan that
// turns MIG mode on first: there the mode is the driver's, and a reboot, a
// driver reload or a GPU reset brings the GPU back without it, while the
// claims still hold its MIG devices. Not where allocated (the allocations
// the caller read) holds the whole GPU, published meanwhile; the plan's
// guard names it for apply's check under the GPU's lock. On Ampere the
// mode outlives a reboot, so MIG mode off there is someone's choice, and
// turning it on would wait for a reset anyway: such a GPU is left as it
// is, its claims' devices unknown (UnknownAllocation) until released.
func (r *Repartitioner) restorePlans(obs []GPUState, orphaned map[int]error, unknown unknownAllocations, allocated sets.Set[string]) []*gpuPlan {
	entries := map[int]JournalEntry{}
	for _, e := range r.Journal.Entries() {
		entries[e.GPU] = e
	}
	var out []*gpuPlan
	for i := range obs {
		g := &obs[i]
		idx := g.GPU.Index
		names := unknown[idx]
		if len(names) == 0 || orphaned[idx] != nil || !g.GPU.MIGCapable || g.GPU.Model == nil {
			continue
		}
		model := g.GPU.Model
		var guard []string
		if !g.GPU.MIGMode.Current {
			whole := r.Inventory.DeviceName(g.GPU, nil)
			if g.GPU.MIGMode.Pending || model.MIGModeNeedsReset || allocated.Has(whole) {
				continue
			}
			guard = []string{whole}
		}
		layout := layoutOf(g)
		var create mig.Layout
		var made []string
		for _, name := range names {
			d, ok := r.heldDevice(obs, g, name)
			if !ok {
				continue
			}
			next := append(append(mig.Layout{}, layout...), d).Canonical()
			if model.ValidateKeeping(next, heldOther(g, model)) != nil || nvmlRefuses(g.GPU, mig.Layout{d}) != nil {
				continue
			}
			layout = next
			create = append(create, d)
			made = append(made, name)
		}
		if len(create) == 0 {
			continue
		}
		p := &gpuPlan{index: idx, state: g, model: model, obs: obs, desired: layout, drain: made,
			spec: v1alpha1.GPUSpec{Index: int32(idx), MIGEnabled: true, Layout: layout.String()}}
		p.plan.Create = create
		p.enableMIG, p.guard = guard != nil, guard
		if e, ok := entries[idx]; ok && e.UUID == g.GPU.UUID {
			p.modeSet = e.ModeSet
		}
		out = append(out, p)
	}
	return out
}

// heldDevice returns the MIG device of g that name is the agent's name of
// (Inventory.DeviceName), for a device g does not have: a catalogued
// profile at the placement start the name gives, with the GI profile ID
// g's NVML gives it. A name whose number is another GPU's minor number
// (NVIDIA's DRA driver numbers devices so) is not taken for g's.
func (r *Repartitioner) heldDevice(obs []GPUState, g *GPUState, name string) (mig.Device, bool) {
	k, ok := slices.ParseMIGDeviceName(name)
	if !ok || k.GPUIndex != g.GPU.Index {
		return mig.Device{}, false
	}
	for _, o := range obs {
		if o.GPU.Minor == k.GPUIndex && o.GPU.Index != k.GPUIndex {
			// Also another GPU's name in NVIDIA's DRA driver's
			// numbering (gpusNamed): the device may be that GPU's.
			return mig.Device{}, false
		}
	}
	for _, p := range g.GPU.Model.Profiles {
		id := p.ID
		if nid, ok := g.GPU.NVMLProfileIDs[p.Name]; ok {
			id = nid
		}
		cand := gpu.MIGDevice{GPUIndex: g.GPU.Index, Profile: p.Name, ProfileID: id, Placement: mig.Placement{Start: k.Start}}
		if r.Inventory.DeviceName(g.GPU, &cand) == name {
			return mig.Device{Profile: p.Name, Start: k.Start}, true
		}
	}
	return mig.Device{}, false
}

// undoRestoreEnable turns MIG mode off again on GPU idx, whose restore
// turned it on and then failed, so that the GPU is left as the restore
// found it (its next try turns it on again): no GPU is left in MIG mode
// without devices, publishing nothing, where the claims are released
// before a restore gets through. NVML refuses while a GPU instance the
// restore made stays (ERROR_IN_USE): the mode then stays on, with the
// devices made. It returns what to add to the GPU's message ("" where the
// mode is off).
func (r *Repartitioner) undoRestoreEnable(ctx context.Context, idx int) string {
	mode, locked, err := r.setMIGMode(ctx, idx, false)
	switch {
	case !locked:
		return ""
	case err != nil:
		klog.FromContext(ctx).Error(err, "Turning MIG mode off again after a failed restore", "gpu", idx)
		return fmt.Sprintf("; MIG mode, turned on for them, stays on (turning it off failed: %v)", err)
	case mode.Current:
		return "; MIG mode, turned on for them, stays on (the change to off is pending)"
	}
	return ""
}

// setMIGMode sets GPU idx's MIG mode (on: enabled) under the GPU's lock,
// and returns the mode NVML reports after it (gpu.Manager.SetMIGMode) and
// its error; locked is false, and nothing is done, where the lock could not
// be taken (ctx done).
func (r *Repartitioner) setMIGMode(ctx context.Context, idx int, on bool) (mode gpu.MIGMode, locked bool, err error) {
	end, err := r.Locks.BeginReconfigure(ctx, idx)
	if err != nil {
		return gpu.MIGMode{}, false, nil
	}
	defer end()
	mode, err = r.GPUs.SetMIGMode(ctx, idx, on)
	return mode, true, err
}
