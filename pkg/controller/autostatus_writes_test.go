package controller

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// autoStatusWrites is an AutoPlanner writing MigLayouts' Auto status to a
// fake API server that counts the status patches.
type autoStatusWrites struct {
	t       *testing.T
	c       client.Client
	a       *AutoPlanner
	now     time.Time
	patches int
}

func newAutoStatusWrites(t *testing.T, objs ...client.Object) *autoStatusWrites {
	w := &autoStatusWrites{t: t, now: time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)}
	w.c = fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(objs...).WithStatusSubresource(&v1alpha1.MigLayout{}).
		WithInterceptorFuncs(interceptor.Funcs{SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
			w.patches++
			return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
		}}).Build()
	w.a = &AutoPlanner{Client: w.c, Now: func() time.Time { return w.now }}
	return w
}

// write writes counts, seen against cur (the cache's copy).
func (w *autoStatusWrites) write(cur v1alpha1.MigLayout, counts map[string]v1alpha1.AutoStatus) {
	w.t.Helper()
	if err := w.a.writeAutoStatus(context.Background(), []v1alpha1.MigLayout{cur}, counts); err != nil {
		w.t.Fatal(err)
	}
}

// get reads MigLayout auto as the API server holds it.
func (w *autoStatusWrites) get() v1alpha1.MigLayout {
	w.t.Helper()
	var ml v1alpha1.MigLayout
	if err := w.c.Get(context.Background(), types.NamespacedName{Name: "auto"}, &ml); err != nil {
		w.t.Fatal(err)
	}
	return ml
}

// TestAutoStatusWrites: status.auto is written where the counts differ
// from what was last written, or after a restart from what the cache
// holds (its time aside), all-zero counts included; it is cleared once
// when the MigLayout leaves Auto mode, also by a restarted controller and
// also while the cache has not seen it written yet; a copy the cache holds
// from before a write does not make the same counts go out again; a
// MigLayout made again under the same name starts with nothing written;
// one deleted meanwhile is no error.
func TestAutoStatusWrites(t *testing.T) {
	one := map[string]v1alpha1.AutoStatus{"auto": {PendingPods: 1}}
	none := map[string]v1alpha1.AutoStatus{}
	withAuto := func() *v1alpha1.MigLayout {
		ml := autoMigLayout("auto", nil)
		ml.Status.Auto = &v1alpha1.AutoStatus{PendingPods: 1, LastChangeTime: &metav1.Time{Time: time.Date(2025, 12, 31, 0, 0, 0, 0, time.UTC)}}
		return ml
	}
	for name, tc := range map[string]struct {
		objs        []client.Object
		run         func(w *autoStatusWrites)
		wantPatches int
		wantAuto    *v1alpha1.AutoStatus // status.auto at the end, its time aside
	}{
		"after a restart, the counts the cache holds": {
			objs:        []client.Object{withAuto()},
			run:         func(w *autoStatusWrites) { w.write(w.get(), one) },
			wantPatches: 0, wantAuto: &v1alpha1.AutoStatus{PendingPods: 1},
		},
		"all-zero counts, none written yet": {
			objs:        []client.Object{autoMigLayout("auto", nil)},
			run:         func(w *autoStatusWrites) { w.write(w.get(), map[string]v1alpha1.AutoStatus{"auto": {}}) },
			wantPatches: 1, wantAuto: &v1alpha1.AutoStatus{},
		},
		"left Auto mode, seen after a restart": {
			objs:        []client.Object{withAuto()},
			run:         func(w *autoStatusWrites) { w.write(w.get(), none) },
			wantPatches: 1,
		},
		"left Auto mode: cleared once": {
			objs: []client.Object{autoMigLayout("auto", nil)},
			run: func(w *autoStatusWrites) {
				w.write(w.get(), one)
				w.write(w.get(), none)
				w.write(w.get(), none)
			},
			wantPatches: 2,
		},
		"left Auto mode before the cache saw the write": {
			objs: []client.Object{autoMigLayout("auto", nil)},
			run: func(w *autoStatusWrites) {
				stale := w.get()
				w.write(stale, one)
				w.write(stale, none)
			},
			wantPatches: 2,
		},
		"the same counts, the cache behind": {
			objs: []client.Object{autoMigLayout("auto", nil)},
			run: func(w *autoStatusWrites) {
				stale := w.get()
				w.write(stale, one)
				w.write(stale, one)
			},
			wantPatches: 1, wantAuto: &v1alpha1.AutoStatus{PendingPods: 1},
		},
		"made again under the same name": {
			objs: []client.Object{autoMigLayout("auto", nil)},
			run: func(w *autoStatusWrites) {
				w.write(w.get(), one)
				again := w.get()
				again.UID, again.Status.Auto = "uid-auto-again", nil
				w.write(again, one)
			},
			wantPatches: 2, wantAuto: &v1alpha1.AutoStatus{PendingPods: 1},
		},
		"deleted meanwhile": {
			run:         func(w *autoStatusWrites) { w.write(*autoMigLayout("auto", nil), one) },
			wantPatches: 1,
		},
	} {
		t.Run(name, func(t *testing.T) {
			w := newAutoStatusWrites(t, tc.objs...)
			tc.run(w)
			if w.patches != tc.wantPatches {
				t.Errorf("status patched %d times, want %d", w.patches, tc.wantPatches)
			}
			if tc.objs == nil {
				return
			}
			got := w.get().Status.Auto
			switch {
			case tc.wantAuto == nil && got != nil:
				t.Errorf("status.auto %+v, want none", got)
			case tc.wantAuto != nil && got == nil:
				t.Errorf("no status.auto, want %+v", tc.wantAuto)
			case got != nil:
				if got.LastChangeTime == nil {
					t.Errorf("status.auto %+v without its time", got)
				}
				counts := *got
				counts.LastChangeTime = nil
				if diff := cmp.Diff(*tc.wantAuto, counts); diff != "" {
					t.Errorf("status.auto, its time aside (-want +got):\n%s", diff)
				}
			}
		})
	}
}

// TestAutoStatusWriteTime: counts written carry the time they were
// written.
func TestAutoStatusWriteTime(t *testing.T) {
	w := newAutoStatusWrites(t, autoMigLayout("auto", nil))
	w.write(w.get(), map[string]v1alpha1.AutoStatus{"auto": {PendingPods: 1}})
	if got := w.get().Status.Auto; got == nil || got.LastChangeTime == nil || !got.LastChangeTime.Time.Equal(w.now) {
		t.Errorf("status.auto %+v, want it written at %s", got, w.now)
	}
}
