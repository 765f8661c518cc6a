package agent

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"

	"github.com/miglayout/miglayout/api/v1alpha1"
	"github.com/miglayout/miglayout/pkg/mig"
)

// reportFailedPass shows in nml's status why the pass that failed with err
// (res: what it returned, nil or only the GPUs it changed; shown: the GPUs
// it showed in flight) left its GPUs as they are.
func (r *NodeReconciler) reportFailedPass(ctx context.Context, nml *v1alpha1.NodeMigLayout, res *SyncResult, err error, shown []int) {
	logger := klog.FromContext(ctx)
	// The GPUs the pass showed Draining or Repartitioning would stay
	// so while the pass fails again and again (an API server that
	// refuses the drain publication): they say why instead.
	// A GPU shown so by an earlier pass that failed too shows this
	// pass's error, quietly (no event).
	stopped := GPUResult{Phase: v1alpha1.PhasePending, Reason: ReasonPassFailed,
		Message: fmt.Sprintf("the pass stopped before this GPU's change was done; retrying: %v", err)}
	// A GPU the pass changed before it failed (in the republication
	// that follows the changes) says so: its retry finds it done.
	changed := GPUResult{Phase: v1alpha1.PhasePending, Reason: ReasonPassFailed,
		Message: fmt.Sprintf("%s; retrying: %v", changedButFailed, err)}
	specs := specKeys(nml)
	changedFor := r.rememberChanged(nml, res.changedGPUs())
	// madeFor reports whether GPU idx was changed to its spec by a pass
	// whose outcome is not published yet.
	madeFor := func(idx int) bool { return changedFor[idx] != "" && changedFor[idx] == specs[idx] }
	for _, idx := range slices.Compact(slices.Sorted(slices.Values(shown))) {
		got := stopped
		if res != nil && res.Changed.Has(idx) {
			got = changed
		}
		if perr := r.patchGPUPhase(ctx, specOf(nml), idx, got); perr != nil {
			logger.V(2).Info("Could not report the failed pass", "gpu", idx, "err", perr)
		}
		r.gpuEvent(nml, "Warning", EventPassFailed, "Repartition", idx, got.Message)
	}
	// A GPU whose change the pass did not reach (it failed before
	// showing any GPU: NVML could not be read, nor the allocations)
	// says so too, once, with an event; else nothing would show why
	// it does not change. One an earlier pass changed, whose status
	// write failed, says its change was made.
	for _, idx := range awaitingChange(nml) {
		if slices.Contains(shown, idx) {
			continue
		}
		got := stopped
		if madeFor(idx) {
			got = changed
		}
		if perr := r.patchGPUPhase(ctx, specOf(nml), idx, got); perr != nil {
			logger.V(2).Info("Could not report the failed pass", "gpu", idx, "err", perr)
			continue
		}
		r.gpuEvent(nml, "Warning", EventPassFailed, "Repartition", idx, got.Message)
	}
	for _, g := range nml.Status.GPUs {
		idx := int(g.Index)
		// A GPU an earlier failed pass changed keeps saying so, while
		// that change is still its spec.
		got := stopped
		if strings.HasPrefix(g.Message, changedButFailed) && madeFor(idx) {
			got = changed
		}
		if g.Phase != v1alpha1.PhasePending || g.Reason != ReasonPassFailed || slices.Contains(shown, idx) || g.Message == truncate(got.Message, 1024) {
			continue
		}
		if perr := r.patchGPUPhase(ctx, specOf(nml), idx, got); perr != nil {
			logger.V(2).Info("Could not report the failed pass", "gpu", idx, "err", perr)
		}
	}
}

// rememberChanged records that the GPUs in changed were changed to their
// spec in nml by a pass whose outcome is not published (it failed, or its
// status write did), and returns what is recorded by GPU index (specKey).
// A pass whose status is written forgets it all (NodeReconciler.changedFor).
func (r *NodeReconciler) rememberChanged(nml *v1alpha1.NodeMigLayout, changed sets.Set[int]) map[int]string {
	specs := specKeys(nml)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.changedFor == nil {
		r.changedFor = map[int]string{}
	}
	for idx := range changed {
		r.changedFor[idx] = specs[idx]
	}
	return maps.Clone(r.changedFor)
}

// specKeys returns what nml's spec asks of each GPU, by index (specKey).
func specKeys(nml *v1alpha1.NodeMigLayout) map[int]string {
	specs := map[int]string{}
	for _, s := range nml.Spec.GPUs {
		specs[int(s.Index)] = specKey(s)
	}
	return specs
}

// awaitingChange returns the GPUs of nml's spec whose status row is
// missing, or shows a layout (or MIG mode) other than the spec's while
// Ready, in flight or Pending for another reason than PassFailed: not
// Blocked or Failed, whose reason stands.
func awaitingChange(nml *v1alpha1.NodeMigLayout) []int {
	var out []int
	for _, s := range nml.Spec.GPUs {
		i := slices.IndexFunc(nml.Status.GPUs, func(g v1alpha1.GPUStatus) bool { return g.Index == s.Index })
		if i < 0 {
			out = append(out, int(s.Index))
			continue
		}
		g := nml.Status.GPUs[i]
		switch {
		case g.Phase == v1alpha1.PhaseBlocked, g.Phase == v1alpha1.PhaseFailed,
			g.Phase == v1alpha1.PhasePending && g.Reason == ReasonPassFailed:
			// Its own reason stands (a device in use, an NVML error, a
			// GPU unreadable): the controller and the Auto planner act
			// on it, and the pass's failure changes none of it.
			continue
		case g.MIGEnabled == s.MIGEnabled && (!s.MIGEnabled || sameLayout(g.Layout, s.Layout)):
			continue
		}
		out = append(out, int(s.Index))
	}
	return out
}

// specKey is what a GPU spec asks for, as text: MIG mode and layout.
func specKey(s v1alpha1.GPUSpec) string {
	if !s.MIGEnabled {
		return "-"
	}
	return "mig:" + s.Layout
}

// sameLayout reports whether two layout texts name the same devices, in
// whatever order; texts that do not parse are compared as they are.
func sameLayout(a, b string) bool {
	la, errA := mig.ParseLayout(a)
	lb, errB := mig.ParseLayout(b)
	if errA != nil || errB != nil {
		return a == b
	}
	return la.Equal(lb)
}

// changedButFailed begins the status message of a GPU that a pass changed
// before it failed (in the republication or the reads after the changes).
const changedButFailed = "this GPU's change was made, but the pass failed after it, before its outcome was published"
