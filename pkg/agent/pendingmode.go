package agent

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// pendingRemoves returns the published names of g's devices that its
// pending MIG mode change removes at the next reset: the whole GPU under a
// pending enable, its MIG devices under a pending disable; none where no
// change is pending.
func (r *Repartitioner) pendingRemoves(g *GPUState) []string {
	mode := g.GPU.MIGMode
	switch {
	case mode.Current == mode.Pending:
		return nil
	case !mode.Current:
		return []string{r.Inventory.DeviceName(g.GPU, nil)}
	}
	out := make([]string, 0, len(g.Devices))
	for i := range g.Devices {
		out = append(out, r.Inventory.DeviceName(g.GPU, &g.Devices[i]))
	}
	return out
}

// cancelModesUnderClaims cancels a MIG mode change a spec asks for that is
// pending (an Ampere GPU was held when the mode was set) while a device
// the change removes is allocated to a ResourceClaim or prepared for one
// (a claim that tolerates the drain taint, or an allocation made before
// the drain was served): armed, the change would take the claim's device
// away at the next reset, a reboot included, and its pod could not start
// again. The mode is set back to the current one (journaled, ModeSet), the
// GPU waits for the claim as any in-use device does (Blocked, DeviceInUse),
// and the mode is set again once the device is released. Processes outside
// any claim do not cancel it: nvml.h asks to idle the GPU and set the mode
// again, which the agent does. It returns the GPUs whose change it
// cancelled (their in-use result says so); a GPU whose cancel fails is in
// failed; err only when allocations cannot be read or the GPU lock cannot
// be taken.
func (r *Repartitioner) cancelModesUnderClaims(ctx context.Context, obs []GPUState, desired []v1alpha1.GPUSpec, failed map[int]error) (sets.Set[int], error) {
	type candidate struct {
		g      *GPUState
		remove []string
	}
	var cands []candidate
	for _, spec := range desired {
		g := findGPU(obs, int(spec.Index))
		if g == nil || !forGPU(spec, g) || g.GPU.MIGMode.Current == g.GPU.MIGMode.Pending || g.GPU.MIGMode.Pending != spec.MIGEnabled {
			continue // nothing pending, or a change the spec does not ask for (planGPU cancels it)
		}
		if _, bad := failed[g.GPU.Index]; bad {
			continue
		}
		cands = append(cands, candidate{g, r.pendingRemoves(g)})
	}
	if len(cands) == 0 {
		return nil, nil
	}
	// Allocations the binding gate will refuse (the device is draining,
	// which a device a pending change removes is) do not count: the
	// scheduler never binds a pod to them.
	claimed, err := r.guardedAllocations(ctx)
	if err != nil {
		return nil, err
	}
	claimed = claimed.Union(r.preparedNames(obs))
	// An allocation under a name the agent does not publish (another
	// publisher of the driver and pool) may hold any device of its GPU.
	unknown := r.unknownIn(claimed, obs)
	logger := klog.FromContext(ctx)
	cancelled := sets.New[int]()
	for _, c := range cands {
		busy := sets.List(claimed.Intersection(sets.New(c.remove...)).Insert(unknown.on(c.g.GPU.Index)...))
		if len(busy) == 0 {
			continue
		}
		idx, current := c.g.GPU.Index, c.g.GPU.MIGMode.Current
		logger.Info("Cancelling the pending MIG mode change: a claim holds a device it removes", "gpu", idx, "current", current, "devices", busy)
		end, err := r.Locks.BeginReconfigure(ctx, idx)
		if err != nil {
			return cancelled, err
		}
		_, err = r.GPUs.SetMIGMode(ctx, idx, current)
		end()
		if err != nil {
			failed[idx] = errors.Join(failed[idx], fmt.Errorf("cancelling the pending MIG mode change, which would remove %s at the next reset: %w", strings.Join(busy, ", "), err))
			continue
		}
		// Journaled once done: until then the journal keeps the mode the
		// agent set, which is still its to cancel.
		if err := r.Journal.Record(JournalEntry{GPU: idx, UUID: c.g.GPU.UUID, Step: StepSettingMIGMode, ModeSet: ptr.To(current)}); err != nil {
			logger.Error(err, "Recording the cancelled MIG mode change in the journal", "gpu", idx)
		}
		cancelled.Insert(idx)
	}
	return cancelled, nil
}

// underClaimsNote is the note a GPU's in-use result gets after its pending
// MIG mode change was cancelled for the claims holding devices.
func underClaimsNote(cancelled sets.Set[int], idx int) string {
	if !cancelled.Has(idx) {
		return ""
	}
	return "; the pending MIG mode change was cancelled so that a GPU reset does not take them from their claims, and is set again once they are released"
}
