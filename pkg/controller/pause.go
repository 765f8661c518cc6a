package controller

import (
	"context"
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// dropForPause is why dropUnstarted dropped a change of a paused MigLayout.
const dropForPause = "paused (spec.paused)"

// msgPausedNode starts the row message of a Static node whose rules ask for
// a layout the pause keeps from it (pauseHold).
const msgPausedNode = "paused (spec.paused): the rules' layout is applied once the MigLayout is resumed"

// syncPausedNode is syncNode for a MigLayout with spec.paused set: it starts
// no change. The node's spec keeps the changes its agent has started and
// has every other GPU set back to the layout it holds (dropUnstarted); a
// NodeMigLayout is still created (without GPUs, which changes nothing) or
// adopted. It returns the object to judge the node against (in Static
// mode, with the spec the rules ask for; in Auto mode, as written), the
// problems of its GPUs, whether the pause keeps the rules' layout from the
// node (held: the node is Pending, pauseHold), and whether to wait and look
// again.
func (r *Reconciler) syncPausedNode(ctx context.Context, ml *v1alpha1.MigLayout, node string, existing *v1alpha1.NodeMigLayout) (judged *v1alpha1.NodeMigLayout, problems []Problem, held, wait bool, err error) {
	if existing == nil || existing.DeletionTimestamp != nil {
		judged, problems, wait, err = r.syncNode(ctx, ml, node, existing, nil)
		return judged, problems, false, wait, err
	}
	adopting := !metav1.IsControlledBy(existing, ml)
	written := dropUnstarted(existing, dropForPause)
	want := written
	if ml.Spec.Mode != v1alpha1.ModeAuto {
		want, problems = DesiredGPUs(r.catalog(), ml.Spec.Rules, existing.Status.GPUs, existing.Spec.GPUs)
	}
	// The spec stays its writer's: resumed, the mode that did not write it
	// takes it over as it does after a switch (syncNode). One adopted is
	// the mode's own, as syncNode writes it.
	writtenBy := specWrittenBy(existing, ml)
	if adopting {
		writtenBy = modeOf(ml)
	}
	next := existing.DeepCopy()
	next.Spec = v1alpha1.NodeMigLayoutSpec{MigLayout: ml.Name, GPUs: written}
	metav1.SetMetaDataAnnotation(&next.ObjectMeta, v1alpha1.AnnotationSpecWrittenBy, string(writtenBy))
	if adopting {
		if err := r.takeOver(ml, next); err != nil {
			return next, problems, false, false, err
		}
	}
	judged = next.DeepCopy()
	judged.Spec.GPUs = want
	held = heldByPause(written, want, existing.Status.GPUs)
	if !adopting && equality.Semantic.DeepEqual(existing.Spec, next.Spec) && existing.Annotations[v1alpha1.AnnotationSpecWrittenBy] == string(writtenBy) {
		return judged, problems, held, false, nil
	}
	if !sameLayouts(existing.Spec.GPUs, written) {
		// A change is dropped only for the MigLayout as it is now: the
		// cache may show it paused still while it has been resumed and
		// the planner, reading it live, has planned the node again.
		if switched, err := r.switchedSince(ctx, ml); err != nil || switched {
			if ml.Spec.Mode == v1alpha1.ModeAuto {
				judged = existing.DeepCopy() // nothing dropped: judged as it is
			}
			return judged, problems, held, err == nil, err
		}
	}
	// The drop holds only on the status it was judged on: the agent may
	// have started a change meanwhile.
	stillHolds := func(live *v1alpha1.NodeMigLayout) bool {
		return equality.Semantic.DeepEqual(dropUnstarted(live, dropForPause), written)
	}
	if written, err := r.patchSpec(ctx, existing, next, stillHolds); err != nil {
		return judged, problems, held, false, fmt.Errorf("patching the spec of paused NodeMigLayout %s: %w", node, err)
	} else if !written {
		return judged, problems, held, false, nil
	}
	op := "update"
	if adopting {
		op = "adopt"
	}
	writesMetric.WithLabelValues(op).Inc()
	klog.FromContext(ctx).V(2).Info("Wrote the spec of a paused MigLayout's node", "node", node, "operation", op, "gpus", len(written))
	return judged, problems, held, false, nil
}

// heldByPause reports whether want, the GPU specs the rules ask for, gives
// some GPU a MIG mode or layout other than written, the spec the pause
// keeps, does (or, for a GPU written does not list, than the GPU reported in
// status holds): a GPU the rules leave out is left as it is, paused or not.
func heldByPause(written, want []v1alpha1.GPUSpec, status []v1alpha1.GPUStatus) bool {
	return slices.ContainsFunc(want, func(w v1alpha1.GPUSpec) bool {
		if i := slices.IndexFunc(written, func(s v1alpha1.GPUSpec) bool { return s.Index == w.Index }); i >= 0 {
			return written[i].MIGEnabled != w.MIGEnabled || written[i].Layout != w.Layout
		}
		j := slices.IndexFunc(status, func(g v1alpha1.GPUStatus) bool { return g.Index == w.Index })
		return j < 0 || !holds(w, status[j])
	})
}

// pauseHold marks st, the state of a node that a pause keeps from the
// layout its rules ask for, as paused: Pending and not Ready, Progressing
// only while a change its agent started goes on, with the note first in
// its row's message.
func pauseHold(st NodeState) NodeState {
	st.Ready, st.Paused = false, true
	st.Progressing = st.Progressing && st.Changing
	if st.Row.Phase == v1alpha1.PhaseReady || st.Row.Phase == "" {
		st.Row.Phase = v1alpha1.PhasePending
	}
	msg := msgPausedNode
	if st.Row.Message != "" {
		msg += "; " + st.Row.Message
	}
	st.Row.Message = truncate(msg, maxRowMessage)
	return st
}
