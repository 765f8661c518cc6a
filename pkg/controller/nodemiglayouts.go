package controller

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// syncNodes writes the NodeMigLayout of every node the MigLayout manages
// (selected, not in conflict, Static mode), deletes those of nodes it no
// longer selects, and evaluates every selected node, its agent's heartbeat
// included.
func (r *Reconciler) syncNodes(ctx context.Context, ml *v1alpha1.MigLayout, sel Selection, in inputs) ([]NodeState, ctrl.Result, []error) {
	var states []NodeState
	var result ctrl.Result
	var errs []error
	var recheck, failingDue time.Time
	now := r.now()
	wasLost := LostInStatus(ml)
	// Every selected node counts toward maxNodesChanging while it changes,
	// whoever wrote its spec: one in conflict carries on, one adopted may
	// be mid-change.
	var selected []*v1alpha1.NodeMigLayout
	for _, node := range sel.Nodes {
		if nml := in.nodeMigLayouts[node]; nml != nil {
			selected = append(selected, nml)
		}
	}
	// Each agent's health, read once: the gate gives a node whose agent is
	// lost no slot, and each node's row shows it.
	health := make(map[string]AgentHealth, len(selected))
	for _, nml := range selected {
		health[nml.Name] = r.AgentLeases.Health(nml.Name, in.leases[nml.Name], AgentReported(nml), wasLost.Has(nml.Name))
	}
	var unseen map[string]bool
	var unseenExpire time.Time
	// Kept while paused (no gate then): a write the cache does not show
	// yet still counts once resumed.
	if ml.Spec.Mode != v1alpha1.ModeAuto && ml.Spec.MaxNodesChanging != nil {
		var reader client.Reader = r.Client
		if r.APIReader != nil {
			reader = r.APIReader
		}
		if err := r.rollouts.resolveLive(ctx, reader, ml.UID); err != nil {
			// Its nodes count as changing until the cache shows their
			// writes (unseen), or until rolloutExpectTTL.
			errs = append(errs, err)
		}
		unseen, unseenExpire = r.rollouts.unseen(ml.UID, in.nodeMigLayouts, now)
	} else {
		r.rollouts.forget(ml.UID)
	}
	lostAgents := sets.New[string]()
	for node, h := range health {
		if h.Lost {
			lostAgents.Insert(node)
		}
	}
	gate := newRolloutGate(ml, selected, unseen, lostAgents)
	if gate != nil {
		for node, h := range health {
			if h.Lost || h.Unconfirmed {
				if gate.lost == nil {
					gate.lost = map[string]string{}
				}
				gate.lost[node] = lostNote
				if h.Unconfirmed {
					gate.lost[node] = unconfirmedNote
				}
			}
		}
	}
	for _, node := range sel.Nodes {
		switch {
		case sel.Conflicted(node):
			if err := r.dropUnstartedOwned(ctx, ml, in.nodeMigLayouts[node], dropForConflict); err != nil {
				errs = append(errs, err)
			}
			st := ConflictNode(node, conflictNote(sel, node))
			// A change its agent has begun is judged as on a node
			// without conflict (retries, failing passes).
			nml := in.nodeMigLayouts[node]
			if nml == nil || !metav1.IsControlledBy(nml, ml) {
				r.failing.forget(node, ml.Name)
				states = append(states, st)
				continue
			}
			failing := r.failing.observe(ml.Name, node, nml, now)
			if judged := r.failing.retriesAsStuck(ml.Name, node, nml); changeBegun(judged) || stoppingBegun(judged) {
				st = carriedInConflict(st, EvaluateNode(node, judged, nil, health[node]))
				// Its agent's Lease running out sends no event: the
				// pass that judges the agent lost is asked for, as on
				// a node without conflict.
				recheck = earliest(recheck, health[node].Recheck)
				var due time.Time
				st, due = withFailingPasses(st, judged, failing, now)
				failingDue = earliest(failingDue, due)
			}
			states = append(states, st)
			continue
		}
		var nml *v1alpha1.NodeMigLayout
		var problems []Problem
		var wait, paused bool
		var err error
		if ml.Spec.Paused {
			nml, problems, paused, wait, err = r.syncPausedNode(ctx, ml, node, in.nodeMigLayouts[node])
		} else {
			nml, problems, wait, err = r.syncNode(ctx, ml, node, in.nodeMigLayouts[node], gate)
		}
		if err != nil {
			errs = append(errs, err)
		}
		if wait {
			result.RequeueAfter = waitForDeletion
		}
		var agent AgentHealth
		if nml != nil {
			h, known := health[node]
			if !known { // made in this pass: no GPU reported yet
				h = r.AgentLeases.Health(node, in.leases[node], AgentReported(nml), wasLost.Has(node))
			}
			agent = h
		}
		recheck = earliest(recheck, agent.Recheck)
		failing := r.failing.observe(ml.Name, node, nml, now)
		judged := r.failing.retriesAsStuck(ml.Name, node, nml)
		st := EvaluateNode(node, judged, problems, agent)
		st = withUntouchedGPUs(st, judged)
		if gate != nil && gate.held[node] {
			st = gate.hold(st)
		}
		if paused {
			st = pauseHold(st)
		}
		var due time.Time
		st, due = withFailingPasses(st, judged, failing, now)
		failingDue = earliest(failingDue, due)
		if err != nil && writeRefused(err) {
			st = withWriteError(st, err)
		}
		states = append(states, st)
	}
	// A Lease's expiry comes with no event: look again when the first of
	// this MigLayout's live agents would be lost, or a lost one be back.
	result.RequeueAfter = sooner(result.RequeueAfter, r.AgentLeases.requeueAt(recheck))
	// Nor does a GPU's passes failing long enough (withFailingPasses).
	if !failingDue.IsZero() {
		result.RequeueAfter = sooner(result.RequeueAfter, failingDue.Sub(now)+time.Second)
	}
	// Nor the end of a slot held for a write the cache never showed (the
	// object deleted or its spec written by someone else meanwhile): the
	// nodes held for it take their turn then.
	if gate != nil && len(gate.held) > 0 && !unseenExpire.IsZero() {
		result.RequeueAfter = sooner(result.RequeueAfter, unseenExpire.Sub(now)+time.Second)
	}
	errs = append(errs, r.release(ctx, ml, sel, in)...)
	return states, result, errs
}

// syncNode creates or updates the NodeMigLayout of one node. It returns the
// object as written (where the write fails, as it should be, with the
// status read), the problems of its GPUs, and whether to wait and look
// again (the object is being deleted, or exists but is not in the cache, or
// the MigLayout changed since the cache's copy: switchedSince).
func (r *Reconciler) syncNode(ctx context.Context, ml *v1alpha1.MigLayout, node string, existing *v1alpha1.NodeMigLayout, gate *rolloutGate) (*v1alpha1.NodeMigLayout, []Problem, bool, error) {
	logger := klog.FromContext(ctx)
	if existing == nil {
		// The inventory is unknown until the agent reports: no GPU yet.
		nml := &v1alpha1.NodeMigLayout{
			ObjectMeta: metav1.ObjectMeta{Name: node, Annotations: map[string]string{v1alpha1.AnnotationSpecWrittenBy: string(modeOf(ml))}},
			Spec:       v1alpha1.NodeMigLayoutSpec{MigLayout: ml.Name},
		}
		if err := controllerutil.SetControllerReference(ml, nml, r.Scheme); err != nil {
			return nil, nil, false, fmt.Errorf("setting the owner of NodeMigLayout %s: %w", node, err)
		}
		if err := r.Client.Create(ctx, nml); apierrors.IsAlreadyExists(err) {
			// The cache lags behind. Its events come back here only if this
			// MigLayout owns the object (another one may, releasing it):
			// look again soon.
			logger.V(2).Info("NodeMigLayout exists but is not in the cache yet", "node", node)
			return nil, nil, true, nil
		} else if err != nil {
			return nil, nil, false, fmt.Errorf("creating NodeMigLayout %s: %w", node, err)
		}
		writesMetric.WithLabelValues("create").Inc()
		logger.V(2).Info("Created NodeMigLayout", "node", node)
		return nml, nil, false, nil
	}
	if existing.DeletionTimestamp != nil {
		return existing, nil, true, nil
	}
	adopting := !metav1.IsControlledBy(existing, ml)
	writtenBy := specWrittenBy(existing, ml)
	var stillHolds func(live *v1alpha1.NodeMigLayout) bool
	// In Auto mode the planner (AutoPlanner) writes spec.gpus; this
	// reconciler only owns the object, and drops the changes not started
	// yet of a spec the planner did not write (the MigLayout was switched
	// to Auto, or another MigLayout wrote it): nothing asks for them now.
	desired, problems := existing.Spec.GPUs, []Problem(nil)
	if ml.Spec.Mode != v1alpha1.ModeAuto {
		desired, problems = DesiredGPUs(r.catalog(), ml.Spec.Rules, existing.Status.GPUs, existing.Spec.GPUs)
		writtenBy = v1alpha1.ModeStatic
	} else if adopting || writtenBy != v1alpha1.ModeAuto {
		desired, writtenBy = keptForAuto(existing, dropUnstarted(existing, dropForAuto)), v1alpha1.ModeAuto
		// The drop holds only on the status it was judged on: a retry
		// after a conflict writes it only where the live status gives
		// the same (the agent may have started a change meanwhile).
		stillHolds = func(live *v1alpha1.NodeMigLayout) bool {
			return equality.Semantic.DeepEqual(keptForAuto(live, dropUnstarted(live, dropForAuto)), desired)
		}
	}
	if ml.Spec.Mode == v1alpha1.ModeAuto {
		desired = asItIsForRenumbered(existing, desired)
	}
	if gate != nil {
		desired = keepUnreadable(existing, desired)
	}
	next := existing.DeepCopy()
	next.Spec = v1alpha1.NodeMigLayoutSpec{MigLayout: ml.Name, GPUs: desired}
	metav1.SetMetaDataAnnotation(&next.ObjectMeta, v1alpha1.AnnotationSpecWrittenBy, string(writtenBy))
	// A node held back by maxNodesChanging keeps the spec it has (its
	// owner may change) and is judged against the one it waits for.
	var waitsFor *v1alpha1.NodeMigLayout
	judged := startedOnly(ml, existing)
	if gate != nil && gate.overBound[node] {
		judged = begunOnly(judged)
	}
	if !gate.admit(judged, desired) {
		waitsFor = next.DeepCopy()
		next.Spec.GPUs = judged.Spec.GPUs
		if gate.overBound[node] && stillHolds == nil {
			stillHolds = func(live *v1alpha1.NodeMigLayout) bool {
				return equality.Semantic.DeepEqual(dropUnstarted(live, dropForBound), judged.Spec.GPUs)
			}
		} else if adopting && stillHolds == nil {
			// The previous owner's changes not started are dropped,
			// only while the live status gives the same.
			stillHolds = func(live *v1alpha1.NodeMigLayout) bool {
				return equality.Semantic.DeepEqual(dropUnstarted(live, dropForAdoption), judged.Spec.GPUs)
			}
		}
	}
	// The write is guarded by the resourceVersion read (patchSpec): the
	// Auto planner writes spec.gpus too.
	op := "update"
	if adopting {
		op = "adopt"
		if err := r.takeOver(ml, next); err != nil {
			return next, problems, false, err
		}
	} else if ann, ok := existing.Annotations[v1alpha1.AnnotationSpecWrittenBy]; equality.Semantic.DeepEqual(existing.Spec, next.Spec) && ok && ann == string(writtenBy) {
		// An object without the annotation (an earlier release's) gets it
		// in one write: a switch to Auto mode then knows its spec for
		// Static's.
		return cmpOr(waitsFor, existing), problems, false, nil
	}
	if writtenBy == v1alpha1.ModeStatic && ((!adopting && specWrittenBy(existing, ml) == v1alpha1.ModeAuto) || !sameLayouts(existing.Spec.GPUs, next.Spec.GPUs)) {
		// The cache may show this MigLayout Static still while the
		// planner has planned the node for its switch to Auto, or
		// unpaused while it has just been paused, or with rules since
		// edited: a write that starts a change, taking the node over
		// or not, is made only for the MigLayout as it is now.
		if switched, err := r.switchedSince(ctx, ml); err != nil || switched {
			return existing, problems, err == nil, err
		}
	}
	// A write that gives the node a spec its GPUs do not hold yet (an
	// adoption of the previous owner's unstarted layouts included) counts
	// as changing until the cache shows it (rolloutExpectations); one that
	// holds the node (waitsFor: its unstarted changes dropped), asks for
	// what its GPUs hold already (a node partitioned before the MigLayout)
	// or changes only reasons or UUIDs does not: counted, it would take a
	// slot from a node within the bound while the cache lags.
	target := judged.DeepCopy()
	target.Spec.GPUs = next.Spec.GPUs
	moves := waitsFor == nil && changing(target)
	written, err := r.patchSpec(ctx, existing, next, stillHolds)
	if err != nil {
		if gate != nil && moves && writeMayHaveApplied(err) {
			// Counted as changing until the cache shows the write,
			// or for rolloutExpectTTL where it never does.
			r.rollouts.expectUnsure(ml.UID, node, next.Spec.GPUs, r.now())
		} else if writeRefused(err) {
			// Refused, not a conflict (another writer's spec, which
			// the next pass counts).
			gate.release(node)
		}
		// The node is judged against the spec it should hold: not Ready
		// for this generation on the strength of the old one.
		return cmpOr(waitsFor, next), problems, false, fmt.Errorf("patching the spec of NodeMigLayout %s: %w", node, err)
	}
	if !written {
		return cmpOr(waitsFor, next), problems, false, nil
	}
	writesMetric.WithLabelValues(op).Inc()
	if gate != nil && moves {
		r.rollouts.expect(ml.UID, node, next.Spec.GPUs, next.UID, next.Generation, r.now())
	}
	logger.V(2).Info("Wrote NodeMigLayout spec", "node", node, "operation", op, "gpus", len(next.Spec.GPUs), "problems", len(problems))
	return cmpOr(waitsFor, next), problems, false, nil
}

// takeOver makes ml the controller of next in place of any other.
func (r *Reconciler) takeOver(ml *v1alpha1.MigLayout, next *v1alpha1.NodeMigLayout) error {
	next.OwnerReferences = slices.DeleteFunc(next.OwnerReferences, func(o metav1.OwnerReference) bool {
		return o.Controller != nil && *o.Controller
	})
	if err := controllerutil.SetControllerReference(ml, next, r.Scheme); err != nil {
		return fmt.Errorf("setting the owner of NodeMigLayout %s: %w", next.Name, err)
	}
	return nil
}

// release deletes the NodeMigLayouts this MigLayout controls on nodes it no
// longer selects (label changed, node deleted).
func (r *Reconciler) release(ctx context.Context, ml *v1alpha1.MigLayout, sel Selection, in inputs) []error {
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(in.nodeMigLayouts)) {
		nml := in.nodeMigLayouts[name]
		if !metav1.IsControlledBy(nml, ml) || nml.DeletionTimestamp != nil {
			continue
		}
		if _, selected := slices.BinarySearch(sel.Nodes, name); selected {
			continue
		}
		// The preconditions make sure that what goes is what the cache
		// showed: not an object another MigLayout adopted meanwhile.
		uid, rv := nml.UID, nml.ResourceVersion
		err := r.Client.Delete(ctx, nml, client.Preconditions{UID: &uid, ResourceVersion: &rv})
		if err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("deleting NodeMigLayout %s of a node no longer selected: %w", name, err))
			continue
		}
		writesMetric.WithLabelValues("delete").Inc()
		r.AgentLeases.Forget(name)
		r.failing.forget(name, ml.Name)
		klog.FromContext(ctx).V(2).Info("Deleted NodeMigLayout of a node no longer selected", "node", name)
	}
	return errs
}

func conflictNote(sel Selection, node string) string {
	var others, holders []string
	for _, other := range slices.Sorted(maps.Keys(sel.Conflicts)) {
		if _, found := slices.BinarySearch(sel.Conflicts[other], node); found {
			if sel.InvalidHolders[other] {
				holders = append(holders, fmt.Sprintf("%q", other))
			} else {
				others = append(others, fmt.Sprintf("%q", other))
			}
		}
	}
	var parts []string
	if len(others) > 0 {
		parts = append(parts, "also selected by MigLayout "+joinBounded(others, 5))
	}
	if len(holders) > 0 {
		parts = append(parts, "held by MigLayout "+joinBounded(holders, 5)+", whose node selector is invalid")
	}
	return strings.Join(parts, "; ") + msgLeftAsItIs
}

// msgLeftAsItIs ends the message of a node in conflict.
const msgLeftAsItIs = "; the node is left as it is"

// cmpOr is a where it is not nil, else b.
func cmpOr(a, b *v1alpha1.NodeMigLayout) *v1alpha1.NodeMigLayout {
	if a != nil {
		return a
	}
	return b
}

// modeOf is ml's mode, Static where it sets none.
func modeOf(ml *v1alpha1.MigLayout) v1alpha1.LayoutMode {
	if ml.Spec.Mode == v1alpha1.ModeAuto {
		return v1alpha1.ModeAuto
	}
	return v1alpha1.ModeStatic
}

// specWrittenBy is the mode whose writer last wrote nml's spec
// (v1alpha1.AnnotationSpecWrittenBy); without the annotation, the mode of
// ml, where ml controls nml, else Static.
func specWrittenBy(nml *v1alpha1.NodeMigLayout, ml *v1alpha1.MigLayout) v1alpha1.LayoutMode {
	switch m := v1alpha1.LayoutMode(nml.Annotations[v1alpha1.AnnotationSpecWrittenBy]); m {
	case v1alpha1.ModeStatic, v1alpha1.ModeAuto:
		return m
	}
	if metav1.IsControlledBy(nml, ml) {
		return modeOf(ml)
	}
	return v1alpha1.ModeStatic
}

// Why dropUnstarted dropped a change, before "the change to ... was
// dropped before it started".
const (
	dropForAuto     = "Auto mode"
	dropForConflict = "another MigLayout selects the node too"
	dropForAdoption = "taken over by another MigLayout"
)

// startedOnly is nml as maxNodesChanging judges a node this MigLayout (ml)
// does not control yet (another's, being taken over, or in conflict):
// with the changes its agent has not started dropped (dropUnstarted),
// since nothing asks for them once the node is taken over. Counted as
// changing on the other owner's spec alone, any number of such nodes would
// take ml's new layout at once, past the bound. nml itself where ml
// controls it.
func startedOnly(ml *v1alpha1.MigLayout, nml *v1alpha1.NodeMigLayout) *v1alpha1.NodeMigLayout {
	if nml == nil || metav1.IsControlledBy(nml, ml) {
		return nml
	}
	out := nml.DeepCopy()
	out.Spec.GPUs = dropUnstarted(nml, dropForAdoption)
	return out
}

// changeBegun reports whether nml's spec holds a change its agent has
// begun (what dropUnstarted keeps): a GPU the spec lists that is reported
// neither Ready nor Draining, and does not hold its spec.
func changeBegun(nml *v1alpha1.NodeMigLayout) bool {
	for _, sp := range nml.Spec.GPUs {
		for _, g := range nml.Status.GPUs {
			if g.Index == sp.Index && g.Phase != v1alpha1.PhaseReady && g.Phase != v1alpha1.PhaseDraining && (!holds(sp, g) || g.Phase != v1alpha1.PhasePending) {
				return true
			}
		}
	}
	return false
}

// heldChanging are the nodes whose NodeMigLayout ml controls that are on
// their way to a change written before (onTheWay), judged as selected
// nodes are (syncNodes): by their agent's heartbeat, a GPU retried after
// it was Blocked or Failed judged as it was (retriesAsStuck), its passes
// failing (withFailingPasses), paused (pauseHold); and only a change begun
// where ml is paused or another MigLayout selects the node too (of sel's
// conflicts), since one not begun is dropped there. Where ml's selector
// does not parse, nothing new is written to those nodes, but their agents
// go on with what was. after is when to judge them again though no event
// comes (a Lease running out, passes failing long enough), 0 for never.
func (r *Reconciler) heldChanging(ml *v1alpha1.MigLayout, sel Selection, in inputs) (nodes []string, after time.Duration) {
	now := r.now()
	wasLost := LostInStatus(ml)
	var recheck, failingDue time.Time
	for _, name := range slices.Sorted(maps.Keys(in.nodeMigLayouts)) {
		nml := in.nodeMigLayouts[name]
		if _, ok := in.nodes[name]; !ok || !metav1.IsControlledBy(nml, ml) {
			continue
		}
		// Observed first, as syncNodes does: a GPU Ready since forgets
		// the Blocked row it was.
		failing := r.failing.observe(ml.Name, name, nml, now)
		if (ml.Spec.Paused || sel.Conflicted(name)) && !changeBegun(nml) && !stoppingBegun(nml) || specHeld(nml) {
			continue // no change to carry out, nothing to judge again
		}
		health := r.AgentLeases.Health(name, in.leases[name], AgentReported(nml), wasLost.Has(name))
		recheck = earliest(recheck, health.Recheck)
		judged := r.failing.retriesAsStuck(ml.Name, name, nml)
		st := EvaluateNode(name, judged, nil, health)
		if ml.Spec.Paused {
			st = pauseHold(st)
		}
		var due time.Time
		st, due = withFailingPasses(st, judged, failing, now)
		failingDue = earliest(failingDue, due)
		if onTheWay(st) {
			nodes = append(nodes, name)
		}
	}
	after = r.AgentLeases.requeueAt(recheck)
	if !failingDue.IsZero() {
		after = sooner(after, failingDue.Sub(now)+time.Second)
	}
	return nodes, after
}

// stoppingBegun reports whether a GPU nml's spec no longer lists is
// stopping a change begun (stoppingChange; repartitioning, where a
// Draining one stops before any device is destroyed): kept, as
// onlyUnstarted keeps it, where changes not begun are dropped.
func stoppingBegun(nml *v1alpha1.NodeMigLayout) bool {
	return slices.ContainsFunc(nml.Status.GPUs, func(g v1alpha1.GPUStatus) bool {
		return stoppingChange(nml, g) && g.Phase != v1alpha1.PhaseDraining
	})
}

// specHeld reports whether every GPU nml's spec lists is reported Ready
// holding its entry, and no GPU it no longer lists is stopping a change
// (stoppingChange): no change is left to carry out.
func specHeld(nml *v1alpha1.NodeMigLayout) bool {
	if slices.ContainsFunc(nml.Status.GPUs, func(g v1alpha1.GPUStatus) bool { return stoppingChange(nml, g) }) {
		return false
	}
	for _, sp := range nml.Spec.GPUs {
		i := slices.IndexFunc(nml.Status.GPUs, func(g v1alpha1.GPUStatus) bool { return g.Index == sp.Index })
		if i < 0 || nml.Status.GPUs[i].Phase != v1alpha1.PhaseReady || !holds(sp, nml.Status.GPUs[i]) {
			return false
		}
	}
	return true
}

// carriedInConflict is the state of a node in conflict (conflict, its
// ConflictNode state) that holds a change this MigLayout wrote and its
// agent has begun (evaluated: EvaluateNode of its NodeMigLayout): the
// agent carries it out, so the node is judged by it (Progressing, a GPU
// Blocked or Failed in Degraded and its events), its GPU rows shown, and
// its row's message says the conflict first. Once the change is done the
// node is a conflict like any other.
func carriedInConflict(conflict, evaluated NodeState) NodeState {
	msg := strings.TrimSuffix(conflict.Row.Message, msgLeftAsItIs) + "; no change is started here, the one begun is carried out"
	if evaluated.Row.Message != "" {
		msg += ": " + evaluated.Row.Message
	}
	evaluated.Row.Message = truncate(msg, maxRowMessage)
	return evaluated
}

// dropUnstartedOwned drops the changes not started yet (dropUnstarted,
// why) of a NodeMigLayout ml owns whose node it leaves as it is, a change
// the agent has begun excepted: one another MigLayout selects too
// (dropForConflict), until one MigLayout alone selects it, whose rules then
// decide its layout (without this, a change ml wrote just before the
// conflict began went ahead while both MigLayouts said the node was left
// alone); or any of a paused MigLayout whose selector does not parse
// (dropForPause), which syncNodes does not see.
func (r *Reconciler) dropUnstartedOwned(ctx context.Context, ml *v1alpha1.MigLayout, existing *v1alpha1.NodeMigLayout, why string) error {
	desired, ok := unstartedToDrop(ml, existing, why)
	if !ok {
		return nil
	}
	next := existing.DeepCopy()
	next.Spec.GPUs = desired
	stillHolds := func(live *v1alpha1.NodeMigLayout) bool {
		return equality.Semantic.DeepEqual(dropUnstarted(live, why), desired)
	}
	if written, err := r.patchSpec(ctx, existing, next, stillHolds); err != nil {
		return fmt.Errorf("dropping the changes not started of NodeMigLayout %s (%s): %w", existing.Name, why, err)
	} else if !written {
		return nil
	}
	writesMetric.WithLabelValues("update").Inc()
	klog.FromContext(ctx).Info("Dropped the changes not started on a node", "node", existing.Name, "why", why)
	return nil
}

// unstartedToDrop returns the spec.gpus dropUnstartedOwned writes on
// existing, and whether it writes any: only on a NodeMigLayout ml controls,
// not being deleted, that holds a change its agent has not started.
func unstartedToDrop(ml *v1alpha1.MigLayout, existing *v1alpha1.NodeMigLayout, why string) ([]v1alpha1.GPUSpec, bool) {
	if existing == nil || existing.DeletionTimestamp != nil || !metav1.IsControlledBy(existing, ml) {
		return nil, false
	}
	desired := dropUnstarted(existing, why)
	return desired, !equality.Semantic.DeepEqual(desired, existing.Spec.GPUs)
}

// dropUnstarted is nml's spec.gpus with each change the agent has not
// started (the GPU reported Ready on another layout, or Draining: nothing
// destroyed yet) set back to the GPU's actual layout, with why in its
// reason; a change under way, blocked or failed stays (the agent finishes
// it, or reports why not). An entry written for another GPU than the one
// at its index now is set to what that GPU holds (asItIsForRenumbered).
func dropUnstarted(nml *v1alpha1.NodeMigLayout, why string) []v1alpha1.GPUSpec {
	out := slices.Clone(asItIsForRenumbered(nml, nml.Spec.GPUs))
	for i, sp := range out {
		j := slices.IndexFunc(nml.Status.GPUs, func(st v1alpha1.GPUStatus) bool { return st.Index == sp.Index })
		if j < 0 {
			continue
		}
		st := nml.Status.GPUs[j]
		if st.Phase != v1alpha1.PhaseReady && st.Phase != v1alpha1.PhaseDraining {
			continue
		}
		if st.MIGEnabled != st.MIGPending || (sp.MIGEnabled == st.MIGEnabled && sp.Layout == st.Layout) {
			continue
		}
		out[i] = v1alpha1.GPUSpec{Index: sp.Index, UUID: st.UUID, MIGEnabled: st.MIGEnabled, Layout: st.Layout,
			Reason: truncate(why+": the change to "+describeSpec(sp)+" was dropped before it started", 1024)}
	}
	return out
}

// keptForAuto returns specs (nml's, its unstarted changes dropped) with
// the reason of each entry its GPU holds, Ready, said anew for Auto mode:
// the layout stays until pending claims need a change. Written by a Static
// rule, or by another Auto MigLayout's plan, the old reason (a rule, pods
// served then) would read as what decides the layout now; it is kept
// after "written before as". Entries of changes under way, and those
// dropUnstarted dropped (which say so already), keep theirs.
func keptForAuto(nml *v1alpha1.NodeMigLayout, specs []v1alpha1.GPUSpec) []v1alpha1.GPUSpec {
	out := slices.Clone(specs)
	for i, sp := range out {
		j := slices.IndexFunc(nml.Status.GPUs, func(st v1alpha1.GPUStatus) bool { return st.Index == sp.Index })
		if j < 0 || strings.HasPrefix(sp.Reason, dropForAuto+":") {
			continue
		}
		if st := nml.Status.GPUs[j]; st.Phase != v1alpha1.PhaseReady || st.MIGEnabled != st.MIGPending || !holds(sp, st) {
			continue
		}
		reason := dropForAuto + ": kept as the GPU holds it until pending claims need a change"
		if sp.Reason != "" {
			reason += " (written before as: " + sp.Reason + ")"
		}
		out[i].Reason = truncate(reason, 1024)
	}
	return out
}

// asItIsForRenumbered returns specs (nml's, or what is to replace them)
// with each entry written for another GPU than the one nml's status reports
// at its index set to what that GPU holds now (its MIG mode and layout),
// for it: NVML numbered the GPUs anew (one left the node, or was not found
// at boot), and the agent changes nothing under an entry for another GPU
// (SpecForAnotherGPU). Nothing was started on the GPU under it, so it is
// not a change in flight to carry out: where the controller does not
// decide the GPU's layout afresh (Auto mode, a pause, a conflict, a
// release to another MigLayout) the entry would otherwise hold the GPU
// Blocked for good. A GPU NVML cannot read, or with a MIG mode change
// pending, keeps its entry.
//
// An entry without a UUID (written by an earlier release, which applies to
// whatever GPU is at its index) that the GPU there holds, Ready on the
// spec's generation, is given that GPU's UUID: without it, the first
// renumbering would apply it to another GPU. Static rules stamp their
// entries as they decide them (DesiredGPUs); this stamps those nothing
// decides afresh.
func asItIsForRenumbered(nml *v1alpha1.NodeMigLayout, specs []v1alpha1.GPUSpec) []v1alpha1.GPUSpec {
	out, cloned := specs, false
	for i, sp := range specs {
		j := slices.IndexFunc(nml.Status.GPUs, func(st v1alpha1.GPUStatus) bool { return st.Index == sp.Index })
		if j < 0 {
			continue
		}
		st := nml.Status.GPUs[j]
		if sp.UUID == "" && st.UUID != "" && st.Phase == v1alpha1.PhaseReady && holds(sp, st) &&
			nml.Status.ObservedGeneration == nml.Generation {
			if !cloned {
				out, cloned = slices.Clone(specs), true
			}
			out[i].UUID = st.UUID
			continue
		}
		if sp.UUID == "" || st.UUID == "" || st.UUID == sp.UUID || hardwareGone(st) || st.MIGEnabled != st.MIGPending {
			continue
		}
		if !cloned {
			out, cloned = slices.Clone(specs), true
		}
		out[i] = v1alpha1.GPUSpec{Index: sp.Index, UUID: st.UUID, MIGEnabled: st.MIGEnabled, Layout: st.Layout,
			Reason: truncate("the entry was written for "+sp.UUID+" and NVML numbered the GPUs anew: "+st.UUID+" is here now, left as it is", 1024)}
		if !st.MIGEnabled {
			out[i].Layout = ""
		}
	}
	return out
}

// describeSpec is a GPU spec's layout as people read it.
func describeSpec(sp v1alpha1.GPUSpec) string {
	if !sp.MIGEnabled {
		return "MIG off"
	}
	if sp.Layout == "" {
		return "no device"
	}
	return sp.Layout
}

// switchedSince reports whether ml, as the API server has it now, is not
// the MigLayout the cache showed (deleted, replaced, or at another
// generation: switched to the other mode, paused, resumed or its rules
// edited, perhaps). One GET, made only before a write that starts a change,
// overwrites an Auto plan or drops a change for a pause (syncPausedNode,
// and a paused MigLayout whose selector does not parse). A switched answer
// or an error stands for the rest of the reconcile (withLiveCheck). Without
// an APIReader (tests), the cache's is taken as current.
func (r *Reconciler) switchedSince(ctx context.Context, ml *v1alpha1.MigLayout) (bool, error) {
	if r.APIReader == nil {
		return false, nil
	}
	memo, _ := ctx.Value(liveCheckKey{}).(*liveCheck)
	if memo != nil && memo.kept && memo.uid == ml.UID && memo.generation == ml.Generation {
		return memo.err == nil, memo.err
	}
	switched, err := r.readSwitched(ctx, ml)
	if memo != nil && (switched || err != nil) {
		*memo = liveCheck{kept: true, uid: ml.UID, generation: ml.Generation, err: err}
	}
	return switched, err
}

// readSwitched is switchedSince's GET and comparison.
func (r *Reconciler) readSwitched(ctx context.Context, ml *v1alpha1.MigLayout) (bool, error) {
	var live v1alpha1.MigLayout
	if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(ml), &live); apierrors.IsNotFound(err) {
		return true, nil
	} else if err != nil {
		return false, fmt.Errorf("reading MigLayout %s before writing its nodes' specs: %w", ml.Name, err)
	}
	return live.UID != ml.UID || live.Generation != ml.Generation || modeOf(&live) != modeOf(ml), nil
}

// liveCheck keeps, for one reconcile, a switchedSince answer that stands
// for the rest of it: the MigLayout (uid, at generation, the cache's copy)
// was switched, or could not be read (err). "Not switched" is not kept: a
// pause may land between two writes, and each write reads again. The
// reconciles of a MigLayout do not overlap, and its nodes are synced one
// after the other.
type liveCheck struct {
	kept       bool
	uid        types.UID
	generation int64
	err        error
}

type liveCheckKey struct{}

// withLiveCheck returns ctx carrying a new liveCheck: once the MigLayout
// is found switched, or cannot be read, no other write of the reconcile
// reads it again (nor repeats the error).
func withLiveCheck(ctx context.Context) context.Context {
	return context.WithValue(ctx, liveCheckKey{}, &liveCheck{})
}

// patchSpec writes next (spec, owner references and annotations) over
// existing, guarded by existing's resourceVersion: the Auto planner writes
// spec.gpus too, and a write from a stale read must not undo its plan. A
// conflict caused by another change (the agent's status writes, most
// often) is retried on the object read from the API server while its
// spec, owners and annotations are still those read and stillHolds (when
// set) holds on it; any other conflict is returned (the reconcile is
// requeued and reads again). written is false where nothing was written:
// a write that would only add GPU UUIDs to entries, while the API server
// drops them (droppingUUIDs), is skipped and next set to existing.
func (r *Reconciler) patchSpec(ctx context.Context, existing, next *v1alpha1.NodeMigLayout, stillHolds func(live *v1alpha1.NodeMigLayout) bool) (written bool, err error) {
	if r.droppingUUIDs() && onlyAddsUUIDs(existing, next) {
		// The API server drops the UUIDs: the write would change nothing,
		// and be made again on every reconcile.
		existing.DeepCopyInto(next)
		return false, nil
	}
	sent := next.DeepCopy()
	defer func() {
		if err == nil {
			r.checkUUIDsKept(ctx, sent, next)
		}
	}()
	err = r.Client.Patch(ctx, next, client.MergeFromWithOptions(existing, client.MergeFromWithOptimisticLock{}))
	for attempt := 0; attempt < 3 && apierrors.IsConflict(err) && r.APIReader != nil; attempt++ {
		var live v1alpha1.NodeMigLayout
		if gerr := r.APIReader.Get(ctx, client.ObjectKeyFromObject(existing), &live); gerr != nil {
			return false, fmt.Errorf("reading NodeMigLayout %s after a write conflict: %w", existing.Name, gerr)
		}
		if equality.Semantic.DeepEqual(live.Spec, next.Spec) && equality.Semantic.DeepEqual(live.OwnerReferences, next.OwnerReferences) &&
			live.Annotations[v1alpha1.AnnotationSpecWrittenBy] == next.Annotations[v1alpha1.AnnotationSpecWrittenBy] {
			// Written already (the read was behind an earlier write).
			live.DeepCopyInto(next)
			return true, nil
		}
		if !equality.Semantic.DeepEqual(live.Spec, existing.Spec) || !equality.Semantic.DeepEqual(live.OwnerReferences, existing.OwnerReferences) ||
			live.Annotations[v1alpha1.AnnotationSpecWrittenBy] != existing.Annotations[v1alpha1.AnnotationSpecWrittenBy] ||
			(stillHolds != nil && !stillHolds(&live)) {
			return false, err
		}
		base, retry := existing.DeepCopy(), next.DeepCopy()
		base.ResourceVersion, retry.ResourceVersion = live.ResourceVersion, live.ResourceVersion
		if err = r.Client.Patch(ctx, retry, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err == nil {
			retry.DeepCopyInto(next)
		}
	}
	return err == nil, err
}

// uuidsRecheck is how long after the API server was last found dropping
// NodeMigLayout entries' GPU UUIDs patchSpec skips writes that only add
// them: past it, a write checks again (the CRDs may have been applied).
const uuidsRecheck = 10 * time.Minute

// droppingUUIDs reports whether the API server was found dropping the
// entries' GPU UUIDs less than uuidsRecheck ago.
func (r *Reconciler) droppingUUIDs() bool {
	at := r.uuidsDroppedAt.Load()
	return at != 0 && r.now().Sub(time.Unix(0, at)) < uuidsRecheck
}

// checkUUIDsKept notes where the API server stored sent's spec as got
// without the GPU UUIDs of its entries: the NodeMigLayout CRD is of an
// earlier release (Helm installs crds/ on first install only), so the
// agents cannot tell an entry's GPU after NVML numbers the GPUs anew.
// It says so in an error log (once per uuidsRecheck), and patchSpec then
// skips, for uuidsRecheck, writes that would only add UUIDs, which the API
// server would drop again on every reconcile.
func (r *Reconciler) checkUUIDsKept(ctx context.Context, sent, got *v1alpha1.NodeMigLayout) {
	for _, s := range sent.Spec.GPUs {
		i := slices.IndexFunc(got.Spec.GPUs, func(g v1alpha1.GPUSpec) bool { return g.Index == s.Index })
		if s.UUID == "" || i < 0 || got.Spec.GPUs[i].UUID != "" {
			continue
		}
		if !r.droppingUUIDs() {
			klog.FromContext(ctx).Error(nil, "The API server drops the GPU UUIDs of NodeMigLayout spec entries: its CRD is of an earlier release. "+
				"Apply the chart's CRDs (kubectl apply --server-side --force-conflicts -f crds/); until then an agent applies an entry to whatever GPU NVML numbers at its index",
				"nodeMigLayout", got.Name)
		}
		r.uuidsDroppedAt.Store(r.now().UnixNano())
		return
	}
}

// onlyAddsUUIDs reports whether next differs from existing only by GPU
// UUIDs given to entries that have none (same entries otherwise, same
// controller, same writer): an entry whose UUID changes is a write for
// another GPU, never skipped.
func onlyAddsUUIDs(existing, next *v1alpha1.NodeMigLayout) bool {
	if len(existing.Spec.GPUs) != len(next.Spec.GPUs) {
		return false
	}
	for i, e := range existing.Spec.GPUs {
		n := next.Spec.GPUs[i]
		if e.UUID != "" && e.UUID != n.UUID {
			return false
		}
		n.UUID = e.UUID
		if !equality.Semantic.DeepEqual(e, n) {
			return false
		}
	}
	return existing.Spec.MigLayout == next.Spec.MigLayout && equality.Semantic.DeepEqual(existing.OwnerReferences, next.OwnerReferences) &&
		existing.Annotations[v1alpha1.AnnotationSpecWrittenBy] == next.Annotations[v1alpha1.AnnotationSpecWrittenBy]
}

// writeRefused reports whether err, from creating or writing a
// NodeMigLayout, is the API server refusing the object or the request (an
// admission webhook or policy, RBAC, validation), which a retry does not
// mend; not a conflict, a timeout or an unavailable server.
func writeRefused(err error) bool {
	return apierrors.IsForbidden(err) || apierrors.IsInvalid(err) || apierrors.IsBadRequest(err) ||
		apierrors.IsUnauthorized(err) || apierrors.IsRequestEntityTooLargeError(err) || apierrors.IsMethodNotSupported(err)
}
