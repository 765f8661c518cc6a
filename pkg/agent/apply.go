package agent

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/miglayout/miglayout/api/v1alpha1"
	"github.com/miglayout/miglayout/pkg/mig/gpu"
)

// apply performs the NVML changes of one GPU. Devices are destroyed CI then
// GI (by the manager), then created GI then CI, largest first (Diff's order).
func (r *Repartitioner) apply(ctx context.Context, p *gpuPlan) GPUResult {
	logger := klog.FromContext(ctx).WithValues("gpu", p.index)
	fail := r.failure
	// unapplied ends the GPU's work of this pass where it stops before any
	// NVML step, as the drain's re-check does (Journal.KeepMode): its
	// Draining entry would otherwise stay until the GPU is next Ready.
	unapplied := func(res GPUResult) GPUResult {
		if err := r.Journal.KeepMode(p.index); err != nil {
			logger.Error(err, "Could not end the GPU's journal entry for this pass; a later pass does")
		}
		return res
	}
	// A claim that tolerates the drain taint may have been allocated a
	// draining device since the last live read (the withdrawal's), while
	// earlier GPUs were repartitioned, or by a scheduler decision taken
	// before it saw the withdrawal: the API server, read again just before
	// the lock (the lock orders prepares, not allocations: a read under it
	// would hold the GPU's prepares for its length), shows it where the
	// cache may lag; the checks under the lock then look at the cache. What
	// is allocated after this read, and not shown by the cache under the
	// lock, is what remains (binding conditions close it).
	var read sets.Set[string]
	if len(p.drain) > 0 {
		readCtx, cancel := context.WithTimeout(ctx, lockedReadTimeout)
		var err error
		read, err = r.Allocations.AllocatedDevices(readCtx, true)
		cancel()
		if err != nil {
			return unapplied(fail(fmt.Errorf("reading ResourceClaim allocations: %w", err)))
		}
		// Allocations under names the agent does not publish, which the
		// drain's taints do not cover.
		if names := r.unknownIn(read, p.obs).on(p.index); len(names) > 0 {
			return unapplied(r.unknownAllocationResult(p.index, names))
		}
	}
	end, err := r.Locks.BeginReconfigure(ctx, p.index)
	if err != nil {
		return unapplied(fail(fmt.Errorf("locking GPU %d: %w", p.index, err)))
	}
	defer end()
	// Prepare takes the same lock: with it held, a device prepared since
	// the drain's re-check would show here. Never destroy one.
	if r.Prepared != nil {
		if busy := r.preparedNames(p.obs).Intersection(sets.New(p.drain...)); busy.Len() > 0 {
			return unapplied(GPUResult{Phase: v1alpha1.PhaseBlocked, Reason: v1alpha1.ReasonDeviceInUse,
				Message: fmt.Sprintf("in use, not destroyed: %s (prepared while draining)", strings.Join(sets.List(busy), ", "))})
		}
	}
	if len(p.guard) > 0 {
		busy := sets.New[string]()
		if r.Prepared != nil {
			busy = r.preparedNames(p.obs).Intersection(sets.New(p.guard...))
		}
		cached, err := r.guardedAllocations(ctx)
		if err != nil {
			return unapplied(fail(err))
		}
		if busy = busy.Union(cached.Intersection(sets.New(p.guard...))); busy.Len() > 0 {
			return unapplied(GPUResult{Phase: v1alpha1.PhaseBlocked, Reason: v1alpha1.ReasonDeviceInUse,
				Message: fmt.Sprintf("in use, MIG mode not turned on: %s (allocated or prepared)", strings.Join(sets.List(busy), ", "))})
		}
	}
	// A claim allocated a draining device between the live read above and
	// the lock: the cache, which follows allocations within moments, shows
	// it here.
	if len(p.drain) > 0 {
		cached, err := r.guardedAllocations(ctx)
		if err != nil {
			return unapplied(fail(err))
		}
		// Allocations under names the agent does not publish, which the
		// drain's taints do not cover, made since the live read above: the
		// API server tells a new one from a release the cache has not
		// seen yet.
		if names := r.unknownIn(cached, p.obs).on(p.index); len(names) > 0 {
			readCtx, cancel := context.WithTimeout(ctx, lockedReadTimeout)
			live, err := r.Allocations.AllocatedDevices(readCtx, true)
			cancel()
			if err != nil {
				return unapplied(fail(fmt.Errorf("reading ResourceClaim allocations: %w", err)))
			}
			if held := live.Intersection(sets.New(names...)); held.Len() > 0 {
				return unapplied(r.unknownAllocationResult(p.index, sets.List(held)))
			}
		}
		busy := cached.Intersection(sets.New(p.drain...))
		if again := busy.Intersection(p.vetted); again.Len() > 0 {
			// A vetted device the cache still shows: its release not
			// seen yet, or allocated again (to a claim that tolerates
			// the drain taint) since the live re-check. The API server
			// tells which; a name alone does not.
			// Bounded: the GPU's prepares wait (ErrReconfiguring) while
			// the lock is held.
			readCtx, cancel := context.WithTimeout(ctx, lockedReadTimeout)
			live, err := r.Allocations.AllocatedDevices(readCtx, true)
			cancel()
			if err != nil {
				return unapplied(fail(fmt.Errorf("reading ResourceClaim allocations: %w", err)))
			}
			busy = busy.Difference(p.vetted).Union(live.Intersection(again))
		}
		busy = busy.Union(read.Intersection(sets.New(p.drain...)))
		if busy.Len() > 0 {
			return unapplied(GPUResult{Phase: v1alpha1.PhaseBlocked, Reason: v1alpha1.ReasonDeviceInUse,
				Message: fmt.Sprintf("in use, not destroyed: %s (allocated while draining)%s", strings.Join(sets.List(busy), ", "), r.holdersNote(ctx, busy))})
		}
	}
	entry := p.entry(StepSettingMIGMode)
	if p.cancelPending {
		mode, err := r.GPUs.SetMIGMode(ctx, p.index, p.spec.MIGEnabled)
		if err != nil {
			return fail(fmt.Errorf("cancelling the pending MIG mode change: %w", err))
		}
		if mode.Pending != p.spec.MIGEnabled {
			return fail(fmt.Errorf("cancelling the pending MIG mode change: the mode is still pending %v: %w", mode.Pending, gpu.ErrNVML))
		}
		// Journaled once done (the next steps' entries carry it): until
		// then the journal keeps the mode the agent set before.
		entry.ModeSet = ptr.To(p.spec.MIGEnabled)
	}
	if p.enableMIG {
		entry.ModeSet = ptr.To(true)
		if err := r.Journal.Record(entry); err != nil {
			return journalFailure(err)
		}
		mode, err := r.GPUs.SetMIGMode(ctx, p.index, true)
		if err != nil {
			return fail(fmt.Errorf("enabling MIG mode: %w", err))
		}
		if !mode.Current {
			r.noteRebootRequired(p, mode)
			return modePending(true, p.index, pendingWhy(mode))
		}
		if res, refused := r.refusedOnceEnabled(ctx, p); refused {
			return res
		}
	}
	entry.Step = StepDestroying
	for _, d := range p.plan.Destroy {
		if err := r.Journal.Record(entry); err != nil {
			return journalFailureAfter(err, entry.Done)
		}
		logger.V(1).Info("Destroying MIG device", "device", d.String())
		if err := r.GPUs.DestroyMIGDevice(ctx, p.index, d); err != nil && !errors.Is(err, gpu.ErrNotFound) {
			return fail(fmt.Errorf("destroying %s: %w", d, err))
		}
		entry.Done = append(entry.Done, d.String())
	}
	entry.Step = StepCreating
	for _, d := range p.plan.Create {
		if err := r.Journal.Record(entry); err != nil {
			return journalFailureAfter(err, entry.Done)
		}
		logger.V(1).Info("Creating MIG device", "device", d.String())
		if _, err := r.GPUs.CreateMIGDevice(ctx, p.index, d); err != nil {
			return fail(fmt.Errorf("creating %s: %w", d, err))
		}
		entry.Done = append(entry.Done, d.String())
	}
	if p.disableMIG {
		entry.Step = StepSettingMIGMode
		entry.ModeSet = ptr.To(false)
		if err := r.Journal.Record(entry); err != nil {
			return journalFailureAfter(err, entry.Done)
		}
		mode, err := r.GPUs.SetMIGMode(ctx, p.index, false)
		if err != nil {
			return fail(fmt.Errorf("disabling MIG mode: %w", err))
		}
		if mode.Current {
			r.noteRebootRequired(p, mode)
			return modePending(false, p.index, pendingWhy(mode))
		}
	}
	logger.Info("Repartitioned GPU", "layout", p.desired.String(), "destroyed", p.plan.Destroy.String(), "created", joinDevices(p.plan.Create))
	return GPUResult{Phase: v1alpha1.PhaseReady, Reason: v1alpha1.ReasonLayoutApplied, Message: "layout applied"}
}

// rebootNeeded says why a MIG mode change stays pending where the driver
// cannot reset the GPU (gpu.MIGMode.RebootRequired).
const rebootNeeded = "the driver cannot reset it here, as with a GPU passed through to a virtual machine: reboot the node (the virtual machine)"

// noteRebootRequired remembers that the mode p set stays pending until a
// reboot (Repartitioner.awaitingReboot), where SetMIGMode said so.
func (r *Repartitioner) noteRebootRequired(p *gpuPlan, mode gpu.MIGMode) {
	if !mode.RebootRequired {
		return
	}
	if r.awaitingReboot == nil {
		r.awaitingReboot = map[string]bool{}
	}
	r.awaitingReboot[p.state.GPU.UUID] = mode.Pending
}

// modePending is the result of GPU idx whose MIG mode change to enabled
// stays pending until a reset, for the reason why: Blocked, ResetRequired.
func modePending(enabled bool, idx int, why string) GPUResult {
	word := "disabled"
	if enabled {
		word = "enabled"
	}
	return GPUResult{Phase: v1alpha1.PhaseBlocked, Reason: v1alpha1.ReasonResetRequired,
		Message: fmt.Sprintf("MIG mode %s but pending until GPU %d is reset (%s)", word, idx, why)}
}

// pendingWhy says why a MIG mode change SetMIGMode made stays pending.
func pendingWhy(mode gpu.MIGMode) string {
	if mode.RebootRequired {
		return rebootNeeded
	}
	return "a process or another NVML client holds it; the agent sets the mode again once nothing does"
}

// refusedOnceEnabled checks the devices to create against the GPU's NVML
// profile table once MIG mode is on, where it could not be read before (MIG
// mode never on since the agent started): a device NVML would refuse turns
// MIG mode off again, as the GPU was, and the GPU is InvalidLayout, instead
// of failing a create on a GPU left in MIG mode without devices.
func (r *Repartitioner) refusedOnceEnabled(ctx context.Context, p *gpuPlan) (GPUResult, bool) {
	gpus, err := r.GPUs.GPUs(ctx)
	if _, others := gpu.GPUErrors(err); err != nil && !others {
		return GPUResult{}, false // the creates tell
	}
	// (Another GPU NVML cannot read leaves this one read.)
	i := slices.IndexFunc(gpus, func(g gpu.GPU) bool { return g.Index == p.index })
	if i < 0 {
		return GPUResult{}, false
	}
	refusal := nvmlRefuses(gpus[i], p.plan.Create)
	if refusal == nil {
		return GPUResult{}, false
	}
	msg := refusal.Error() + "; MIG mode is turned off again"
	if mode, err := r.GPUs.SetMIGMode(ctx, p.index, false); err != nil {
		msg = fmt.Sprintf("%s; turning MIG mode off again failed, the GPU is left in MIG mode without devices: %v", refusal, err)
	} else if mode.Current {
		msg = refusal.Error() + fmt.Sprintf("; MIG mode off is pending until GPU %d is reset", p.index)
	}
	klog.FromContext(ctx).Info("NVML refuses the layout; MIG mode was turned on for it", "gpu", p.index, "err", refusal)
	return GPUResult{Phase: v1alpha1.PhaseFailed, Reason: v1alpha1.ReasonInvalidLayout, Message: msg}, true
}
