package agent

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/miglayout/miglayout/api/v1alpha1"
	"github.com/miglayout/miglayout/pkg/mig"
	"github.com/miglayout/miglayout/pkg/mig/gpu"
)

// readyNode is a node of n GPUs, each on the spec and Ready.
func readyNode(n int) *SyncResult {
	res := &SyncResult{Results: map[int]GPUResult{}, InUse: map[int]mig.Layout{}}
	for i := range n {
		res.GPUs = append(res.GPUs, GPUState{GPU: gpu.GPU{Index: i, UUID: fmt.Sprintf("GPU-%02d", i)}})
		res.Results[i] = GPUResult{Phase: v1alpha1.PhaseReady, Reason: v1alpha1.ReasonLayoutApplied}
	}
	return res
}

// TestReadyConditionOfGPUsNotReady: a node with a GPU in flight or Pending,
// or with GPUs its status cannot list, is not Ready; its Ready condition
// names each GPU not Ready with its phase, and its reason only where that
// is not the phase's name.
func TestReadyConditionOfGPUsNotReady(t *testing.T) {
	with := func(n int, results map[int]GPUResult) *SyncResult {
		res := readyNode(n)
		for idx, r := range results {
			res.Results[idx] = r
		}
		return res
	}
	for name, tc := range map[string]struct {
		res  *SyncResult
		want string
	}{
		"pending": {res: with(2, map[int]GPUResult{1: {Phase: v1alpha1.PhasePending, Reason: v1alpha1.ReasonPending}}),
			want: "not ready: gpu 1 Pending"},
		"draining": {res: with(2, map[int]GPUResult{0: {Phase: v1alpha1.PhaseDraining, Reason: "Draining"}}),
			want: "not ready: gpu 0 Draining"},
		"pending on a failed pass": {res: with(1, map[int]GPUResult{0: {Phase: v1alpha1.PhasePending, Reason: ReasonPassFailed}}),
			want: "not ready: gpu 0 Pending (" + ReasonPassFailed + ")"},
		"a seventeenth GPU": {res: with(maxStatusGPUs+1, nil),
			want: "not ready: 1 GPUs the status cannot list"},
	} {
		t.Run(name, func(t *testing.T) {
			st := BuildStatus(v1alpha1.NodeMigLayoutStatus{}, 1, tc.res, metav1.Now())
			got := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionReady)
			want := &metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonGPUsNotReady,
				Message: tc.want, ObservedGeneration: 1}
			if diff := cmp.Diff(want, got, cmpopts.IgnoreFields(metav1.Condition{}, "LastTransitionTime")); diff != "" {
				t.Errorf("Ready (-want +got):\n%s", diff)
			}
		})
	}
}

// TestDegradedNamesEveryGPU: the Degraded message of a node whose sixteen
// GPUs fail with long messages names each of them (a condition's message
// holds 32768 bytes).
func TestDegradedNamesEveryGPU(t *testing.T) {
	res := readyNode(maxStatusGPUs)
	for i := range maxStatusGPUs {
		res.Results[i] = GPUResult{Phase: v1alpha1.PhaseFailed, Reason: v1alpha1.ReasonNVMLError, Message: strings.Repeat("x", 1000)}
	}
	st := BuildStatus(v1alpha1.NodeMigLayoutStatus{}, 1, res, metav1.Now())
	deg := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionDegraded)
	if deg == nil {
		t.Fatal("no Degraded condition")
	}
	if !strings.Contains(deg.Message, fmt.Sprintf("gpu %d %s", maxStatusGPUs-1, v1alpha1.ReasonNVMLError)) {
		t.Errorf("Degraded message (%d bytes) does not name gpu %d", len(deg.Message), maxStatusGPUs-1)
	}
}

// TestTruncateKeepsAStringOfTheLimit: a string exactly as long as the
// limit is kept whole.
func TestTruncateKeepsAStringOfTheLimit(t *testing.T) {
	if got := truncate("abcdefgh", 8); got != "abcdefgh" {
		t.Errorf("truncate(%q, 8) = %q, want it whole", "abcdefgh", got)
	}
}

// TestBuildStatusSetsAMissingTransitionTime: a row whose status has no
// lastTransitionTime (written by an agent or a hand that set none) gets
// one, though its phase does not change.
func TestBuildStatusSetsAMissingTransitionTime(t *testing.T) {
	old := v1alpha1.NodeMigLayoutStatus{GPUs: []v1alpha1.GPUStatus{{Index: 0, UUID: "GPU-00", Phase: v1alpha1.PhaseReady}}}
	now := metav1.Now()
	st := BuildStatus(old, 1, readyNode(1), now)
	if got := st.GPUs[0].LastTransitionTime; got == nil || !got.Equal(&now) {
		t.Errorf("lastTransitionTime %v, want %v", got, now)
	}
}

// TestStatusListsSixteenCatalogMismatches: a GPU with more catalog
// mismatches than the CRD holds lists the first sixteen (its MaxItems).
func TestStatusListsSixteenCatalogMismatches(t *testing.T) {
	res := readyNode(1)
	for i := range 20 {
		res.GPUs[0].GPU.CatalogMismatches = append(res.GPUs[0].GPU.CatalogMismatches, fmt.Sprintf("mismatch %d", i))
	}
	st := BuildStatus(v1alpha1.NodeMigLayoutStatus{}, 1, res, metav1.Now())
	if got := st.GPUs[0].CatalogMismatches; len(got) != 16 || got[15] != "mismatch 15" {
		t.Errorf("catalogMismatches %q, want the first 16", got)
	}
}

// TestDegradedReasonIsTheFirstUnlistedGPUs: on a node whose sixteen GPUs
// the status lists are Ready, Degraded takes the reason of the first GPU
// it cannot list, by index.
func TestDegradedReasonIsTheFirstUnlistedGPUs(t *testing.T) {
	res := readyNode(maxStatusGPUs)
	res.Results[maxStatusGPUs] = GPUResult{Phase: v1alpha1.PhaseFailed, Reason: v1alpha1.ReasonGPUUnreadable, Message: "NVML cannot read the GPU"}
	res.Results[30] = GPUResult{Phase: v1alpha1.PhaseFailed, Reason: v1alpha1.ReasonGPUMissing, Message: "the node has no GPU with index 30"}
	st := BuildStatus(v1alpha1.NodeMigLayoutStatus{}, 1, res, metav1.Now())
	if deg := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionDegraded); deg == nil || deg.Reason != v1alpha1.ReasonGPUUnreadable {
		t.Errorf("Degraded %+v, want reason %s (gpu %d's)", deg, v1alpha1.ReasonGPUUnreadable, maxStatusGPUs)
	}
}

// TestRenumberedRowKeepsMIGCapable: the row of an index NVML numbered
// anew keeps whether its GPU can run MIG, as a lost GPU's row does: rules
// for every MIG GPU would otherwise take a lost L4 for one.
func TestRenumberedRowKeepsMIGCapable(t *testing.T) {
	old := v1alpha1.NodeMigLayoutStatus{GPUs: []v1alpha1.GPUStatus{
		{Index: 0, UUID: "GPU-h1", Product: "NVIDIA H100 80GB HBM3", Model: "H100-SXM5-80GB", MIGCapable: ptr.To(true), Phase: v1alpha1.PhaseReady},
		{Index: 1, UUID: "GPU-l4", Product: "NVIDIA L4", MIGCapable: ptr.To(false), Phase: v1alpha1.PhaseReady},
	}}
	// The H100 left; NVML shows the L4 at index 0.
	res := &SyncResult{
		GPUs:    []GPUState{{GPU: gpu.GPU{Index: 0, UUID: "GPU-l4", ProductName: "NVIDIA L4"}}},
		Results: map[int]GPUResult{1: {Phase: v1alpha1.PhaseFailed, Reason: v1alpha1.ReasonGPUMissing, Message: "the node has no GPU with index 1"}},
	}
	st := BuildStatus(old, 2, res, metav1.Now())
	if len(st.GPUs) != 2 || st.GPUs[1].Product != "NVIDIA L4" || st.GPUs[1].MIGCapable == nil || *st.GPUs[1].MIGCapable {
		t.Errorf("rows %+v, want row 1 to keep the L4's product and migCapable false", st.GPUs)
	}
}

// TestStatusListsAsManyNVMLProfilesAsTheCRDHolds: a GPU whose NVML table
// names more profiles, and more placements of one, than the CRD holds
// lists the first 32 profiles by name, each with its first 8 placements.
func TestStatusListsAsManyNVMLProfilesAsTheCRDHolds(t *testing.T) {
	res := readyNode(1)
	g := &res.GPUs[0].GPU
	g.NVMLPlacements = map[string][]mig.Placement{}
	for i := range 40 {
		var pls []mig.Placement
		for s := range 10 {
			pls = append(pls, mig.Placement{Start: s, Size: 1})
		}
		g.NVMLPlacements[fmt.Sprintf("1g.%02dgb", i)] = pls
	}
	st := BuildStatus(v1alpha1.NodeMigLayoutStatus{}, 1, res, metav1.Now())
	got := st.GPUs[0].NVMLProfiles
	if len(got) != 32 || got[31].Profile != "1g.31gb" || !slices.Equal(got[0].PlacementStarts, []int32{0, 1, 2, 3, 4, 5, 6, 7}) {
		t.Errorf("%d NVML profiles, the last %q, the first's placements %v; want 32, the last 1g.31gb, placements 0-7",
			len(got), got[len(got)-1].Profile, got[0].PlacementStarts)
	}
}

// TestDegradedReasonIsTheFirstStuckGPUs: Degraded takes the reason of the
// first GPU Blocked or Failed, by index.
func TestDegradedReasonIsTheFirstStuckGPUs(t *testing.T) {
	res := readyNode(3)
	res.Results[1] = GPUResult{Phase: v1alpha1.PhaseBlocked, Reason: v1alpha1.ReasonDeviceInUse, Message: "in use, not destroyed"}
	res.Results[2] = GPUResult{Phase: v1alpha1.PhaseFailed, Reason: v1alpha1.ReasonNVMLError, Message: "ERROR_UNKNOWN"}
	st := BuildStatus(v1alpha1.NodeMigLayoutStatus{}, 1, res, metav1.Now())
	if deg := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionDegraded); deg == nil || deg.Reason != v1alpha1.ReasonDeviceInUse {
		t.Errorf("Degraded %+v, want reason %s (gpu 1's)", deg, v1alpha1.ReasonDeviceInUse)
	}
}

// TestInFlightRowObservesTheSpecActedOn: a GPU shown in flight makes the
// node's Ready condition False for the generation the pass acts on, not
// for a spec written since that it has not read.
func TestInFlightRowObservesTheSpecActedOn(t *testing.T) {
	nml := &v1alpha1.NodeMigLayout{ObjectMeta: metav1.ObjectMeta{Name: "n1", UID: "u1", Generation: 3}}
	c := nmlClient(t, nml, interceptor.Funcs{})
	r := &NodeReconciler{Client: c, NodeName: "n1"}
	if err := r.patchGPUPhase(t.Context(), actedOn{uid: "u1", generation: 2}, 0, GPUResult{Phase: v1alpha1.PhaseDraining, Reason: v1alpha1.ReasonDraining}); err != nil {
		t.Fatal(err)
	}
	var got v1alpha1.NodeMigLayout
	if err := c.Get(t.Context(), types.NamespacedName{Name: "n1"}, &got); err != nil {
		t.Fatal(err)
	}
	if ready := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionReady); ready == nil || ready.ObservedGeneration != 2 {
		t.Errorf("Ready %+v, want observedGeneration 2 (the spec acted on)", ready)
	}
}

// TestNotDegradedSaysSo: a node with no GPU blocked or failed has its
// Degraded condition False with a message saying so, as the MigLayout's.
func TestNotDegradedSaysSo(t *testing.T) {
	st := BuildStatus(v1alpha1.NodeMigLayoutStatus{}, 1, readyNode(2), metav1.Now())
	deg := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionDegraded)
	if deg == nil || deg.Status != metav1.ConditionFalse || deg.Reason != v1alpha1.ReasonNoProblems || deg.Message != "no GPU is blocked or failed" {
		t.Errorf("Degraded %+v, want False, NoProblems, saying no GPU is blocked or failed", deg)
	}
}

// TestBuildStatusLeavesOldAsItIs: building a status whose conditions
// change leaves the old status's conditions as they were, so that the
// caller's comparison of the two sees the change and writes it.
func TestBuildStatusLeavesOldAsItIs(t *testing.T) {
	now := metav1.Now()
	old := BuildStatus(v1alpha1.NodeMigLayoutStatus{}, 1, readyNode(2), now)
	before := old.DeepCopy()
	failed := readyNode(2)
	failed.Results[1] = GPUResult{Phase: v1alpha1.PhaseFailed, Reason: v1alpha1.ReasonNVMLError, Message: "creating GPU instance: ERROR_UNKNOWN"}
	next := BuildStatus(old, 1, failed, now)
	if diff := cmp.Diff(before.Conditions, old.Conditions); diff != "" {
		t.Errorf("BuildStatus changed the old status's conditions (-before +after):\n%s", diff)
	}
	if cmp.Equal(next.Conditions, old.Conditions) {
		t.Error("the new status's conditions equal the old ones though a GPU failed")
	}
}
