package agent

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/miglayout/miglayout/api/v1alpha1"
	"github.com/miglayout/miglayout/pkg/mig"
	"github.com/miglayout/miglayout/pkg/mig/gpu"
)

// fakeXidMarks records the clear requests and applies each ID once;
// XidOf reads xids, by "<gpu>/<uuid>".
type fakeXidMarks struct {
	applied []string
	parts   [][]v1alpha1.ClearXidsPart
	marked  []string
	newer   []string
	xids    map[string]uint64
	// present are the arguments of the PruneXids calls.
	present []map[int][]string
}

func (f *fakeXidMarks) PruneXids(_ context.Context, present map[int][]string) {
	f.present = append(f.present, present)
}

func (f *fakeXidMarks) XidOf(gpuIndex int, _, uuid string) (uint64, bool) {
	code, ok := f.xids[fmt.Sprintf("%d/%s", gpuIndex, uuid)]
	return code, ok
}

func (f *fakeXidMarks) ClearXids(_ context.Context, request string, parts []v1alpha1.ClearXidsPart) ([]string, []string, bool, error) {
	for _, id := range f.applied {
		if id == request {
			return nil, nil, false, nil
		}
	}
	f.applied = append(f.applied, request)
	f.parts = append(f.parts, parts)
	cleared, kept := f.marked, f.newer
	f.marked, f.newer = nil, nil
	return cleared, kept, true, nil
}

// TestApplyClearXids: checkNode hands the Node's clear request to the Xid
// marks once per ID and records what was cleared on the Node; a value that
// does not parse clears nothing and is told once.
func TestApplyClearXids(t *testing.T) {
	at2030 := &metav1.Time{Time: time.Date(2026, 12, 6, 20, 30, 0, 0, time.UTC)}
	type step struct {
		value  string // the annotation; "-" for none
		marked []string
		newer  []string // marks made after the request
		want   string   // the event recorded, "" for none
	}
	tests := map[string]struct {
		steps   []step
		applied []string
		// parts are what each request applied asked for.
		parts [][]v1alpha1.ClearXidsPart
	}{
		"request of every GPU, seen twice": {
			steps: []step{
				{value: `{"id":"r1"}`, marked: []string{"GPU 0: Xid 48"},
					want: `Normal XidsCleared Request "r1" to clear the Xid marks of every GPU: cleared GPU 0: Xid 48; the devices no other mark holds are reported Healthy and published without the taint miglayout.io/xid`},
				{value: `{"id":"r1"}`},
			},
			applied: []string{"r1"}, parts: [][]v1alpha1.ClearXidsPart{{{}}},
		},
		"requests of some GPUs": {
			steps: []step{
				{value: `{"id":"r1","gpus":[1,3]}`,
					want: `Normal XidsCleared Request "r1" to clear the Xid marks of GPUs [1 3]: no mark was set`},
				{value: `{"id":"r2","gpus":[0]}`, marked: []string{"MIG-1: Xid 94"},
					want: `Normal XidsCleared Request "r2" to clear the Xid marks of GPUs [0]: cleared MIG-1: Xid 94; the devices no other mark holds are reported Healthy and published without the taint miglayout.io/xid`},
			},
			applied: []string{"r1", "r2"}, parts: [][]v1alpha1.ClearXidsPart{{{GPUs: []int{1, 3}}}, {{GPUs: []int{0}}}},
		},
		"no request": {steps: []step{{value: "-"}}},
		"every mark newer than the request": {
			steps: []step{
				{value: `{"id":"r1","requestedAt":"2026-12-06T20:30:00Z"}`, newer: []string{"GPU 0: Xid 48"},
					want: `Normal XidsCleared Request "r1" to clear the Xid marks of every GPU: kept GPU 0: Xid 48, whose Xid came after the request (2026-12-06T20:30:00Z): their devices stay Unhealthy and tainted; clear again once they were looked at`},
			},
			applied: []string{"r1"}, parts: [][]v1alpha1.ClearXidsPart{{{RequestedAt: at2030}}},
		},
		"request with its time, a newer mark kept": {
			steps: []step{
				{value: `{"id":"r1","requestedAt":"2026-12-06T20:30:00Z"}`, marked: []string{"MIG-1: Xid 94"}, newer: []string{"GPU 0: Xid 48"},
					want: `Normal XidsCleared Request "r1" to clear the Xid marks of every GPU: cleared MIG-1: Xid 94; the devices no other mark holds are reported Healthy and published without the taint miglayout.io/xid; kept GPU 0: Xid 48, whose Xid came after the request (2026-12-06T20:30:00Z): their devices stay Unhealthy and tainted; clear again once they were looked at`},
			},
			applied: []string{"r1"}, parts: [][]v1alpha1.ClearXidsPart{{{RequestedAt: at2030}}},
		},
		"value that does not parse, then a good one": {
			steps: []step{
				{value: `{"id":"r1","gpu":[0]}`,
					want: `Warning ClearXidsRefused parsing miglayout.io/clear-xids "{\"id\":\"r1\",\"gpu\":[0]}": want JSON such as {"id":"1","gpus":[0]}: json: unknown field "gpu"; nothing cleared`},
				{value: `{"id":"r1","gpu":[0]}`},
				{value: `{"id":"r1","gpus":[0]}`, want: `Normal XidsCleared Request "r1" to clear the Xid marks of GPUs [0]: no mark was set`},
			},
			applied: []string{"r1"}, parts: [][]v1alpha1.ClearXidsPart{{{GPUs: []int{0}}}},
		},
		"request carrying earlier ones": {
			steps: []step{
				{value: `{"id":"r3","gpus":[2],"requestedAt":"2026-12-06T20:30:00Z","earlier":[{"gpus":[0,1],"requestedAt":"2026-12-06T20:00:00Z"},{"requestedAt":"2026-12-06T20:10:00Z"}]}`,
					marked: []string{"GPU 0: Xid 48"}, newer: []string{"MIG-2: Xid 94"},
					want: `Normal XidsCleared Request "r3" to clear the Xid marks of GPUs [2] (and, for the requests it replaced, of GPUs [0 1] as of 2026-12-06T20:00:00Z, every GPU as of 2026-12-06T20:10:00Z): cleared GPU 0: Xid 48; the devices no other mark holds are reported Healthy and published without the taint miglayout.io/xid; kept MIG-2: Xid 94, whose Xid came after the requests naming their GPU: their devices stay Unhealthy and tainted; clear again once they were looked at`},
			},
			applied: []string{"r3"}, parts: [][]v1alpha1.ClearXidsPart{{
				{GPUs: []int{2}, RequestedAt: at2030},
				{GPUs: []int{0, 1}, RequestedAt: &metav1.Time{Time: time.Date(2026, 12, 6, 20, 0, 0, 0, time.UTC)}},
				{RequestedAt: &metav1.Time{Time: time.Date(2026, 12, 6, 20, 10, 0, 0, time.UTC)}},
			}},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			c := nmlClient(t, &v1alpha1.NodeMigLayout{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}, interceptor.Funcs{})
			node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}
			if err := c.Create(t.Context(), node); err != nil {
				t.Fatal(err)
			}
			marks := &fakeXidMarks{}
			rec := events.NewFakeRecorder(4)
			r := &NodeReconciler{Client: c, NodeName: "n1", Recorder: rec, XidMarks: marks, AllowDevicePlugin: true}
			for i, s := range tc.steps {
				node.Annotations = nil
				if s.value != "-" {
					node.Annotations = map[string]string{v1alpha1.AnnotationClearXids: s.value}
				}
				if err := c.Update(t.Context(), node); err != nil {
					t.Fatal(err)
				}
				marks.marked, marks.newer = s.marked, s.newer
				if _, err := r.checkNode(t.Context()); err != nil {
					t.Fatal(err)
				}
				if got := recorded(rec); got != s.want {
					t.Errorf("step %d: event %q, want %q", i, got, s.want)
				}
			}
			if diff := cmp.Diff(tc.applied, marks.applied); diff != "" {
				t.Errorf("requests applied (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.parts, marks.parts, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("what the requests asked for (-want +got):\n%s", diff)
			}
		})
	}
}

// TestGPUXids: the status lists, per GPU, the Xid of the GPU as a whole
// alone where one hit it, else those of its MIG devices by published
// name, and that of a GPU NVML cannot read; BuildStatus copies them to
// the GPU's row.
func TestGPUXids(t *testing.T) {
	mk := func(idx int, uuids ...string) GPUState {
		g := GPUState{GPU: gpu.GPU{Index: idx, UUID: fmt.Sprintf("GPU-%d", idx)}}
		for i, u := range uuids {
			g.Devices = append(g.Devices, gpu.MIGDevice{GPUIndex: idx, Profile: "1g.10gb", ProfileID: 19, Placement: mig.Placement{Start: i, Size: 1}, UUID: u})
		}
		return g
	}
	gpus := []GPUState{mk(0, "MIG-a", "MIG-b", ""), mk(1, "MIG-c"), mk(2), mk(3, "MIG-d")}
	marks := &fakeXidMarks{xids: map[string]uint64{
		"0/MIG-b": 94, "0/MIG-a": 63, // devices of GPU 0
		"1/": 48, "1/MIG-c": 94, // GPU 1 as a whole: it alone is listed
		"2/": 79, // GPU 2, MIG off
	}}
	marks.xids["4/"] = 79 // GPU 4, off the bus
	r := &NodeReconciler{XidMarks: marks, Repartitioner: &Repartitioner{Inventory: &PoolInventory{NodeName: "n1"}}}
	unreadable := map[int]GPUResult{4: {Phase: v1alpha1.PhaseFailed, Reason: v1alpha1.ReasonGPUUnreadable, Message: "fell off the bus"}, 0: {Phase: v1alpha1.PhaseReady}}
	res := &SyncResult{GPUs: gpus, Results: unreadable}
	got := r.gpuXids(res)
	want := map[int][]v1alpha1.GPUXid{
		0: {{Xid: 63, Device: "gpu-0-mig-1g10gb-19-0"}, {Xid: 94, Device: "gpu-0-mig-1g10gb-19-1"}},
		1: {{Xid: 48}},
		2: {{Xid: 79}},
		4: {{Xid: 79}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("gpuXids (-want +got):\n%s", diff)
	}
	res.Xids = got
	st := BuildStatus(v1alpha1.NodeMigLayoutStatus{}, 1, res, metav1.Now())
	rows := map[int32][]v1alpha1.GPUXid{}
	for _, g := range st.GPUs {
		if len(g.Xids) > 0 {
			rows[g.Index] = g.Xids
		}
	}
	if diff := cmp.Diff(map[int32][]v1alpha1.GPUXid{0: want[0], 1: want[1], 2: want[2], 4: want[4]}, rows); diff != "" {
		t.Errorf("status rows' Xids (-want +got):\n%s", diff)
	}
	if (&NodeReconciler{}).gpuXids(res) != nil {
		t.Error("gpuXids without XidMarks is not nil")
	}
}

// TestReconcilePrunesXidMarks: after each pass, of a node a MigLayout
// manages or not, the marks are told which MIG devices each GPU read has
// (none for a GPU with MIG mode off), so that those of devices gone go.
func TestReconcilePrunesXidMarks(t *testing.T) {
	g := newRig(t, "2xA100-SXM4-80GB")
	g.setup(t, 0, "3g.40gb@0,3g.40gb@4")
	r, c, _ := nodeReconcilerOn(t, g, spec(0, "3g.40gb@0,3g.40gb@4"))
	marks := &fakeXidMarks{}
	r.XidMarks = marks
	var uuids []string
	for _, gi := range g.sim.Snapshot().GPUs[0].GPUInstances {
		for _, ci := range gi.ComputeInstances {
			uuids = append(uuids, ci.UUID)
		}
	}
	if len(uuids) != 2 {
		t.Fatalf("GPU 0's MIG devices %v, want two", uuids)
	}
	req := ctrl.Request{NamespacedName: types.NamespacedName{Name: "n1"}}
	if _, err := r.Reconcile(t.Context(), req); err != nil {
		t.Fatal(err)
	}
	// No MigLayout manages the node any more.
	if err := c.Delete(t.Context(), &v1alpha1.NodeMigLayout{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Reconcile(t.Context(), req); err != nil {
		t.Fatal(err)
	}
	want := map[int][]string{0: uuids, 1: {}}
	if diff := cmp.Diff([]map[int][]string{want, want}, marks.present, cmpopts.SortSlices(func(a, b string) bool { return a < b })); diff != "" {
		t.Errorf("PruneXids calls (-want +got):\n%s", diff)
	}
}

// boardMarks holds whole-GPU Xid marks by the index they were restored
// at, each naming its board, and finds them as the kubelet plugin does:
// by the board's UUID where the caller knows it, else by index unless the
// mark there names another board.
type boardMarks map[int]struct {
	board string
	code  uint64
}

func (m boardMarks) PruneXids(context.Context, map[int][]string) {}

func (m boardMarks) ClearXids(context.Context, string, []v1alpha1.ClearXidsPart) ([]string, []string, bool, error) {
	return nil, nil, false, nil
}

func (m boardMarks) XidOf(idx int, board, _ string) (uint64, bool) {
	if board != "" {
		for _, x := range m {
			if x.board == board {
				return x.code, true
			}
		}
	}
	x, ok := m[idx]
	if ok && board != "" && x.board != board {
		return 0, false
	}
	return x.code, ok
}

// TestGPUXidsOfABoardNumberedAnew: board B's mark, restored at index 0
// where NVML now numbers board A, is listed on B's row alone, as the
// Xid taint is published on B's devices alone; a GPU NVML cannot read is
// still found by its index.
func TestGPUXidsOfABoardNumberedAnew(t *testing.T) {
	marks := boardMarks{0: {board: "GPU-B", code: 48}, 2: {board: "GPU-C", code: 79}}
	gpus := []GPUState{{GPU: gpu.GPU{Index: 0, UUID: "GPU-A"}}, {GPU: gpu.GPU{Index: 1, UUID: "GPU-B"}}}
	r := &NodeReconciler{XidMarks: marks, Repartitioner: &Repartitioner{Inventory: &PoolInventory{NodeName: "n1"}}}
	res := &SyncResult{GPUs: gpus, Results: map[int]GPUResult{
		0: {Phase: v1alpha1.PhaseReady}, 1: {Phase: v1alpha1.PhaseReady},
		2: {Phase: v1alpha1.PhaseFailed, Reason: v1alpha1.ReasonGPUUnreadable},
	}}
	want := map[int][]v1alpha1.GPUXid{1: {{Xid: 48}}, 2: {{Xid: 79}}}
	if diff := cmp.Diff(want, r.gpuXids(res)); diff != "" {
		t.Errorf("gpuXids (-want +got):\n%s", diff)
	}
}
