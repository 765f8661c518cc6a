package controller

import (
	"context"
	"errors"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// failOnce returns interceptor functions under which the first patch of
// the spec of specOfNode's NodeMigLayout, or of the status of MigLayout
// statusOfMigLayout (an empty name: none), fails with an error that is no
// conflict (so it is not retried within the pass); later ones go through.
// matched counts those patches.
func failOnce(specOfNode string, statusOfMigLayout string, matched *int) interceptor.Funcs {
	errDown := errors.New("the API server is unavailable")
	return interceptor.Funcs{
		Patch: func(ctx context.Context, cl client.WithWatch, obj client.Object, p client.Patch, opts ...client.PatchOption) error {
			if n, ok := obj.(*v1alpha1.NodeMigLayout); ok && specOfNode != "" && n.Name == specOfNode {
				*matched++
				if *matched == 1 {
					return errDown
				}
			}
			return cl.Patch(ctx, obj, p, opts...)
		},
		SubResourcePatch: func(ctx context.Context, cl client.Client, sub string, obj client.Object, p client.Patch, opts ...client.SubResourcePatchOption) error {
			if ml, ok := obj.(*v1alpha1.MigLayout); ok && statusOfMigLayout != "" && ml.Name == statusOfMigLayout {
				*matched++
				if *matched == 1 {
					return errDown
				}
			}
			return cl.SubResource(sub).Patch(ctx, obj, p, opts...)
		},
	}
}

// passUntilError runs passes as the controller would, each when asked,
// until one fails; it fails the test if none does.
func (h *autoCluster) passUntilError(ctx context.Context) {
	h.t.Helper()
	for range 20 {
		res, err := h.a.Reconcile(ctx, autoKey)
		if err != nil {
			return
		}
		h.now = h.now.Add(res.RequeueAfter)
	}
	h.t.Fatal("no pass failed")
}

// passAgain runs the next pass a second later, as the controller's retry
// of a failed pass once its backoff has passed, or its next pass on
// unchanged inputs; it fails the test if the pass fails.
func (h *autoCluster) passAgain() {
	h.t.Helper()
	h.now = h.now.Add(time.Second)
	if _, err := h.a.Reconcile(context.Background(), autoKey); err != nil {
		h.t.Fatal(err)
	}
}

// TestPlanWrittenAgainAfterAFailedSpecWrite: the write of the plan's
// change on n1 fails (the API server is down for a moment). The retry
// reads the same inputs, yet plans and writes them again, rather than take
// them for planned already: the pod would otherwise wait until some other
// input changed.
func TestPlanWrittenAgainAfterAFailedSpecWrite(t *testing.T) {
	ml := autoMigLayout("auto", nil)
	patches := 0
	h := newAutoClusterIntercepted(t, ml, failOnce("n1", "", &patches),
		node("n1", map[string]string{"pool": "auto"}), autoNML("n1", ml, a100(0).layout("7g.80gb@0")),
		autoClaim("c1", profileSelector("3g.40gb")), autoPod("p1", h0(), "c1"))
	h.passUntilError(context.Background())
	if got := h.specOf("n1"); len(got) != 0 {
		t.Fatalf("n1's spec %v written though its write failed: the test shows nothing", got)
	}
	h.passAgain()
	if got := h.specOf("n1")[0]; !layoutHas(got, "3g.40gb") {
		t.Errorf("after the retry n1/gpu-0 -> %q, want the change for p1 (a 3g.40gb) written", got)
	}
}

// TestAutoStatusWrittenAgainAfterAFailedWrite: the write of status.auto
// fails once, in a pass that plans (p1 waits, its GPU's devices in use)
// and in one that does not (no pod at all). The retry, on the same inputs,
// writes the status all the same.
func TestAutoStatusWrittenAgainAfterAFailedWrite(t *testing.T) {
	for name, tc := range map[string]struct {
		pod         bool
		wantPending int32
	}{
		"a pass that plans":           {pod: true, wantPending: 1},
		"a pass with nothing to plan": {pod: false},
	} {
		t.Run(name, func(t *testing.T) {
			ml := autoMigLayout("auto", nil)
			patches := 0
			h := newAutoClusterIntercepted(t, ml, failOnce("", "auto", &patches),
				node("n1", map[string]string{"pool": "auto"}),
				autoNML("n1", ml, a100(0).layout("3g.40gb@0,3g.40gb@4").inUse("3g.40gb@0,3g.40gb@4")),
				autoClaim("c1", profileSelector("3g.40gb")))
			if tc.pod {
				h.create(autoPod("p1", h0(), "c1"))
			}
			h.passUntilError(context.Background())
			if st := h.autoStatus(); st != nil {
				t.Fatalf("status.auto %+v written though its write failed: the test shows nothing", *st)
			}
			h.passAgain()
			st := h.autoStatus()
			if st == nil {
				t.Fatalf("after the retry no status.auto written (%d status writes)", patches)
			}
			if st.PendingPods != tc.wantPending {
				t.Errorf("status.auto counts %d pending pods, want %d", st.PendingPods, tc.wantPending)
			}
		})
	}
}

// TestPlanMadeAgainAfterAFailedPlan: a pass whose planning fails (its
// context ends) is planned again by the retry on the same inputs.
func TestPlanMadeAgainAfterAFailedPlan(t *testing.T) {
	ml := autoMigLayout("auto", nil)
	h := newAutoCluster(t, ml, node("n1", map[string]string{"pool": "auto"}), autoNML("n1", ml, a100(0).layout("7g.80gb@0")),
		autoClaim("c1", profileSelector("3g.40gb")), autoPod("p1", h0(), "c1"))
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	h.passUntilError(ended)
	if got := h.specOf("n1"); len(got) != 0 {
		t.Fatalf("n1's spec %v written by a pass whose planning failed: the test shows nothing", got)
	}
	h.passAgain()
	if got := h.specOf("n1")[0]; !layoutHas(got, "3g.40gb") {
		t.Errorf("after the retry n1/gpu-0 -> %q, want the change for p1 (a 3g.40gb) written", got)
	}
}

// specMovedOnRead is a client whose reads of NodeMigLayout node, while
// moved, show its spec otherwise than the plan read it (another writer's
// spec, not yet in the cache the plan read): the plan's change there is
// not written. reads counts those reads.
type specMovedOnRead struct {
	client.Client
	node  string
	moved bool
	reads int
}

func (c *specMovedOnRead) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if err := c.Client.Get(ctx, key, obj, opts...); err != nil {
		return err
	}
	if n, ok := obj.(*v1alpha1.NodeMigLayout); ok && key.Name == c.node && c.moved {
		c.reads++
		n.Spec.GPUs = append(n.Spec.GPUs, v1alpha1.GPUSpec{Index: 0, MIGEnabled: true, Layout: "7g.80gb@0", Reason: "another writer"})
	}
	return nil
}

// TestChangeNotWrittenIsPlannedAgainOnSameInputs: the plan's change on n1
// is not written (n1's spec, read for the write, is not the one the plan
// read). The next pass reads the same inputs as the plan did, yet plans
// and writes the change, rather than take them for planned.
func TestChangeNotWrittenIsPlannedAgainOnSameInputs(t *testing.T) {
	ml := autoMigLayout("auto", nil)
	h := newAutoCluster(t, ml, node("n1", map[string]string{"pool": "auto"}), autoNML("n1", ml, a100(0).layout("7g.80gb@0")),
		autoClaim("c1", profileSelector("3g.40gb")), autoPod("p1", h0(), "c1"))
	moving := &specMovedOnRead{Client: h.c, node: "n1", moved: true}
	h.a.Client = moving
	// Passes, each when asked, until the plan's write reads n1.
	for range 20 {
		res, err := h.a.Reconcile(context.Background(), autoKey)
		if err != nil {
			t.Fatal(err)
		}
		if moving.reads > 0 {
			break
		}
		h.now = h.now.Add(res.RequeueAfter)
	}
	if moving.reads == 0 || len(h.specOf("n1")) != 0 {
		t.Fatalf("n1's spec %v after the first plan, want nothing written: the test shows nothing", h.specOf("n1"))
	}
	moving.moved = false
	h.passAgain()
	if got := h.specOf("n1")[0]; !layoutHas(got, "3g.40gb") {
		t.Errorf("after the next pass n1/gpu-0 -> %q, want the change for p1 (a 3g.40gb) written", got)
	}
}
