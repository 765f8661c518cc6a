package controller

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/miglayout/miglayout/api/v1alpha1"
	"github.com/miglayout/miglayout/pkg/planner"
)

// +kubebuilder:rbac:groups=miglayout.io,resources=miglayouts/status,verbs=patch

// AutoStatuses counts a plan's outcome per Auto-mode MigLayout (by name):
// on its nodes, the pods waiting for a repartition (repartitionTargets),
// the GPUs the plan changes or that still change for an earlier one, and
// the pods a placement is kept for, the spares missing; cluster-wide, the
// pending pods, the pods waiting for room with no placement kept and the
// pods nothing can serve. A node belongs to the MigLayout whose limits it
// counts toward in snap (planner.Policy.Group: the one that controls its
// NodeMigLayout, or that is adopting it), else to the one that controls
// its NodeMigLayout. res may be nil (no plan: no pending pods).
// LastChangeTime is left unset.
func AutoStatuses(in AutoInputs, snap planner.Snapshot, res *planner.Result) map[string]v1alpha1.AutoStatus {
	out := map[string]v1alpha1.AutoStatus{}
	for _, ml := range in.MigLayouts {
		if plansAuto(ml) {
			out[ml.Name] = v1alpha1.AutoStatus{PendingPods: int32(len(snap.Pending))}
		}
	}
	group := make(map[string]string, len(snap.Nodes))
	for _, n := range snap.Nodes {
		if n.Policy.Group != "" {
			group[n.Node.Name] = n.Policy.Group
		}
	}
	owner := func(node string) (string, bool) {
		if g, ok := group[node]; ok {
			_, auto := out[g]
			return g, auto
		}
		nml := in.NodeMigLayouts[node]
		if nml == nil {
			return "", false
		}
		ref := metav1.GetControllerOf(nml)
		if ref == nil || ref.Kind != "MigLayout" {
			return "", false
		}
		_, ok := out[ref.Name]
		return ref.Name, ok
	}
	count := func(node string, f func(*v1alpha1.AutoStatus)) {
		if name, ok := owner(node); ok {
			s := out[name]
			f(&s)
			out[name] = s
		}
	}
	// GPUs an earlier plan changes are counted until they are ready: a plan
	// made while they change does not change them again.
	for _, n := range snap.Nodes {
		for _, g := range n.GPUs {
			// A reclaim in flight is among res's changes where the
			// plan makes it again (ReclaimCancels).
			if g.Changing || (g.Reclaiming && res == nil) {
				count(n.Node.Name, func(s *v1alpha1.AutoStatus) { s.ChangedGPUs++ })
			}
		}
	}
	if res == nil {
		return out
	}
	targets := repartitionTargets(in, snap, *res)
	for _, p := range res.Served {
		if targets[p.Pod] != "" {
			count(p.Node, func(s *v1alpha1.AutoStatus) { s.WaitingForRepartitionPods++ })
		}
	}
	for _, c := range res.Changes {
		count(c.Node, func(s *v1alpha1.AutoStatus) { s.ChangedGPUs++ })
	}
	for _, k := range res.Kept {
		count(k.Node, func(s *v1alpha1.AutoStatus) { s.WaitingForCapacityPods++ })
	}
	for node, profiles := range res.MissingSpares {
		for _, n := range profiles {
			count(node, func(s *v1alpha1.AutoStatus) { s.MissingSpares += int32(n) })
		}
	}
	var room, never int32
	for _, why := range res.Unservable {
		switch why {
		case planner.NoRoom, planner.WaitsForLostNode, planner.WaitsForAllModeNode, planner.WaitsForNodeResources:
			room++
		case planner.WaitsForSharedClaim:
			// Neither: planned once the shared claims are allocated.
		default:
			never++
		}
	}
	for name, s := range out {
		s.WaitingForRoomPods, s.NotServablePods = room, never
		out[name] = s
	}
	return out
}

// writeAutoStatus records the counts in each Auto-mode MigLayout's
// status.auto where they differ from what it last wrote (or, after a
// restart, from what the cache holds), and clears status.auto of
// MigLayouts that left Auto mode. It patches status.auto alone (a JSON
// merge patch holding the whole of it, so a cache that lags behind an
// earlier write cannot leave a field stale), so it never overwrites the
// status aggregation. A MigLayout deleted meanwhile is skipped.
func (a *AutoPlanner) writeAutoStatus(ctx context.Context, mls []v1alpha1.MigLayout, counts map[string]v1alpha1.AutoStatus) error {
	logger := klog.FromContext(ctx)
	a.statusMu.Lock()
	defer a.statusMu.Unlock()
	if a.autoWritten == nil {
		a.autoWritten = map[string]v1alpha1.AutoStatus{}
	}
	// Keyed by UID too: a MigLayout deleted and made again under the same
	// name starts with nothing written.
	key := func(ml *v1alpha1.MigLayout) string { return ml.Name + "/" + string(ml.UID) }
	present := make(map[string]bool, len(mls))
	for i := range mls {
		present[key(&mls[i])] = true
	}
	for k := range a.autoWritten {
		if !present[k] {
			delete(a.autoWritten, k)
		}
	}
	for i := range mls {
		cur := &mls[i]
		want, auto := counts[cur.Name]
		last, written := a.autoWritten[key(cur)]
		known := written
		if !known && cur.Status.Auto != nil {
			last, known = *cur.Status.Auto, true
			last.LastChangeTime = nil
		}
		base := cur.DeepCopy()
		next := cur.DeepCopy()
		switch {
		case !auto && cur.Status.Auto == nil && !written:
			continue
		case !auto:
			// Sent as "auto": null whatever the cache holds.
			base.Status.Auto, next.Status.Auto = &v1alpha1.AutoStatus{}, nil
		case known && equality.Semantic.DeepEqual(last, want):
			continue
		default:
			base.Status.Auto = nil
			now := metav1.NewTime(a.now())
			w := want
			w.LastChangeTime = &now
			next.Status.Auto = &w
		}
		if err := a.Client.Status().Patch(ctx, next, client.MergeFrom(base)); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return fmt.Errorf("writing the Auto status of MigLayout %s: %w", cur.Name, err)
		}
		if auto {
			a.autoWritten[key(cur)] = want
		} else {
			delete(a.autoWritten, key(cur))
		}
		logger.V(1).Info("Wrote Auto status", "migLayout", cur.Name, "auto", next.Status.Auto)
	}
	return nil
}
