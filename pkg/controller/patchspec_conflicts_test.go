package controller

import (
	"context"
	"errors"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// racingWrites is an API server on which another writer (the agent,
// reporting) changes n1 just before each of the first races spec writes:
// each of those conflicts.
type racingWrites struct {
	client.Client
	races int
}

func (c *racingWrites) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	if c.races > 0 {
		c.races--
		var live v1alpha1.NodeMigLayout
		if err := c.Client.Get(ctx, client.ObjectKeyFromObject(obj), &live); err != nil {
			return err
		}
		metav1.SetMetaDataLabel(&live.ObjectMeta, "report", strconv.Itoa(c.races))
		if err := c.Client.Update(ctx, &live); err != nil {
			return err
		}
	}
	return c.Client.Patch(ctx, obj, patch, opts...)
}

// failingReads is an API server that answers no read.
type failingReads struct{ err error }

func (r failingReads) Get(context.Context, client.ObjectKey, client.Object, ...client.GetOption) error {
	return r.err
}

func (r failingReads) List(context.Context, client.ObjectList, ...client.ListOption) error {
	return r.err
}

// patchSpec writes a spec read from a stale object only where the object
// read again after the conflict still has the spec, owners and annotation
// read (a change of the agent's status, or labels, is retried, three times
// at most); one written already is taken as written, with the object as
// the API server has it; a read that fails after a conflict is returned.
func TestPatchSpecRetriesOnlyOverTheSpecRead(t *testing.T) {
	readFailed := errors.New("API server unavailable")
	for name, tc := range map[string]struct {
		races     int
		meanwhile func(live *v1alpha1.NodeMigLayout)
		next      func(next *v1alpha1.NodeMigLayout)
		readFails bool
		// wantErr: "" none, "conflict", "read".
		wantErr  string
		wantGPU0 string
		wantBy   string
		wantOwn  string
	}{
		"a report meanwhile: retried": {
			meanwhile: func(live *v1alpha1.NodeMigLayout) { metav1.SetMetaDataLabel(&live.ObjectMeta, "report", "x") },
			wantGPU0:  wholeLayout, wantBy: "Static", wantOwn: "a",
		},
		"a report before the retry too: retried again": {
			races:    2,
			wantGPU0: wholeLayout, wantBy: "Static", wantOwn: "a",
		},
		"reports before the first write and three retries: given up": {
			races:   4,
			wantErr: "conflict", wantGPU0: halvesLayout, wantBy: "Static", wantOwn: "a",
		},
		"the spec written by another writer meanwhile: not written over": {
			meanwhile: func(live *v1alpha1.NodeMigLayout) { live.Spec.GPUs[0].Layout = "1g.10gb@0" },
			wantErr:   "conflict", wantGPU0: "1g.10gb@0", wantBy: "Static", wantOwn: "a",
		},
		"adopted by another MigLayout meanwhile: not written over": {
			meanwhile: func(live *v1alpha1.NodeMigLayout) {
				ownedBy(live, staticMigLayout("b", "uid-b", "a"))
				live.Spec.MigLayout = "a"
			},
			wantErr: "conflict", wantGPU0: halvesLayout, wantBy: "Static", wantOwn: "b",
		},
		"taken over by the Auto planner meanwhile: not written over": {
			meanwhile: func(live *v1alpha1.NodeMigLayout) {
				live.Annotations[v1alpha1.AnnotationSpecWrittenBy] = string(v1alpha1.ModeAuto)
			},
			wantErr: "conflict", wantGPU0: halvesLayout, wantBy: "Auto", wantOwn: "a",
		},
		"written already": {
			meanwhile: func(live *v1alpha1.NodeMigLayout) { live.Spec.GPUs[0] = specGPU(0, wholeLayout, "whole") },
			wantGPU0:  wholeLayout, wantBy: "Static", wantOwn: "a",
		},
		"the spec written already, its annotation not": {
			next: func(next *v1alpha1.NodeMigLayout) {
				next.Annotations[v1alpha1.AnnotationSpecWrittenBy] = string(v1alpha1.ModeAuto)
			},
			meanwhile: func(live *v1alpha1.NodeMigLayout) { live.Spec.GPUs[0] = specGPU(0, wholeLayout, "whole") },
			wantErr:   "conflict", wantGPU0: wholeLayout, wantBy: "Static", wantOwn: "a",
		},
		"the spec written already, its owners not": {
			next: func(next *v1alpha1.NodeMigLayout) {
				ownedBy(next, staticMigLayout("b", "uid-b", "a"))
				next.Spec.MigLayout = "a"
			},
			meanwhile: func(live *v1alpha1.NodeMigLayout) { live.Spec.GPUs[0] = specGPU(0, wholeLayout, "whole") },
			wantErr:   "conflict", wantGPU0: wholeLayout, wantBy: "Static", wantOwn: "a",
		},
		"the read after a conflict fails": {
			races: 1, readFails: true,
			wantErr: "read", wantGPU0: halvesLayout, wantBy: "Static", wantOwn: "a",
		},
	} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			a := staticMigLayout("a", "uid-a", "a")
			nml := ownedBy(nodeMigLayout("n1").spec(specGPU(0, halvesLayout, `rule "halves"`)).status(a100(0).layout(halvesLayout)).build(), a)
			nml.Annotations = map[string]string{v1alpha1.AnnotationSpecWrittenBy: string(v1alpha1.ModeStatic)}
			c := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(a, nml).
				WithStatusSubresource(&v1alpha1.MigLayout{}, &v1alpha1.NodeMigLayout{}).Build()
			var existing v1alpha1.NodeMigLayout
			if err := c.Get(ctx, types.NamespacedName{Name: "n1"}, &existing); err != nil {
				t.Fatal(err)
			}
			next := existing.DeepCopy()
			next.Spec.GPUs[0] = specGPU(0, wholeLayout, "whole")
			if tc.next != nil {
				tc.next(next)
			}
			if tc.meanwhile != nil {
				live := existing.DeepCopy()
				tc.meanwhile(live)
				if err := c.Update(ctx, live); err != nil {
					t.Fatal(err)
				}
			}
			r := &Reconciler{Client: &racingWrites{Client: c, races: tc.races}, APIReader: c, Scheme: c.Scheme()}
			if tc.readFails {
				r.APIReader = failingReads{err: readFailed}
			}
			_, err := r.patchSpec(ctx, &existing, next, nil)
			switch tc.wantErr {
			case "":
				if err != nil {
					t.Fatalf("patchSpec: %v, want it written", err)
				}
			case "conflict":
				if !apierrors.IsConflict(err) {
					t.Fatalf("patchSpec: %v, want the conflict returned", err)
				}
			case "read":
				if !errors.Is(err, readFailed) {
					t.Fatalf("patchSpec: %v, want the failed read returned", err)
				}
			}
			var stored v1alpha1.NodeMigLayout
			if err := c.Get(ctx, types.NamespacedName{Name: "n1"}, &stored); err != nil {
				t.Fatal(err)
			}
			got := map[string]string{"gpu0": stored.Spec.GPUs[0].Layout, "by": stored.Annotations[v1alpha1.AnnotationSpecWrittenBy], "owner": stored.OwnerReferences[0].Name}
			want := map[string]string{"gpu0": tc.wantGPU0, "by": tc.wantBy, "owner": tc.wantOwn}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("stored n1 (-want +got):\n%s", diff)
			}
			if err == nil && next.ResourceVersion != stored.ResourceVersion {
				t.Errorf("next has resourceVersion %s, want the one written (%s)", next.ResourceVersion, stored.ResourceVersion)
			}
		})
	}
}
