package controller

import (
	"context"
	"testing"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// editedOnRead is the API server as a pass's write reads it: the first read
// of a MigLayout there lands edit on it first (a policy edit made while
// the pass planned from the cache).
type editedOnRead struct {
	client.Client
	edit   func(*v1alpha1.MigLayout)
	edited bool
}

func (r *editedOnRead) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if _, ok := obj.(*v1alpha1.MigLayout); ok && !r.edited {
		r.edited = true
		var ml v1alpha1.MigLayout
		if err := r.Client.Get(ctx, key, &ml); err != nil {
			return err
		}
		r.edit(&ml)
		ml.Generation++ // as the API server does on a spec change
		if err := r.Client.Update(ctx, &ml); err != nil {
			return err
		}
	}
	return r.Client.Get(ctx, key, obj, opts...)
}

// TestAutoPolicyEditDuringAPassWins: maxGPUs lowered from 2 to 1 while a
// pass plans under 2 stops that pass's writes (two GPUs changing at once
// would break the new limit until both finish); the pass planned again at
// once, under the new policy, changes one GPU.
func TestAutoPolicyEditDuringAPassWins(t *testing.T) {
	ml := autoMigLayout("auto", &v1alpha1.AutoPolicy{MaxGPUs: 2, MaxGPUsPerNode: 1})
	h := newAutoCluster(t, ml,
		node("n1", map[string]string{"pool": "auto"}), node("n2", map[string]string{"pool": "auto"}),
		autoNML("n1", ml, a100(0).layout("7g.80gb@0")), autoNML("n2", ml, a100(0).layout("7g.80gb@0")),
		autoClaim("c1", profileSelector("4g.40gb")), autoPod("p1", h0(), "c1"),
		autoClaim("c2", profileSelector("4g.40gb")), autoPod("p2", h0(), "c2"))
	live := &editedOnRead{Client: h.c, edit: func(m *v1alpha1.MigLayout) { m.Spec.Policy.MaxGPUs = 1 }}
	h.a.APIReader = live
	h.settle()
	if !live.edited {
		t.Fatal("no write read the MigLayout live")
	}
	// The pass planned under 2 wrote nothing; the one it asks for
	// plans under 1.
	if n := changingGPUs(h, "n1", "n2"); n != 1 {
		t.Errorf("%d GPUs changing, want 1 (maxGPUs lowered to 1 while the first pass planned under 2): %v %v", n, h.specOf("n1"), h.specOf("n2"))
	}
}

// changingGPUs counts the GPUs of nodes whose spec asks for another layout
// than the whole 7g.80gb they hold.
func changingGPUs(h *autoCluster, nodes ...string) int {
	n := 0
	for _, node := range nodes {
		for _, l := range h.specOf(node) {
			if l != "" && l != "7g.80gb@0" {
				n++
			}
		}
	}
	return n
}

// liveGenerations are the generations of the MigLayouts c holds, by UID:
// those a plan made now is made from (planGenerations).
func liveGenerations(t *testing.T, c client.Reader) map[types.UID]int64 {
	t.Helper()
	var mls v1alpha1.MigLayoutList
	if err := c.List(t.Context(), &mls); err != nil {
		t.Fatal(err)
	}
	return planGenerations(mls.Items)
}
