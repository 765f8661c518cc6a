package agent

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

func TestLiveSpecs(t *testing.T) {
	nml := &v1alpha1.NodeMigLayout{ObjectMeta: metav1.ObjectMeta{Name: "n1"},
		Spec: v1alpha1.NodeMigLayoutSpec{GPUs: []v1alpha1.GPUSpec{spec(0, "7g.80gb@0")}}}
	scheme := testScheme(t)
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(nml).Build()
	got, err := LiveSpecs(c, "n1")(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(nml.Spec.GPUs, got); diff != "" {
		t.Errorf("specs of n1 (-want +got):\n%s", diff)
	}
	got, err = LiveSpecs(c, "n2")(context.Background())
	if err != nil || got != nil {
		t.Errorf("specs of n2 (no NodeMigLayout) = %v, %v; want none, no error", got, err)
	}
}

// TestSyncSkipsGPUWhoseSpecChangedWhileDraining: an Auto plan cancels a
// change while the agent waits out the settle period (the pods it was for
// are gone), seen when the agent reads the spec again before the GPU's
// NVML work. The drained devices must not be destroyed for a layout nobody
// asks for any more: the GPU is left as it is, untainted, and reported
// Pending for the next pass; a GPU whose spec did not change goes on. Where
// that read fails, a cancel may have been written unseen: no GPU changes.
func TestSyncSkipsGPUWhoseSpecChangedWhileDraining(t *testing.T) {
	tests := map[string]struct {
		now  []v1alpha1.GPUSpec
		err  error
		want []string
		// why a GPU left at 7g.80gb@0 says so
		why string
		// stopped: the GPU is retried as a failure (SyncResult.Stopped)
		stopped bool
		// uuid0 is the UUID now's entry for GPU 0 is written for ("own":
		// GPU 0's own).
		uuid0 string
	}{
		"cancelled back to the actual layout": {
			now:  []v1alpha1.GPUSpec{spec(0, "7g.80gb@0"), spec(1, "3g.40gb@0,3g.40gb@4")},
			want: []string{"7g.80gb@0", "3g.40gb@0,3g.40gb@4"},
			why:  "changed before the GPU was repartitioned",
		},
		"spec gone": {
			now:  []v1alpha1.GPUSpec{spec(1, "3g.40gb@0,3g.40gb@4")},
			want: []string{"7g.80gb@0", "3g.40gb@0,3g.40gb@4"},
			why:  "changed before the GPU was repartitioned",
		},
		"unchanged": {
			now:  []v1alpha1.GPUSpec{spec(0, "3g.40gb@4"), spec(1, "3g.40gb@0,3g.40gb@4")},
			want: []string{"3g.40gb@4", "3g.40gb@0,3g.40gb@4"},
		},
		"the same layout stamped with the GPU's UUID": {
			now:   []v1alpha1.GPUSpec{spec(0, "3g.40gb@4"), spec(1, "3g.40gb@0,3g.40gb@4")},
			uuid0: "own",
			want:  []string{"3g.40gb@4", "3g.40gb@0,3g.40gb@4"},
		},
		"the same layout written for another GPU": {
			now:   []v1alpha1.GPUSpec{spec(0, "3g.40gb@4"), spec(1, "3g.40gb@0,3g.40gb@4")},
			uuid0: "GPU-00000000-0000-0000-0000-00000000beef",
			want:  []string{"7g.80gb@0", "3g.40gb@0,3g.40gb@4"},
			why:   "changed before the GPU was repartitioned",
		},
		"reread fails: no GPU changes this pass": {
			err:  errors.New("apiserver down"),
			want: []string{"7g.80gb@0", "7g.80gb@0"},
			why:  "could not be read again before repartitioning (apiserver down)", stopped: true,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			g := newRig(t, "2xA100-SXM4-80GB")
			g.setup(t, 0, "7g.80gb@0")
			g.setup(t, 1, "7g.80gb@0")
			now := slices.Clone(tc.now)
			if tc.uuid0 != "" {
				now[0].UUID = tc.uuid0
				if tc.uuid0 == "own" {
					now[0].UUID = g.sim.Snapshot().GPUs[0].UUID
				}
			}
			reread := 0
			g.r.Reread = func(context.Context) ([]v1alpha1.GPUSpec, error) {
				reread++
				return now, tc.err
			}
			res, err := g.r.Sync(context.Background(), []v1alpha1.GPUSpec{spec(0, "3g.40gb@4"), spec(1, "3g.40gb@0,3g.40gb@4")}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if reread != 2 {
				t.Errorf("specs read again %d times, want 2 (before each GPU's NVML work)", reread)
			}
			g.wantLayouts(t, tc.want...)
			for i, layout := range tc.want {
				got := res.Results[i]
				if layout != "7g.80gb@0" {
					if got.Phase != v1alpha1.PhaseReady {
						t.Errorf("GPU %d result %+v, want Ready: its spec did not change", i, got)
					}
					continue
				}
				if got.Phase != v1alpha1.PhasePending || got.Reason != v1alpha1.ReasonPending || !strings.Contains(got.Message, tc.why) || !res.Retry || res.Stopped.Has(i) != tc.stopped {
					t.Errorf("GPU %d result %+v (retry %v, stopped %v), want Pending/Pending, stopped %v: the desired layout %s", i, got, res.Retry, res.Stopped.Has(i), tc.stopped, tc.why)
				}
			}
			if last := g.inv.last(); len(last.draining) != 0 {
				t.Errorf("taints left published: %v", last.draining)
			}
			if entries := g.r.Journal.Entries(); len(entries) != 0 {
				t.Errorf("journal left %+v", entries)
			}
		})
	}
}
