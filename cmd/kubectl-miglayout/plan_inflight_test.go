package main

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// TestPlanAutoShowsUnneededCancel: plan decides as the controller decides.
// auto-node's GPU 0 is draining towards 3g.40gb@4 for ml/gone, which is no
// longer pending (deleted): the controller cancels that change before
// anything is destroyed (UnneededChanges), setting the GPU's desired layout
// back to 7g.80gb@0. The dry run shows only BlockedChanges' cancels and
// the planner's changes, so it says nothing would change.
func TestPlanAutoShowsUnneededCancel(t *testing.T) {
	h100 := "H100-SXM5-80GB"
	nml := &v1alpha1.NodeMigLayout{
		ObjectMeta: metav1.ObjectMeta{Name: "auto-node"},
		Spec: v1alpha1.NodeMigLayoutSpec{MigLayout: "on-demand", GPUs: []v1alpha1.GPUSpec{
			{Index: 0, MIGEnabled: true, Layout: "3g.40gb@4", Reason: "serves 1 pending pod(s): ml/gone", ServedPods: []string{"ml/gone"}}}},
		Status: v1alpha1.NodeMigLayoutStatus{GPUs: []v1alpha1.GPUStatus{
			{Index: 0, Product: "NVIDIA H100 80GB HBM3", Model: h100, MIGEnabled: true, MIGPending: true, Layout: "7g.80gb@0",
				Phase: v1alpha1.PhaseDraining, Reason: "Draining", Message: "draining gpu-0-mig-7g80gb-0-0"},
		}},
	}
	objs := []client.Object{node("auto-node", map[string]string{"pool": "auto"}), nml, migClass()}
	out, _, err := runWith(t, objs, "plan", "-f", "testdata/plan-auto.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "cancels the change to 3g.40gb@4") {
		t.Errorf("plan does not show the cancel the controller writes (auto-node gpu-0 3g.40gb@4 -> 7g.80gb@0, none of its pods waits):\n%s", out)
	}
}

// TestPlanAutoReclaimInFlight: auto-node's GPU 0 drains its two free
// 1g.10gb to be given back whole (7g.80gb@0, for no pod). With nothing
// pending the dry run shows no change (the reclaim is written already);
// with a pod pending for a 1g.10gb it shows what the controller writes:
// the cancel, the pod getting a free 1g.10gb as it is, or where those
// devices are in the way of larger ones, the pod's own change in the
// reclaim's place.
func TestPlanAutoReclaimInFlight(t *testing.T) {
	h100 := "H100-SXM5-80GB"
	reclaiming := func(actual string) *v1alpha1.NodeMigLayout {
		return &v1alpha1.NodeMigLayout{
			ObjectMeta: metav1.ObjectMeta{Name: "auto-node"},
			Spec: v1alpha1.NodeMigLayoutSpec{MigLayout: "on-demand", GPUs: []v1alpha1.GPUSpec{
				{Index: 0, MIGEnabled: true, Layout: "7g.80gb@0", Reason: "gives the GPU, idle for 5m0s, back whole"}}},
			Status: v1alpha1.NodeMigLayoutStatus{GPUs: []v1alpha1.GPUStatus{
				{Index: 0, Product: "NVIDIA H100 80GB HBM3", Model: h100, MIGEnabled: true, MIGPending: true, Layout: actual,
					Phase: v1alpha1.PhaseDraining, Reason: "Draining", Message: "draining " + actual},
			}},
		}
	}
	claim, pod := pending("small", "small-gpu", "device.attributes['mig.miglayout.io'].profile == '1g.10gb'", 1000)
	for name, tc := range map[string]struct {
		actual   string
		pods     []client.Object
		want     []string
		wantNone []string
	}{
		"nothing pending": {actual: "1g.10gb@5,1g.10gb@6", want: []string{"Summary: 0 GPUs would change"}, wantNone: []string{"-> 7g.80gb@0", "cancels"}},
		"a 1g.10gb pod pending": {actual: "1g.10gb@5,1g.10gb@6", pods: []client.Object{claim, pod},
			want: []string{"cancels giving the GPU back as 7g.80gb@0 before anything is destroyed: pending pods get its free devices as they are: ml/small"}},
		"a 1g.10gb pod pending, the free devices in the way": {actual: "1g.10gb@0,1g.10gb@1", pods: []client.Object{claim, pod},
			want: []string{"gpu-0  1g.10gb@0,1g.10gb@1 -> 1g.10gb@6", "serves:   ml/small"}, wantNone: []string{"cancels"}},
	} {
		t.Run(name, func(t *testing.T) {
			objs := append([]client.Object{node("auto-node", map[string]string{"pool": "auto"}), reclaiming(tc.actual), migClass()}, tc.pods...)
			out, _, err := runWith(t, objs, "plan", "-f", "testdata/plan-auto.yaml")
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range tc.want {
				if !strings.Contains(out, s) {
					t.Errorf("plan does not say %q:\n%s", s, out)
				}
			}
			for _, s := range tc.wantNone {
				if strings.Contains(out, s) {
					t.Errorf("plan says %q:\n%s", s, out)
				}
			}
		})
	}
}

// TestPlanAutoShowsReclaim: a GPU whose agent has seen it idle for an hour
// (status.gpus[].idleSince) is shown given back whole, as the controller
// gives it back; one idle for a minute is not yet.
func TestPlanAutoShowsReclaim(t *testing.T) {
	for name, tc := range map[string]struct {
		idle time.Duration
		want bool
	}{
		"idle for an hour":  {idle: time.Hour, want: true},
		"idle for a minute": {idle: time.Minute},
	} {
		t.Run(name, func(t *testing.T) {
			// runWith's clock reads Unix time 1060.
			since := metav1.NewTime(time.Unix(1060, 0).Add(-tc.idle))
			nml := &v1alpha1.NodeMigLayout{
				ObjectMeta: metav1.ObjectMeta{Name: "auto-node"},
				Spec: v1alpha1.NodeMigLayoutSpec{MigLayout: "on-demand", GPUs: []v1alpha1.GPUSpec{
					{Index: 0, MIGEnabled: true, Layout: "1g.10gb@0,1g.10gb@1"}}},
				Status: v1alpha1.NodeMigLayoutStatus{GPUs: []v1alpha1.GPUStatus{
					{Index: 0, UUID: "GPU-0", Product: "NVIDIA H100 80GB HBM3", Model: "H100-SXM5-80GB", MIGEnabled: true, MIGPending: true,
						Layout: "1g.10gb@0,1g.10gb@1", Phase: v1alpha1.PhaseReady, IdleSince: &since},
				}},
			}
			out, _, err := runWith(t, []client.Object{node("auto-node", map[string]string{"pool": "auto"}), nml, migClass()}, "plan", "-f", "testdata/plan-auto.yaml")
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Contains(out, "gives the GPU, idle for 5m0s, back whole"); got != tc.want {
				t.Errorf("plan shows the GPU given back whole: %t, want %t:\n%s", got, tc.want, out)
			}
		})
	}
}
