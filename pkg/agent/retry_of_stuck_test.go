package agent

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/miglayout/miglayout/api/v1alpha1"
	"github.com/miglayout/miglayout/pkg/mig/nvmlsim"
)

// TestRetryOfFailedGPUToldOnce: a GPU whose change NVML refuses pass after
// pass is told Draining and NVMLError once, with its first attempt, not at
// each retry; a new spec's drain is told again.
func TestRetryOfFailedGPUToldOnce(t *testing.T) {
	g := newRig(t, "1xA100-SXM4-80GB")
	g.setup(t, 0, "3g.40gb@0,3g.40gb@4")
	nml := &v1alpha1.NodeMigLayout{ObjectMeta: metav1.ObjectMeta{Name: "n1", Generation: 1},
		Spec: v1alpha1.NodeMigLayoutSpec{GPUs: []v1alpha1.GPUSpec{spec(0, "7g.80gb@0")}}}
	c := nmlClient(t, nml, interceptor.Funcs{})
	rec := events.NewFakeRecorder(50)
	clock := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	r := &NodeReconciler{Client: c, NodeName: "n1", Repartitioner: g.r, Recorder: rec, Now: func() time.Time { return clock }}
	reasons := func() []string {
		var out []string
		for len(rec.Events) > 0 {
			out = append(out, strings.Fields(<-rec.Events)[1])
		}
		return out
	}
	ctx := context.Background()
	req := ctrl.Request{NamespacedName: types.NamespacedName{Name: "n1"}}
	for pass, want := range [][]string{{EventDraining, EventNVMLError}, nil, nil} {
		if err := g.sim.InjectFault(nvmlsim.Fault{Op: "ComputeInstance.Destroy", Nth: 1, Return: nvml.ERROR_UNKNOWN}); err != nil {
			t.Fatal(err)
		}
		res, err := r.Reconcile(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		clock = clock.Add(res.RequeueAfter + time.Second) // each pass comes at its retry
		if diff := cmp.Diff(want, reasons()); diff != "" {
			t.Errorf("pass %d: events (-want +got):\n%s", pass, diff)
		}
	}
	var cur v1alpha1.NodeMigLayout
	if err := c.Get(ctx, client.ObjectKey{Name: "n1"}, &cur); err != nil {
		t.Fatal(err)
	}
	if g0 := cur.Status.GPUs[0]; g0.Phase != v1alpha1.PhaseFailed || g0.Reason != v1alpha1.ReasonNVMLError {
		t.Fatalf("GPU 0 after the failures: %s %s, want Failed NVMLError", g0.Phase, g0.Reason)
	}
	// A new spec: its drain is told.
	cur.Spec.GPUs = []v1alpha1.GPUSpec{spec(0, "4g.40gb@0")}
	cur.Generation = 2
	if err := c.Update(ctx, &cur); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Reconcile(ctx, req); err != nil {
		t.Fatal(err)
	}
	if got := reasons(); len(got) == 0 || got[0] != EventDraining {
		t.Errorf("a new spec's pass: events %q, want Draining first", got)
	}
}
