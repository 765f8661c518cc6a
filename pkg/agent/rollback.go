package agent

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"

	"github.com/miglayout/miglayout/api/v1alpha1"
	"github.com/miglayout/miglayout/pkg/mig/gpu"
)

// rollbackOrphans destroys GPU instances that have no full-size compute
// instance: the trace of an agent killed between creating a GI and its CI,
// or between destroying a CI and its GI (or of a failed rollback). Such a
// GI is never published, so nothing can use it. Only GIs the agent answers
// for are touched: on a GPU of the spec with a catalogued model (the spec
// owns its layout), or the device the journal records the agent creating or
// destroying when it stopped (JournalEntry.inFlight); GIs on GPUs nobody
// asked miglayout to manage
// (split by an administrator, perhaps with smaller compute instances) stay.
// A GI whose published name a claim allocates (the cache, then the API
// server) or the kubelet plugin holds prepared is never destroyed (its
// compute instance removed by another tool, say): it is reported in failed
// as in use (gpu.ErrInUse) until the claim lets it go, unless it is the
// journal's create in flight (the agent making again a device a GPU reset
// destroyed under its claim). Under the GPU lock the GPU is read again and a GI
// destroyed only if it still has no full-size compute instance, so that one
// odd NVML answer (describe reads a GI whose compute instance it could not
// list as one without) destroys nothing.
// It reports whether it destroyed any, and, by GPU index, the GIs it could
// not destroy; err only when the GPU lock could not be taken (ctx done).
func (r *Repartitioner) rollbackOrphans(ctx context.Context, obs []GPUState, desired []v1alpha1.GPUSpec) (rolled bool, failed map[int]error, err error) {
	logger := klog.FromContext(ctx)
	failed = map[int]error{}
	owned := sets.New[int]()
	for _, s := range desired {
		if g := findGPU(obs, int(s.Index)); g != nil && forGPU(s, g) {
			owned.Insert(int(s.Index))
		}
	}
	// The device the journal records the agent creating or destroying when
	// it stopped: a GI without CI there is the agent's half-done step (a
	// create that stopped before the CI, a destroy that stopped after it).
	// A create's half is rolled back even where a claim holds its name:
	// the device was gone when the agent began making it again (a GPU
	// reset under a running pod), no container can use a GI without a
	// compute instance, and the pass makes it whole and rewrites the
	// claim's CDI spec (RefreshRecreated); kept, it would block the GPU
	// until the claim let go, and the claim's pod would wait for a device
	// never made.
	journaled, creating := sets.New[string](), sets.New[string]()
	for _, e := range r.Journal.Entries() {
		if d, ok := e.inFlight(); ok {
			key := fmt.Sprintf("%d/%s/%s", e.GPU, e.UUID, d)
			journaled.Insert(key)
			if e.Step == StepCreating {
				creating.Insert(key)
			}
		}
	}
	// held is what claims allocate or the plugin holds prepared, read
	// once a GI to roll back is met; a name it lacks is asked of the API
	// server, once (the cache may not show yet a claim allocated the
	// device a moment ago).
	var held sets.Set[string]
	liveRead := false
	isHeld := func(name string) (bool, error) {
		if held == nil {
			h, err := r.heldDevices(ctx)
			if err != nil {
				return false, err
			}
			held = h
		}
		if !held.Has(name) && !liveRead {
			live, err := r.Allocations.AllocatedDevices(ctx, true)
			if err != nil {
				return false, fmt.Errorf("reading ResourceClaim allocations: %w", err)
			}
			held, liveRead = held.Union(live), true
		}
		return held.Has(name), nil
	}
	for i := range obs {
		g := &obs[i]
		for _, d := range g.Devices {
			if d.CIID >= 0 {
				continue
			}
			key := fmt.Sprintf("%d/%s/%s", g.GPU.Index, g.GPU.UUID, d.Device())
			managed := owned.Has(g.GPU.Index) && g.GPU.Model != nil
			if !managed && !journaled.Has(key) {
				continue
			}
			if creating.Has(key) {
				logger.Info("The GPU instance is the agent's own create that stopped before its compute instance: rolled back even where a claim holds its name", "gpu", g.GPU.Index, "device", d.Device().String())
			} else {
				name := r.Inventory.DeviceName(g.GPU, &d)
				busy, err := isHeld(name)
				if err != nil {
					failed[g.GPU.Index] = errors.Join(failed[g.GPU.Index], fmt.Errorf("rolling back GPU instance %s, which has no full-size compute instance: %w", d.Device(), err))
					continue
				}
				if busy {
					failed[g.GPU.Index] = errors.Join(failed[g.GPU.Index], fmt.Errorf("GPU instance %s has no full-size compute instance, but device %s is allocated or prepared: %w; it is destroyed once its claim lets it go", d.Device(), name, gpu.ErrInUse))
					continue
				}
			}
			logger.Info("Rolling back GPU instance without a full-size compute instance", "gpu", g.GPU.Index, "device", d.Device().String(), "giID", d.GIID)
			end, err := r.Locks.BeginReconfigure(ctx, g.GPU.Index)
			if err != nil {
				return rolled, failed, err
			}
			still, err := r.stillWithoutCI(ctx, g.GPU.Index, d)
			if err != nil || !still {
				end()
				if err != nil {
					failed[g.GPU.Index] = errors.Join(failed[g.GPU.Index], err)
					continue
				}
				// Read with its compute instance under the lock: nothing
				// to roll back (the pass observes the GPU again).
				logger.Info("The GPU instance has its compute instance when read again; not rolled back", "gpu", g.GPU.Index, "device", d.Device().String())
				rolled = true
				continue
			}
			err = r.GPUs.DestroyMIGDevice(ctx, g.GPU.Index, d.Device())
			end()
			if errors.Is(err, gpu.ErrNotFound) {
				// Gone since it was observed (destroyed by someone
				// else): what the rollback wanted.
				rolled = true
				continue
			}
			if err != nil {
				failed[g.GPU.Index] = errors.Join(failed[g.GPU.Index], fmt.Errorf("destroying GPU instance %s, which has no full-size compute instance: %w", d.Device(), err))
				continue
			}
			rolled = true
		}
	}
	return rolled, failed, nil
}

// heldDevices returns the published names of the devices claims allocate
// (the cache) or the kubelet plugin holds prepared.
func (r *Repartitioner) heldDevices(ctx context.Context) (sets.Set[string], error) {
	out, err := r.Allocations.AllocatedDevices(ctx, false)
	if err != nil {
		return nil, fmt.Errorf("reading ResourceClaim allocations: %w", err)
	}
	out = out.Clone()
	if r.Prepared != nil {
		out = out.Union(r.Prepared.PreparedDevices())
	}
	return out, nil
}

// stillWithoutCI reads GPU idx again and reports whether GI d (same
// placement, same GI ID) is there still without a full-size compute
// instance. A GI gone answers true: DestroyMIGDevice then finds nothing
// (gpu.ErrNotFound), which the rollback takes as done.
func (r *Repartitioner) stillWithoutCI(ctx context.Context, idx int, d gpu.MIGDevice) (bool, error) {
	devs, err := r.GPUs.MIGDevices(ctx, idx)
	if err != nil {
		return false, fmt.Errorf("reading GPU %d again before rolling back GPU instance %s: %w", idx, d.Device(), err)
	}
	for _, now := range devs {
		if now.Device() == d.Device() && now.GIID == d.GIID {
			return now.CIID < 0, nil
		}
	}
	return true, nil
}

// cancelOrphanModes cancels a MIG mode change the agent left pending (the
// journal records the mode it set, ModeSet, and NVML shows that mode
// pending; Ampere applies it at the next reset)
// on a GPU no spec asks anything of any more: the change would otherwise
// apply at a reset nobody asked for, and its devices stay published with the
// drain taint meanwhile. The mode is set back to the current one. A GPU whose
// cancel fails is added to failed (its journal entry stays, tried again next
// pass). It reports whether it cancelled any; err only when the GPU lock
// could not be taken (ctx done).
func (r *Repartitioner) cancelOrphanModes(ctx context.Context, obs []GPUState, desired []v1alpha1.GPUSpec, failed map[int]error) (bool, error) {
	cancelled := false
	for _, e := range r.Journal.Entries() {
		if (e.ModeSet == nil && e.Step != StepSettingMIGMode) || slices.ContainsFunc(desired, func(s v1alpha1.GPUSpec) bool { return int(s.Index) == e.GPU }) {
			continue
		}
		g := findGPU(obs, e.GPU)
		if g == nil || g.GPU.UUID != e.UUID || g.GPU.MIGMode.Current == g.GPU.MIGMode.Pending {
			continue
		}
		if e.ModeSet != nil && *e.ModeSet != g.GPU.MIGMode.Pending {
			// Pending is not what the agent set: someone else's change.
			continue
		}
		if !g.GPU.MIGMode.Pending && len(g.Devices) == 0 {
			// A disable whose MIG devices are all gone already: no
			// device waits under the drain taint, and cancelled it would
			// leave the GPU in MIG mode without devices, published as
			// nothing, where at its reset it comes back whole.
			continue
		}
		klog.FromContext(ctx).Info("Cancelling the MIG mode change left pending for a spec that is gone", "gpu", e.GPU, "current", g.GPU.MIGMode.Current)
		end, err := r.Locks.BeginReconfigure(ctx, e.GPU)
		if err != nil {
			return cancelled, err
		}
		_, err = r.GPUs.SetMIGMode(ctx, e.GPU, g.GPU.MIGMode.Current)
		end()
		if err != nil {
			failed[e.GPU] = errors.Join(failed[e.GPU], fmt.Errorf("cancelling the pending MIG mode change: %w", err))
			continue
		}
		cancelled = true
	}
	return cancelled, nil
}

// turnOffEmptied turns MIG mode off on a GPU that the agent's own work left
// in MIG mode without any GPU instance, where no spec asks anything of the
// GPU any more. The GPU's journal entry (for the GPU of its UUID) must show
// that the agent emptied it: it turned MIG mode on (ModeSet), or its work,
// in this entry or an earlier pass's of it, began destroying the GPU's
// devices (destroysBegun); and NVML must show MIG mode on, none pending, and no GPU
// instance. That is what the work leaves when it stops between steps and
// is not taken up again: the agent killed right after turning MIG mode on
// for a layout or a restore (restoreHeld), whose in-process undo
// (undoEnableForRefused, undoRestoreEnable) died with it; killed, or
// failed, after a relayout's or a disable's destroys and before its creates
// or its mode change. By the restart the spec is gone, or the claims the
// restore was for. Left so, the GPU would stay published as nothing, for
// good, since the entry goes at the end of the pass; with MIG mode off it
// is published whole, as a disable leaves it.
//
// A change NVML leaves pending (a client holds the GPU; on Ampere, a board
// that cannot reset the GPU, so that the change waits for the reboot) is
// cancelled again rather than left to apply, untracked, at a reset nobody
// asked for: such a GPU is left in MIG mode without devices until a spec
// asks for it. A GPU that claims still hold MIG devices of (by the agent's
// names of its index, confirmed by a live read, as restoreHeld does) is
// left to restoreHeld, and one whose GPU instance rollback failed (failed)
// to the next pass. A GPU whose mode change NVML refuses is added to failed
// (its entry stays, tried again next pass). It reports whether it changed
// any GPU, and records each in r.emptied (takeEmptied): true where MIG
// mode is now off, false where the change was cancelled; err only when
// reading the allocations failed or the GPU lock could not be taken (ctx
// done).
func (r *Repartitioner) turnOffEmptied(ctx context.Context, obs []GPUState, desired []v1alpha1.GPUSpec, failed map[int]error) (bool, error) {
	var cands []*GPUState
	for _, e := range r.Journal.Entries() {
		if failed[e.GPU] != nil || slices.ContainsFunc(desired, func(s v1alpha1.GPUSpec) bool { return int(s.Index) == e.GPU }) {
			continue
		}
		emptied := (e.ModeSet != nil && *e.ModeSet) || e.destroysBegun()
		g := findGPU(obs, e.GPU)
		if !emptied || g == nil || g.GPU.UUID != e.UUID || !g.GPU.MIGMode.Current || !g.GPU.MIGMode.Pending || len(g.Devices) > 0 {
			continue
		}
		cands = append(cands, g)
	}
	if len(cands) == 0 {
		return false, nil
	}
	held, err := r.heldOwnMIGNames(ctx, obs, cands)
	if err != nil {
		return false, err
	}
	logger := klog.FromContext(ctx)
	changed := false
	for _, g := range cands {
		idx := g.GPU.Index
		if held.Has(idx) {
			continue
		}
		logger.Info("Turning MIG mode off: the agent's work left the GPU without GPU instances, and no spec asks for the GPU any more", "gpu", idx)
		mode, locked, err := r.setMIGMode(ctx, idx, false)
		switch {
		case !locked:
			return changed, ctx.Err()
		case err != nil:
			failed[idx] = errors.Join(failed[idx], fmt.Errorf("turning off MIG mode, which the agent's work left without GPU instances: %w", err))
			continue
		case mode.Current:
			// The change waits for a GPU reset (a client holds the
			// GPU, or, on Ampere, the board cannot reset it): it is
			// cancelled, not left to apply untracked at a reset nobody
			// asked for.
			logger.Info("Turning MIG mode off waits for a GPU reset; the change is cancelled and the GPU left in MIG mode without devices", "gpu", idx)
			changed = true
			if _, locked, err := r.setMIGMode(ctx, idx, true); !locked {
				return changed, ctx.Err()
			} else if err != nil {
				// MIG mode off stays pending: no event says it was
				// cancelled; the failure is the GPU's (failed).
				failed[idx] = errors.Join(failed[idx], fmt.Errorf("cancelling the pending change of MIG mode to off: %w", err))
				continue
			}
			r.recordEmptied(idx, false)
			continue
		}
		changed = true
		r.recordEmptied(idx, true)
	}
	return changed, nil
}

// recordEmptied records what turnOffEmptied did to GPU idx (takeEmptied).
func (r *Repartitioner) recordEmptied(idx int, off bool) {
	if r.emptied == nil {
		r.emptied = map[int]bool{}
	}
	r.emptied[idx] = off
}

// takeEmptied returns, and forgets, the GPUs turnOffEmptied changed since
// the last call, by index: true where it turned MIG mode off (the GPU is
// published whole), false where turning it off waits for a GPU reset and
// the change was cancelled (the GPU stays in MIG mode without devices).
// The NodeReconciler takes them after every pass, failed or not, and tells
// them (tellEmptied): a pass that fails after the change does not make it
// again.
func (r *Repartitioner) takeEmptied() map[int]bool {
	e := r.emptied
	r.emptied = nil
	return e
}

// heldOwnMIGNames returns the indices of the GPUs of cands that ResourceClaim
// allocations hold MIG devices of under the agent's names of their index
// (holdsOwnMIGNames), as the cache shows them and the API server confirms
// (a live read, made only where the cache shows one): a claim released
// that the cache has not caught up with holds nothing.
func (r *Repartitioner) heldOwnMIGNames(ctx context.Context, obs []GPUState, cands []*GPUState) (sets.Set[int], error) {
	held := sets.New[int]()
	for _, live := range []bool{false, true} {
		allocated, err := r.Allocations.AllocatedDevices(ctx, live)
		if err != nil {
			return nil, fmt.Errorf("reading ResourceClaim allocations: %w", err)
		}
		unknown := r.unknownIn(allocated, obs)
		held = sets.New[int]()
		for _, g := range cands {
			if holdsOwnMIGNames(unknown, g.GPU.Index) {
				held.Insert(g.GPU.Index)
			}
		}
		if held.Len() == 0 {
			break
		}
	}
	return held, nil
}
