package controller

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/miglayout/miglayout/api/v1alpha1"
	"github.com/miglayout/miglayout/pkg/mig"
	"github.com/miglayout/miglayout/pkg/planner"
)

// TestAutoGPUsOnlyWhereASpecEntryFits: Auto mode plans only on GPUs whose
// spec entry the API server would take: not at an index a spec may not
// name (a status written before the CRD bounded its indices, or by
// something other than the agent), nor, in a spec whose entries are all
// taken by other indices, on a GPU without one; a GPU that has its entry
// keeps it.
func TestAutoGPUsOnlyWhereASpecEntryFits(t *testing.T) {
	indices := func(nml *v1alpha1.NodeMigLayout) []int {
		var out []int
		for _, g := range autoGPUs(nml, mig.DefaultCatalog(), modelVariants{}, nil, nil, false) {
			out = append(out, g.Info.Index)
		}
		return out
	}
	outOfRange := nodeMigLayout("n1").status(a100(0).layout("7g.80gb@0"), a100(v1alpha1.MaxGPUIndex).layout("7g.80gb@0"),
		a100(v1alpha1.MaxGPUIndex+1).layout("7g.80gb@0"), a100(100).layout("7g.80gb@0"), a100(-1).layout("7g.80gb@0")).build()
	if diff := cmp.Diff([]int{0, v1alpha1.MaxGPUIndex}, indices(outOfRange)); diff != "" {
		t.Errorf("GPUs planned with indices 0, 63, 64, 100 and -1 reported (-want +got):\n%s", diff)
	}

	// Sixteen entries for other indices (left from GPUs reported before),
	// and one for GPU 40: GPU 40 keeps its entry, GPUs 41 and 42 have none
	// and no room for one.
	var specs []v1alpha1.GPUSpec
	for i := range v1alpha1.MaxNodeGPUs - 1 {
		specs = append(specs, specGPU(int32(20+i), "7g.80gb@0", "r"))
	}
	specs = append(specs, specGPU(40, "7g.80gb@0", "r"))
	full := nodeMigLayout("n1").spec(specs...).status(a100(40).layout("7g.80gb@0"), a100(41).layout("7g.80gb@0"), a100(42).layout("7g.80gb@0")).build()
	if diff := cmp.Diff([]int{40}, indices(full)); diff != "" {
		t.Errorf("GPUs planned in a full spec (-want +got):\n%s", diff)
	}
	// Room for one more entry: the first GPU without one takes it.
	roomy := nodeMigLayout("n1").spec(specs[1:]...).status(a100(40).layout("7g.80gb@0"), a100(41).layout("7g.80gb@0"), a100(42).layout("7g.80gb@0")).build()
	if diff := cmp.Diff([]int{40, 41}, indices(roomy)); diff != "" {
		t.Errorf("GPUs planned in a spec with room for one entry (-want +got):\n%s", diff)
	}
}

// TestWriteGoesOnPastANodeItCannotWrite: a node whose planned layouts the
// API server refuses holds back no other node's: the nodes after it are
// written, and the refusal is returned, naming the node.
func TestWriteGoesOnPastANodeItCannotWrite(t *testing.T) {
	ctx := context.Background()
	ml := autoMigLayout("auto", nil)
	read := map[string]*v1alpha1.NodeMigLayout{}
	var objs []client.Object
	for _, n := range []string{"a", "b"} {
		nml := ownedBy(nodeMigLayout(n).status(a100(0).layout("7g.80gb@0")).build(), ml)
		read[n] = nml
		objs = append(objs, nml.DeepCopy())
	}
	c := interceptor.NewClient(fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(append(objs, ml)...).
		WithStatusSubresource(&v1alpha1.NodeMigLayout{}).Build(), interceptor.Funcs{
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			if obj.GetName() == "a" {
				return apierrors.NewInvalid(schema.GroupKind{Group: v1alpha1.GroupVersion.Group, Kind: "NodeMigLayout"}, "a", nil)
			}
			return c.Patch(ctx, obj, patch, opts...)
		}})
	var changes []planner.Change
	for _, n := range []string{"a", "b"} {
		changes = append(changes, planner.Change{Node: n, GPU: 0, From: mig.MustParseLayout("7g.80gb@0"),
			To: mig.MustParseLayout("3g.40gb@0,3g.40gb@4"), Serves: []string{"ns/" + n}})
	}
	a := &AutoPlanner{Client: c}
	_, n, err := a.write(ctx, read, liveGenerations(t, c), changes, nil, nil)
	if err == nil || !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "node a") {
		t.Errorf("write error %v, want node a's refusal", err)
	}
	if n != 1 {
		t.Errorf("%d changes written, want 1 (node b's)", n)
	}
	var b v1alpha1.NodeMigLayout
	if err := c.Get(ctx, types.NamespacedName{Name: "b"}, &b); err != nil {
		t.Fatal(err)
	}
	if len(b.Spec.GPUs) != 1 || b.Spec.GPUs[0].Layout != "3g.40gb@0,3g.40gb@4" {
		t.Errorf("node b's spec %+v, want GPU 0 at 3g.40gb@0,3g.40gb@4", b.Spec.GPUs)
	}
}
