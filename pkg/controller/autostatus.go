package controller

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/miglayout/miglayout/api/v1alpha1"
	"github.com/miglayout/miglayout/pkg/planner"
)

// +kubebuilder:rbac:groups=miglayout.io,resources=miglayouts/status,verbs=get;patch

// AutoStatuses counts a plan's outcome per Auto-mode MigLayout (by name):
// pods served and GPUs changed on its nodes, pods kept on them, and the
// cluster-wide counts of pending pods, pods waiting for room with no
// placement kept, and pods nothing can serve. A node belongs to the
// MigLayout that controls its NodeMigLayout. res may be nil (no plan: no
// pending pods). LastPlanTime is left unset.
func AutoStatuses(in AutoInputs, snap planner.Snapshot, res *planner.Result) map[string]v1alpha1.AutoStatus {
	out := map[string]v1alpha1.AutoStatus{}
	for _, ml := range in.MigLayouts {
		if ml.Spec.Mode == v1alpha1.ModeAuto && ml.DeletionTimestamp == nil {
			out[ml.Name] = v1alpha1.AutoStatus{PendingPods: int32(len(snap.Pending))}
		}
	}
	owner := func(node string) (string, bool) {
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
	if res == nil {
		return out
	}
	for _, p := range res.Served {
		count(p.Node, func(s *v1alpha1.AutoStatus) { s.WaitingForRepartition++ })
	}
	for _, c := range res.Changes {
		count(c.Node, func(s *v1alpha1.AutoStatus) { s.ChangedGPUs++ })
	}
	for _, k := range res.Kept {
		count(k.Node, func(s *v1alpha1.AutoStatus) { s.WaitingForCapacity++ })
	}
	var room, never int32
	for _, why := range res.Unservable {
		if why == planner.NoRoom {
			room++
		} else {
			never++
		}
	}
	for name, s := range out {
		s.WaitingForRoom, s.NotServable = room, never
		out[name] = s
	}
	return out
}

// writeAutoStatus records the counts in each Auto-mode MigLayout's
// status.auto where a count changed, and clears status.auto of MigLayouts
// that left Auto mode. It patches status.auto alone (a JSON merge patch),
// so it never overwrites what the status aggregation writes. A MigLayout
// deleted meanwhile is skipped.
func (a *AutoPlanner) writeAutoStatus(ctx context.Context, mls []v1alpha1.MigLayout, counts map[string]v1alpha1.AutoStatus) error {
	logger := klog.FromContext(ctx)
	for i := range mls {
		cur := &mls[i]
		want, auto := counts[cur.Name]
		next := cur.DeepCopy()
		switch {
		case !auto && cur.Status.Auto == nil:
			continue
		case !auto:
			next.Status.Auto = nil
		default:
			if have := cur.Status.Auto; have != nil {
				was := *have
				was.LastPlanTime = nil
				if equality.Semantic.DeepEqual(was, want) {
					continue
				}
			}
			now := metav1.NewTime(a.now())
			want.LastPlanTime = &now
			next.Status.Auto = &want
		}
		if err := a.Client.Status().Patch(ctx, next, client.MergeFrom(cur)); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("writing the Auto status of MigLayout %s: %w", cur.Name, err)
		}
		logger.V(1).Info("Wrote Auto status", "migLayout", cur.Name, "auto", next.Status.Auto)
	}
	return nil
}
