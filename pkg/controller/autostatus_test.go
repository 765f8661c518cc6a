package controller

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/miglayout/miglayout/api/v1alpha1"
	"github.com/miglayout/miglayout/pkg/mig"
	"github.com/miglayout/miglayout/pkg/mig/gpu"
	"github.com/miglayout/miglayout/pkg/planner"
)

func TestAutoStatuses(t *testing.T) {
	autoML := func(name string) *v1alpha1.MigLayout {
		ml := migLayout(name).build()
		ml.UID = types.UID("uid-" + name)
		ml.Spec.Mode = v1alpha1.ModeAuto
		return &ml
	}
	a, b := autoML("a"), autoML("b")
	static := migLayout("s").build()
	static.Spec.Mode = v1alpha1.ModeStatic
	gone := autoML("gone")
	gone.DeletionTimestamp = &metav1.Time{}
	in := AutoInputs{
		MigLayouts: []v1alpha1.MigLayout{*a, *b, static, *gone},
		NodeMigLayouts: map[string]*v1alpha1.NodeMigLayout{
			"a1": ownedBy(nodeMigLayout("a1").build(), a),
			"a2": ownedBy(nodeMigLayout("a2").build(), a),
			"b1": ownedBy(nodeMigLayout("b1").build(), b),
			"s1": ownedBy(nodeMigLayout("s1").build(), &static),
		},
	}
	pending := make([]planner.Pod, 5)
	for i := range pending {
		pending[i] = planner.Pod{Pod: &corev1.Pod{}}
	}
	// a2's GPU 1 is changing (a change of an earlier plan in flight).
	snap := planner.Snapshot{Pending: pending, Nodes: []planner.Node{{Node: &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "a2"}},
		GPUs: []planner.GPU{{Info: gpu.GPU{Index: 0}}, {Info: gpu.GPU{Index: 1}, Changing: true}}}}}
	res := &planner.Result{
		Changes: []planner.Change{{Node: "a1", GPU: 0, Serves: []string{"ns/p1"}}, {Node: "a1", GPU: 1}, {Node: "b1", GPU: 0, Serves: []string{"ns/p3"}}},
		Served: []planner.Placement{
			{Pod: "ns/p1", Node: "a1", Devices: []string{"gpu-0-mig-3g40gb-9-4"}, NeedsChange: true},
			// A free device that exists: nothing to wait for.
			{Pod: "ns/p2", Node: "a2", Devices: []string{"gpu-0-mig-1g10gb-19-0"}},
			// A device coming with the change in flight.
			{Pod: "ns/p8", Node: "a2", Devices: []string{"gpu-1-mig-1g10gb-19-6"}},
			{Pod: "ns/p3", Node: "b1", Devices: []string{"gpu-0-mig-3g40gb-9-0"}, NeedsChange: true},
		},
		Kept: map[string]planner.Kept{"ns/p4": {Node: "b1", GPU: 0, Profile: "7g.80gb", Placement: mig.Placement{Size: 8}}},
		Unservable: map[string]string{
			"ns/p5": planner.NoRoom, "ns/p6": planner.NoRoom, "ns/p7": "no profile satisfies the claim",
			// Planned once the claim it shares with p1 is allocated.
			"ns/p9": planner.WaitsForSharedClaim,
		},
		// s1 is not an Auto node: its spares count nowhere.
		MissingSpares: map[string]map[string]int{"a1": {"1g.10gb": 2, "2g.20gb": 1}, "a2": {"1g.10gb": 1}, "s1": {"1g.10gb": 4}},
	}
	tests := map[string]struct {
		res  *planner.Result
		want map[string]v1alpha1.AutoStatus
	}{
		"a plan: counts on each MigLayout's nodes (pods given a free device do not wait; GPUs changing since an earlier plan count; spares missing), cluster-wide counts on every Auto MigLayout": {
			res: res,
			want: map[string]v1alpha1.AutoStatus{
				"a": {PendingPods: 5, WaitingForRepartitionPods: 2, ChangedGPUs: 3, WaitingForRoomPods: 2, NotServablePods: 1, MissingSpares: 4},
				"b": {PendingPods: 5, WaitingForRepartitionPods: 1, ChangedGPUs: 1, WaitingForCapacityPods: 1, WaitingForRoomPods: 2, NotServablePods: 1},
			},
		},
		"no plan: the pending pods and the GPUs still changing": {
			want: map[string]v1alpha1.AutoStatus{"a": {PendingPods: 5, ChangedGPUs: 1}, "b": {PendingPods: 5}},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, AutoStatuses(in, snap, tc.res)); diff != "" {
				t.Errorf("Auto statuses (-want +got):\n%s", diff)
			}
		})
	}
}

// TestAutoStatusMissingSparesBackToZero: status.auto.missingSpares goes
// back to 0 once the plan lacks no spare. The status is written as a merge
// patch, which keeps a key it does not name: a count of 0 left out of it
// (omitempty) kept the last count for good, also through a restart.
func TestAutoStatusMissingSparesBackToZero(t *testing.T) {
	ctx := context.Background()
	ml := autoMigLayout("auto", nil)
	c := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(ml).
		WithStatusSubresource(&v1alpha1.MigLayout{}).Build()
	a := &AutoPlanner{Client: c, labelKeys: map[string]bool{"pool": true}}
	get := func() v1alpha1.MigLayout {
		t.Helper()
		var got v1alpha1.MigLayout
		if err := c.Get(ctx, types.NamespacedName{Name: "auto"}, &got); err != nil {
			t.Fatal(err)
		}
		return got
	}
	cur := get()
	if err := a.writeAutoStatus(ctx, []v1alpha1.MigLayout{cur}, map[string]v1alpha1.AutoStatus{"auto": {PendingPods: 1, MissingSpares: 3}}); err != nil {
		t.Fatal(err)
	}
	cur = get()
	if cur.Status.Auto == nil || cur.Status.Auto.MissingSpares != 3 {
		t.Fatalf("after the first write: %+v", cur.Status.Auto)
	}
	if err := a.writeAutoStatus(ctx, []v1alpha1.MigLayout{cur}, map[string]v1alpha1.AutoStatus{"auto": {PendingPods: 2, MissingSpares: 0}}); err != nil {
		t.Fatal(err)
	}
	cur = get()
	if cur.Status.Auto.PendingPods != 2 {
		t.Fatalf("second write not applied: %+v", cur.Status.Auto)
	}
	if cur.Status.Auto.MissingSpares != 0 {
		t.Errorf("status.auto.missingSpares = %d after the plan lacks no spare, want 0 (stale)", cur.Status.Auto.MissingSpares)
	}
	// And a restarted controller (nothing remembered) does not fix it either.
	b := &AutoPlanner{Client: c, labelKeys: map[string]bool{"pool": true}}
	if err := b.writeAutoStatus(ctx, []v1alpha1.MigLayout{cur}, map[string]v1alpha1.AutoStatus{"auto": {PendingPods: 2, MissingSpares: 0}}); err != nil {
		t.Fatal(err)
	}
	if cur = get(); cur.Status.Auto.MissingSpares != 0 {
		t.Errorf("after a restart: missingSpares = %d, want 0", cur.Status.Auto.MissingSpares)
	}
}

// TestAutoStatusCountsAlwaysSent: the Auto status is written as a merge
// patch, which keeps a key it does not name, so every count goes out also
// when 0 (no omitempty): a zero left out would keep the stored count.
func TestAutoStatusCountsAlwaysSent(t *testing.T) {
	raw, err := json.Marshal(v1alpha1.AutoStatus{})
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatal(err)
	}
	typ := reflect.TypeOf(v1alpha1.AutoStatus{})
	for i := range typ.NumField() {
		f := typ.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if f.Type.Kind() != reflect.Int32 {
			continue
		}
		if _, ok := got[name]; !ok {
			t.Errorf("count %s is left out when 0: a merge patch would keep the stored count", name)
		}
	}
}
