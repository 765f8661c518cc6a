package controller

import (
	"fmt"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/miglayout/miglayout/api/v1alpha1"
	"github.com/miglayout/miglayout/pkg/mig"
	"github.com/miglayout/miglayout/pkg/mig/gpu"
	"github.com/miglayout/miglayout/pkg/planner"
)

// TestMakesReclaimAgain: only a change that gives a GPU back whole, on the
// very GPU (node and index) being given back already, is the reclaim made
// again; any other change, one on a GPU that is not being given back, or
// one on a GPU the snapshot lacks, is a change to write.
func TestMakesReclaimAgain(t *testing.T) {
	whole := mig.MustParseLayout("7g.80gb@0")
	snap := planner.Snapshot{Nodes: []planner.Node{
		{Node: &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}, GPUs: []planner.GPU{
			{Info: gpu.GPU{Index: 0}, Reclaiming: true},
			{Info: gpu.GPU{Index: 1}},
		}},
		{Node: &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n2"}}, GPUs: []planner.GPU{
			{Info: gpu.GPU{Index: 0}},
		}},
	}}
	for name, tc := range map[string]struct {
		c    planner.Change
		want bool
	}{
		"reclaim of the GPU being reclaimed":   {c: planner.Change{Node: "n1", GPU: 0, To: whole, Reclaims: true}, want: true},
		"a change for pods there":              {c: planner.Change{Node: "n1", GPU: 0, To: whole}},
		"reclaim of a GPU not being reclaimed": {c: planner.Change{Node: "n1", GPU: 1, To: whole, Reclaims: true}},
		"reclaim of the same index elsewhere":  {c: planner.Change{Node: "n2", GPU: 0, To: whole, Reclaims: true}},
		"reclaim of a GPU the snapshot lacks":  {c: planner.Change{Node: "n3", GPU: 0, To: whole, Reclaims: true}},
	} {
		t.Run(name, func(t *testing.T) {
			if got := MakesReclaimAgain(snap, tc.c); got != tc.want {
				t.Errorf("MakesReclaimAgain = %t, want %t", got, tc.want)
			}
		})
	}
}

// TestUnneededChangeKeptForItsOwnGPUsWaitingPod: a change in flight no pod
// of the plan waits for is kept while a pod that change serves waits
// outside the demand (kube-scheduler has not found it unschedulable); a pod
// another GPU's change on the same node serves does not keep it, nor does
// one in the demand (the plan, which does not wait for the change, has
// placed it).
func TestUnneededChangeKeptForItsOwnGPUsWaitingPod(t *testing.T) {
	waiting := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "w"}}
	demand := *waiting.DeepCopy()
	demand.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable}}
	cancel := planner.Change{Node: "n1", GPU: 1, From: mig.MustParseLayout("3g.40gb@0,3g.40gb@4"), To: mig.MustParseLayout("7g.80gb@0")}
	for name, tc := range map[string]struct {
		pod              corev1.Pod
		serves0, serves1 []string
		want             []planner.Change
	}{
		"its own pod waits":            {pod: waiting, serves0: []string{"ns/gone"}, serves1: []string{"ns/w"}},
		"another GPU's pod waits":      {pod: waiting, serves0: []string{"ns/w"}, serves1: []string{"ns/gone"}, want: []planner.Change{cancel}},
		"its own pod is in the demand": {pod: demand, serves1: []string{"ns/w"}, want: []planner.Change{cancel}},
	} {
		t.Run(name, func(t *testing.T) {
			snap := planner.Snapshot{Nodes: []planner.Node{{Node: &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}, GPUs: []planner.GPU{
				{Info: gpu.GPU{Index: 0}, Changing: true, Serves: tc.serves0},
				{Info: gpu.GPU{Index: 1}, Changing: true, Serves: tc.serves1},
			}}}}
			in := AutoInputs{Pods: []corev1.Pod{tc.pod}, Driver: "mig.miglayout.io"}
			got := UnneededChanges(in, snap, []planner.Change{cancel}, planner.Result{})
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("cancelled (-want +got):\n%s", diff)
			}
		})
	}
}

// TestAutoCancelsListsEveryKind: the cancels kubectl miglayout plan shows
// are those the controller writes: a blocked change, a change for pods
// that no longer wait (nothing destroyed yet), and a reclaim in flight
// the plan does not make again.
func TestAutoCancelsListsEveryKind(t *testing.T) {
	ml := autoMigLayout("auto", nil)
	nml := autoNML("n1", ml,
		a100(0).layout("3g.40gb@0,3g.40gb@4"),
		a100(1).layout("7g.80gb@0"),
		a100(2).layout("7g.80gb@0").inUse("7g.80gb@0").phase(v1alpha1.PhaseBlocked, v1alpha1.ReasonDeviceInUse, "in use"))
	nml.Spec.GPUs = []v1alpha1.GPUSpec{
		{Index: 0, MIGEnabled: true, Layout: "7g.80gb@0"},
		{Index: 1, MIGEnabled: true, Layout: "3g.40gb@0,3g.40gb@4", ServedPods: []string{"ns/gone"}},
		{Index: 2, MIGEnabled: true, Layout: "3g.40gb@0,3g.40gb@4", ServedPods: []string{"ns/other"}},
	}
	in := AutoInputs{MigLayouts: []v1alpha1.MigLayout{*ml}, Nodes: []corev1.Node{*node("n1", map[string]string{"pool": "auto"})},
		NodeMigLayouts: map[string]*v1alpha1.NodeMigLayout{"n1": nml}, Driver: "mig.miglayout.io"}
	snap := BuildSnapshot(in, mig.DefaultCatalog())
	var got []string
	for _, c := range AutoCancels(in, snap, planner.Result{}) {
		got = append(got, fmt.Sprintf("%s/%d: %s -> %s", c.Node, c.GPU, c.From, c.To))
	}
	slices.Sort(got)
	want := []string{
		"n1/0: 7g.80gb@0 -> 3g.40gb@0,3g.40gb@4",
		"n1/1: 3g.40gb@0,3g.40gb@4 -> 7g.80gb@0",
		"n1/2: 3g.40gb@0,3g.40gb@4 -> 7g.80gb@0",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("cancels (-want +got):\n%s", diff)
	}
}

// TestStillCancelsNeedsTheSameActualLayout: a cancel is written only while
// the GPU still shows the change it cancels on the same actual layout: once
// the agent reports another actual layout, the cancel, which would ask for
// the layout the GPU had when the plan read it, is not written.
func TestStillCancelsNeedsTheSameActualLayout(t *testing.T) {
	nmlWith := func(actual string) *v1alpha1.NodeMigLayout {
		return nodeMigLayout("n1").spec(v1alpha1.GPUSpec{Index: 0, MIGEnabled: true, Layout: "3g.40gb@0,3g.40gb@4"}).
			status(a100(0).layout(actual).inUse(actual).phase(v1alpha1.PhaseBlocked, v1alpha1.ReasonDeviceInUse, "in use")).build()
	}
	before := nmlWith("7g.80gb@0")
	x, ok := cancelOf(before, 0)
	if !ok {
		t.Fatal("no cancel of the blocked change")
	}
	for name, tc := range map[string]struct {
		now  *v1alpha1.NodeMigLayout
		want bool
	}{
		"unchanged":             {now: nmlWith("7g.80gb@0"), want: true},
		"another actual layout": {now: nmlWith("4g.40gb@0")},
	} {
		t.Run(name, func(t *testing.T) {
			if got := stillCancels(before, tc.now, x); got != tc.want {
				t.Errorf("stillCancels = %t, want %t", got, tc.want)
			}
		})
	}
}
