package agent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/fstest"
	"time"
	"unicode/utf8"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/miglayout/miglayout/api/v1alpha1"
	"github.com/miglayout/miglayout/pkg/mig"
	"github.com/miglayout/miglayout/pkg/mig/gpu"
	"github.com/miglayout/miglayout/pkg/mig/nvmlsim"
)

// TestBuildStatus: each GPU's status carries its NVML attributes (the Auto
// planner's only source for them), its layout and devices in use, and the
// phase of the pass; a Blocked GPU makes the node not Ready and Degraded.
func TestBuildStatus(t *testing.T) {
	a100, err := mig.DefaultCatalog().Model("A100-SXM4-80GB")
	if err != nil {
		t.Fatal(err)
	}
	g := func(idx int) gpu.GPU {
		return gpu.GPU{Index: idx, UUID: "GPU-" + string(rune('a'+idx)), ProductName: "NVIDIA A100-SXM4-80GB", Model: a100,
			MIGCapable: true, MIGMode: gpu.MIGMode{Current: true, Pending: true}, PCIBusID: "0000:07:00.0", Brand: "Nvidia",
			Architecture: "Ampere", CUDAComputeCapability: "8.0", DriverVersion: "580.95.05", CUDADriverVersion: "13.0", Minor: idx + 3}
	}
	// GPU 1's driver describes 1g.10gb otherwise than the catalog.
	g1 := g(1)
	g1.ProfileValues = []mig.NVMLProfileValues{{Profile: "1g.10gb", MemoryMiB: 9856, Multiprocessors: 14, CopyEngines: 1}}
	// ... and offers 3g.40gb at the right half only, 2g.20gb under another
	// GI profile ID, 1g.20gb not at all, 4g.40gb only narrower than the
	// catalog's (of no use: devices are created as wide as the catalog
	// says), 2g.20gb at the catalog's 0+2 and a narrower 2+1.
	g1.NVMLPlacements = map[string][]mig.Placement{"3g.40gb": {{Start: 4, Size: 4}}, "1g.20gb": {},
		"4g.40gb": {{Start: 0, Size: 3}}, "2g.20gb": {{Start: 0, Size: 2}, {Start: 2, Size: 1}}}
	g1.NVMLProfileIDs = map[string]int{"2g.20gb": 30}
	three, _ := a100.Profile("3g.40gb")
	two, _ := a100.Profile("2g.20gb")
	oneTwenty, _ := a100.Profile("1g.20gb")
	four, _ := a100.Profile("4g.40gb")
	res := &SyncResult{
		GPUs: []GPUState{
			{GPU: g(0), Devices: []gpu.MIGDevice{{Profile: "3g.40gb", Placement: mig.Placement{Start: 4, Size: 4}, GIID: 2, CIID: 0}}},
			{GPU: g1},
		},
		InUse:   map[int]mig.Layout{0: mig.MustParseLayout("3g.40gb@4")},
		Results: map[int]GPUResult{1: {Phase: v1alpha1.PhaseBlocked, Reason: v1alpha1.ReasonDeviceInUse, Message: "in use"}},
	}
	now := metav1.Now()
	st := BuildStatus(v1alpha1.NodeMigLayoutStatus{}, 3, res, now)
	attrs := func(minor int32) *v1alpha1.GPUAttributes {
		return &v1alpha1.GPUAttributes{PCIBusID: "0000:07:00.0", Minor: ptr.To(minor), Brand: "Nvidia", Architecture: "Ampere",
			CUDAComputeCapability: "8.0", DriverVersion: "580.95.05", CUDADriverVersion: "13.0"}
	}
	want := []v1alpha1.GPUStatus{
		{Index: 0, UUID: "GPU-a", Product: "NVIDIA A100-SXM4-80GB", Model: "A100-SXM4-80GB", Attributes: attrs(3), MIGCapable: ptr.To(true), MIGEnabled: true, MIGPending: true,
			Layout: "3g.40gb@4", InUse: "3g.40gb@4", Phase: v1alpha1.PhaseReady, Reason: v1alpha1.ReasonLayoutApplied,
			Message: "not in the NodeMigLayout spec: left as it is", LastTransitionTime: &now},
		{Index: 1, UUID: "GPU-b", Product: "NVIDIA A100-SXM4-80GB", Model: "A100-SXM4-80GB", Attributes: attrs(4), MIGCapable: ptr.To(true), MIGEnabled: true, MIGPending: true,
			NVMLProfiles: []v1alpha1.NVMLProfile{
				{Profile: "1g.10gb", MemoryMiB: 9856, Multiprocessors: 14, CopyEngines: 1},
				{Profile: "1g.20gb", MemoryMiB: oneTwenty.MemoryMiB, Multiprocessors: int32(oneTwenty.Multiprocessors), CopyEngines: int32(oneTwenty.CopyEngines),
					Decoders: int32(oneTwenty.Decoders), JPEGEngines: int32(oneTwenty.JPEGEngines), OFAEngines: int32(oneTwenty.OFAEngines), NotOffered: true},
				{Profile: "2g.20gb", MemoryMiB: two.MemoryMiB, Multiprocessors: int32(two.Multiprocessors), CopyEngines: int32(two.CopyEngines),
					Decoders: int32(two.Decoders), JPEGEngines: int32(two.JPEGEngines), OFAEngines: int32(two.OFAEngines), GIProfileID: ptr.To[int32](30),
					PlacementStarts: []int32{0}},
				{Profile: "3g.40gb", MemoryMiB: three.MemoryMiB, Multiprocessors: int32(three.Multiprocessors), CopyEngines: int32(three.CopyEngines),
					Decoders: int32(three.Decoders), JPEGEngines: int32(three.JPEGEngines), OFAEngines: int32(three.OFAEngines), PlacementStarts: []int32{4}},
				{Profile: "4g.40gb", MemoryMiB: four.MemoryMiB, Multiprocessors: int32(four.Multiprocessors), CopyEngines: int32(four.CopyEngines),
					Decoders: int32(four.Decoders), JPEGEngines: int32(four.JPEGEngines), OFAEngines: int32(four.OFAEngines), NotOffered: true},
			},
			Phase: v1alpha1.PhaseBlocked, Reason: v1alpha1.ReasonDeviceInUse, Message: "in use", LastTransitionTime: &now},
	}
	if diff := cmp.Diff(want, st.GPUs); diff != "" {
		t.Errorf("GPU statuses (-want +got):\n%s", diff)
	}
	if !meta.IsStatusConditionFalse(st.Conditions, v1alpha1.ConditionReady) || !meta.IsStatusConditionTrue(st.Conditions, v1alpha1.ConditionDegraded) {
		t.Errorf("conditions = %+v, want Ready false and Degraded true", st.Conditions)
	}
}

// TestBuildStatusNamesGPUsLeftOutOfSpec: a node whose spec lists some of
// its GPUs is Ready once those hold their layouts, and its Ready message
// names the GPUs left out (a MigLayout leaves out a GPU whose layout it
// could not compute, and says why only in its own status).
func TestBuildStatusNamesGPUsLeftOutOfSpec(t *testing.T) {
	a100, err := mig.DefaultCatalog().Model("A100-SXM4-80GB")
	if err != nil {
		t.Fatal(err)
	}
	g := func(idx int) gpu.GPU {
		return gpu.GPU{Index: idx, UUID: fmt.Sprintf("GPU-%d", idx), ProductName: "NVIDIA A100-SXM4-80GB", Model: a100,
			MIGCapable: true, MIGMode: gpu.MIGMode{Current: true}}
	}
	res := &SyncResult{GPUs: []GPUState{{GPU: g(0)}, {GPU: g(1)}},
		Results: map[int]GPUResult{0: {Phase: v1alpha1.PhaseReady, Reason: v1alpha1.ReasonLayoutApplied}}}
	st := BuildStatus(v1alpha1.NodeMigLayoutStatus{}, 1, res, metav1.Now())
	ready := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionReady)
	if ready == nil || ready.Status != metav1.ConditionTrue || !strings.Contains(ready.Message, "; gpu 1 not in the spec, left as it is") {
		t.Errorf("Ready = %+v; want True, naming gpu 1 as left out of the spec", ready)
	}
	res.Results[1] = GPUResult{Phase: v1alpha1.PhaseReady, Reason: v1alpha1.ReasonLayoutApplied}
	st = BuildStatus(st, 1, res, metav1.Now())
	if ready := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionReady); ready == nil || strings.Contains(ready.Message, "not in the spec") {
		t.Errorf("Ready = %+v with every GPU in the spec; want no GPU named as left out", ready)
	}
}

// TestBuildStatusGPUMissing: the result of a GPU the spec asks for that NVML
// does not show (fallen off the bus) is in the status, which is then not
// Ready and Degraded, rather than dropped.
func TestBuildStatusGPUMissing(t *testing.T) {
	res := &SyncResult{Results: map[int]GPUResult{1: {Phase: v1alpha1.PhaseFailed, Reason: v1alpha1.ReasonGPUMissing,
		Message: "the node has no GPU with index 1"}}}
	now := metav1.Now()
	st := BuildStatus(v1alpha1.NodeMigLayoutStatus{}, 2, res, now)
	want := []v1alpha1.GPUStatus{{Index: 1, Phase: v1alpha1.PhaseFailed, Reason: v1alpha1.ReasonGPUMissing,
		Message: "the node has no GPU with index 1", LastTransitionTime: &now}}
	if diff := cmp.Diff(want, st.GPUs); diff != "" {
		t.Errorf("GPU statuses (-want +got):\n%s", diff)
	}
	if !meta.IsStatusConditionFalse(st.Conditions, v1alpha1.ConditionReady) || !meta.IsStatusConditionTrue(st.Conditions, v1alpha1.ConditionDegraded) {
		t.Errorf("conditions = %+v, want Ready false and Degraded true", st.Conditions)
	}
}

// TestWriteStatusGeneration: the status names the generation of the spec the
// pass acted on, not the object's generation at write time (a spec changed
// during the pass is not done yet).
func TestWriteStatusGeneration(t *testing.T) {
	nml := &v1alpha1.NodeMigLayout{ObjectMeta: metav1.ObjectMeta{Name: "n1", Generation: 5}}
	c := nmlClient(t, nml, interceptor.Funcs{})
	r := &NodeReconciler{Client: c, NodeName: "n1"}
	ctx := context.Background()
	if err := r.writeStatus(ctx, actedOn{generation: 4}, &SyncResult{}, false); err != nil {
		t.Fatal(err)
	}
	var got v1alpha1.NodeMigLayout
	if err := c.Get(ctx, types.NamespacedName{Name: "n1"}, &got); err != nil {
		t.Fatal(err)
	}
	if got.Status.ObservedGeneration != 4 {
		t.Errorf("observedGeneration %d, want 4 (the spec acted on)", got.Status.ObservedGeneration)
	}
}

// TestRetryWithoutDrainTaintsIsQuiet: while the API server drops drain
// taints, each retry of a GPU that must destroy devices fails at once; it
// neither shows Draining (which moved lastTransitionTime every retry) nor
// records a Draining event again, and a status it would write as it is
// already is not written.
func TestRetryWithoutDrainTaintsIsQuiet(t *testing.T) {
	g := newRig(t, "1xA100-SXM4-80GB")
	g.setup(t, 0, "3g.40gb@0,3g.40gb@4")
	g.inv.dropTaints = true
	c, phases := phaseRecordingClient(t, spec(0, "7g.80gb@0"))
	rec := events.NewFakeRecorder(20)
	clock := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	r := &NodeReconciler{Client: c, NodeName: "n1", Repartitioner: g.r, Recorder: rec, Now: func() time.Time { return clock }}
	reasons := func() []string { return eventReasons(rec) }
	ctx := context.Background()
	for pass, want := range []struct {
		phases []v1alpha1.GPUPhase
		events []string
	}{
		{[]v1alpha1.GPUPhase{v1alpha1.PhaseDraining, v1alpha1.PhaseFailed}, []string{EventDraining, EventDeviceTaintsUnsupported}},
		// The same status again: not written at all.
		{nil, nil},
		{nil, nil},
	} {
		*phases = nil
		res, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: types.NamespacedName{Name: "n1"}})
		if err != nil {
			t.Fatal(err)
		}
		clock = clock.Add(res.RequeueAfter) // each pass comes at its retry
		if diff := cmp.Diff(want.phases, *phases); diff != "" {
			t.Errorf("pass %d: phases written (-want +got):\n%s", pass, diff)
		}
		if diff := cmp.Diff(want.events, reasons()); diff != "" {
			t.Errorf("pass %d: events (-want +got):\n%s", pass, diff)
		}
	}
	// Taints served again: the change goes through.
	g.inv.dropTaints = false
	if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: types.NamespacedName{Name: "n1"}}); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"7g.80gb@0"}, g.layouts(t)); diff != "" {
		t.Errorf("layouts after taints came back (-want +got):\n%s", diff)
	}
}

// TestFailedPassSaysWhy: a pass that fails as a whole after showing a GPU
// Draining (the API server refuses the drain publication) leaves it Pending,
// reason PassFailed, with the error and one warning event, instead of
// Draining for as long as the failure lasts; its retries stay quiet (no
// event) but show their own error; once the publication is served the
// change goes through.
func TestFailedPassSaysWhy(t *testing.T) {
	g := newRig(t, "1xA100-SXM4-80GB")
	g.setup(t, 0, "3g.40gb@0,3g.40gb@4")
	g.inv.failDrain = errors.New("updating ResourceSlice n1-gpu: the server is currently unable to handle the request")
	r, c, rec := nodeReconcilerOn(t, g, spec(0, "7g.80gb@0"))
	req := ctrl.Request{NamespacedName: types.NamespacedName{Name: "n1"}}
	row := func() v1alpha1.GPUStatus {
		t.Helper()
		var got v1alpha1.NodeMigLayout
		if err := c.Get(t.Context(), req.NamespacedName, &got); err != nil || len(got.Status.GPUs) != 1 {
			t.Fatalf("status: %v, %+v", err, got.Status.GPUs)
		}
		return got.Status.GPUs[0]
	}
	reasons := func() []string { return eventReasons(rec) }
	for pass, wantEvents := range [][]string{{EventDraining, EventPassFailed}, nil} {
		if _, err := r.Reconcile(t.Context(), req); err == nil {
			t.Fatalf("pass %d succeeded with the drain publication refused", pass)
		}
		if got := row(); got.Phase != v1alpha1.PhasePending || got.Reason != ReasonPassFailed || !strings.Contains(got.Message, "unable to handle the request") {
			t.Errorf("pass %d: row %s/%s %q, want Pending/PassFailed with the error", pass, got.Phase, got.Reason, got.Message)
		}
		if diff := cmp.Diff(wantEvents, reasons()); diff != "" {
			t.Errorf("pass %d: events (-want +got):\n%s", pass, diff)
		}
	}
	// A retry failing otherwise shows its own error, still quietly.
	g.inv.failDrain = errors.New("updating ResourceSlice n1-gpu: Unauthorized")
	if _, err := r.Reconcile(t.Context(), req); err == nil {
		t.Fatal("pass succeeded with the drain publication refused")
	}
	if got := row(); got.Reason != ReasonPassFailed || !strings.Contains(got.Message, "Unauthorized") {
		t.Errorf("row after another error: %s/%s %q, want PassFailed with the latest error", got.Phase, got.Reason, got.Message)
	}
	if got := reasons(); len(got) != 0 {
		t.Errorf("events after another error: %q, want none", got)
	}
	g.inv.failDrain = nil
	if _, err := r.Reconcile(t.Context(), req); err != nil {
		t.Fatal(err)
	}
	if got := row(); got.Phase != v1alpha1.PhaseReady || got.Layout != "7g.80gb@0" {
		t.Errorf("row after the publication is served: %+v", got)
	}
}

// twoPasses reconciles an unmanaged node over g twice and returns the
// events recorded and the NodeMigLayout's status after them.
func twoPasses(t *testing.T, g *rig) ([]string, v1alpha1.NodeMigLayout) {
	t.Helper()
	nml := &v1alpha1.NodeMigLayout{ObjectMeta: metav1.ObjectMeta{Name: "n1", Generation: 1}}
	c := nmlClient(t, nml, interceptor.Funcs{})
	rec := events.NewFakeRecorder(10)
	r := &NodeReconciler{Client: c, NodeName: "n1", Repartitioner: g.r, Recorder: rec}
	req := ctrl.Request{NamespacedName: types.NamespacedName{Name: "n1"}}
	var got []string
	for range 2 {
		if _, err := r.Reconcile(t.Context(), req); err != nil {
			t.Fatal(err)
		}
		for len(rec.Events) > 0 {
			got = append(got, <-rec.Events)
		}
	}
	var st v1alpha1.NodeMigLayout
	if err := c.Get(t.Context(), req.NamespacedName, &st); err != nil {
		t.Fatal(err)
	}
	return got, st
}

// TestCatalogDiffersEvent: an agent whose GPU's NVML describes a profile
// otherwise than the catalog reports it in status and records one
// CatalogDiffers event saying what differs; the next pass records none.
func TestCatalogDiffersEvent(t *testing.T) {
	h100, err := mig.DefaultCatalog().Model("H100-SXM5-80GB")
	if err != nil {
		t.Fatal(err)
	}
	p, _ := h100.Profile("3g.40gb")
	v := p.NVMLValues()
	v.MemoryMiB = 40600
	driver, err := h100.WithNVMLValues([]mig.NVMLProfileValues{v})
	if err != nil {
		t.Fatal(err)
	}
	hardware, err := mig.DefaultCatalog().With(driver)
	if err != nil {
		t.Fatal(err)
	}
	g := newRigWith(t, nvmlsim.Config{Spec: "1xH100-SXM5-80GB", Catalog: hardware})
	if _, err := g.mgr.SetMIGMode(t.Context(), 0, true); err != nil {
		t.Fatal(err)
	}
	got, st := twoPasses(t, g)
	want := []string{"Normal CatalogDiffers GPU 0: NVML describes 3g.40gb: 40600 MiB (catalog 40448); devices are published, and planned, with NVML's values"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("events over two passes (-want +got):\n%s", diff)
	}
	if len(st.Status.GPUs) != 1 || len(st.Status.GPUs[0].NVMLProfiles) != 1 || st.Status.GPUs[0].NVMLProfiles[0].MemoryMiB != 40600 {
		t.Errorf("status %+v, want GPU 0 with nvmlProfiles 3g.40gb 40600 MiB", st.Status.GPUs)
	}
}

// TestCatalogMismatchesReported: an A100 whose driver offers 2g.20gb at a
// fourth placement, which the catalog lacks, is reported in status
// (catalogMismatches) and by one Warning CatalogDiffers event.
func TestCatalogMismatchesReported(t *testing.T) {
	files := fstest.MapFS{}
	for _, name := range []string{"ampere.yaml", "hopper.yaml", "blackwell.yaml"} {
		data, err := os.ReadFile(filepath.Join("..", "mig", "models", name))
		if err != nil {
			t.Fatal(err)
		}
		if name == "ampere.yaml" {
			data = []byte(strings.ReplaceAll(string(data), "placements: *p2g,", "placements: *p2,"))
		}
		files["models/"+name] = &fstest.MapFile{Data: data}
	}
	hardware, err := mig.LoadCatalog(files)
	if err != nil {
		t.Fatal(err)
	}
	g := newRigWith(t, nvmlsim.Config{Spec: "1xA100-SXM4-80GB", Catalog: hardware})
	if _, err := g.mgr.SetMIGMode(t.Context(), 0, true); err != nil {
		t.Fatal(err)
	}
	got, st := twoPasses(t, g)
	const mismatch = "2g.20gb placements: NVML offers 0+2,2+2,4+2,6+2, the catalog 0+2,2+2,4+2"
	if len(got) != 1 || !strings.HasPrefix(got[0], "Warning CatalogDiffers GPU 0: ") || !strings.Contains(got[0], mismatch) {
		t.Errorf("events over two passes %q, want one Warning CatalogDiffers naming %q", got, mismatch)
	}
	if len(st.Status.GPUs) != 1 || !slices.Equal(st.Status.GPUs[0].CatalogMismatches, []string{mismatch}) {
		t.Errorf("status %+v, want catalogMismatches [%s]", st.Status.GPUs, mismatch)
	}
}

// TestHealthzFailsOnAStuckPass: /healthz fails while a pass has run longer
// than MaxPass (an NVML call or API request that hangs), so the liveness
// probe restarts the agent; between passes and in a pass within the limit
// it passes.
func TestHealthzFailsOnAStuckPass(t *testing.T) {
	start := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	now := start
	r := &NodeReconciler{MaxPass: time.Minute, Now: func() time.Time { return now }}
	if err := r.Healthz(nil); err != nil {
		t.Errorf("between passes: %v", err)
	}
	r.passStart = start
	now = start.Add(time.Minute)
	if err := r.Healthz(nil); err != nil {
		t.Errorf("a pass of a minute: %v", err)
	}
	now = start.Add(time.Minute + time.Second)
	if err := r.Healthz(nil); err == nil || !strings.Contains(err.Error(), "running for 1m1s") {
		t.Errorf("a pass past MaxPass: %v, want an error saying how long", err)
	}
}

// TestReconcileMarksThePass: Reconcile records its start for Healthz and
// clears it when done.
func TestReconcileMarksThePass(t *testing.T) {
	g := newRig(t, "1xA100-SXM4-80GB")
	nml := &v1alpha1.NodeMigLayout{ObjectMeta: metav1.ObjectMeta{Name: "n1", Generation: 1}}
	var during time.Time
	r := &NodeReconciler{NodeName: "n1", Repartitioner: g.r, Recorder: events.NewFakeRecorder(10)}
	r.Client = nmlClient(t, nml, interceptor.Funcs{Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
		r.mu.Lock()
		during = r.passStart
		r.mu.Unlock()
		return c.Get(ctx, key, obj, opts...)
	}})
	if _, err := r.Reconcile(t.Context(), ctrl.Request{NamespacedName: types.NamespacedName{Name: "n1"}}); err != nil {
		t.Fatal(err)
	}
	if during.IsZero() {
		t.Error("no pass start recorded during the pass")
	}
	if !r.passStart.IsZero() {
		t.Errorf("pass start %s left after the pass", r.passStart)
	}
}

// TestTruncateKeepsCharacters: a cut string ends in "..." within n bytes and
// never inside a multi-byte character.
func TestTruncateKeepsCharacters(t *testing.T) {
	for _, tc := range []struct {
		s    string
		n    int
		want string
	}{
		{"short", 10, "short"},
		{"abcdefghij", 8, "abcde..."},
		{"abcd→fgh", 8, "abcd..."}, // "→" is bytes 4-6: not split at 5
	} {
		got := truncate(tc.s, tc.n)
		if got != tc.want || len(got) > tc.n || !utf8.ValidString(got) {
			t.Errorf("truncate(%q, %d) = %q, want %q", tc.s, tc.n, got, tc.want)
		}
	}
}

// TestRepartitionedFromReadyIsTold: a GPU whose status says Ready on its
// old layout, changed to a new one in one pass (status read before the
// pass still says Ready), gets its Repartitioned event; a pass that changes
// nothing records none.
func TestRepartitionedFromReadyIsTold(t *testing.T) {
	g := newRig(t, "1xA100-SXM4-80GB")
	g.setup(t, 0, "7g.80gb@0")
	nml := &v1alpha1.NodeMigLayout{ObjectMeta: metav1.ObjectMeta{Name: "n1", Generation: 2},
		Spec: v1alpha1.NodeMigLayoutSpec{GPUs: []v1alpha1.GPUSpec{spec(0, "3g.40gb@0,3g.40gb@4")}},
		Status: v1alpha1.NodeMigLayoutStatus{GPUs: []v1alpha1.GPUStatus{{Index: 0, MIGEnabled: true, Layout: "7g.80gb@0",
			Phase: v1alpha1.PhaseReady, Reason: v1alpha1.ReasonLayoutApplied}}}}
	c := nmlClient(t, nml, interceptor.Funcs{})
	rec := events.NewFakeRecorder(20)
	r := &NodeReconciler{Client: c, NodeName: "n1", Repartitioner: g.r, Recorder: rec}
	for pass, want := range [][]string{{EventDraining, EventRepartitioned}, nil} {
		if _, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Name: "n1"}}); err != nil {
			t.Fatal(err)
		}
		var got []string
		for len(rec.Events) > 0 {
			got = append(got, strings.Fields(<-rec.Events)[1])
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("pass %d: events (-want +got):\n%s", pass, diff)
		}
	}
}

// TestStoppingPassTellsNothing: the agent is stopped (SIGTERM, its context
// cancelled) during a pass's settle period. The pass ends without a
// PassFailed warning: stopping is no failure, and the journal has the work
// for the next start.
func TestStoppingPassTellsNothing(t *testing.T) {
	g := newRig(t, "1xA100-SXM4-80GB")
	g.setup(t, 0, "3g.40gb@0,3g.40gb@4")
	r, _, rec := nodeReconcilerOn(t, g, spec(0, "7g.80gb@0"))
	ctx, cancel := context.WithCancel(t.Context())
	g.r.Sleep = func(context.Context, time.Duration) error { cancel(); return context.Canceled }
	if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: types.NamespacedName{Name: "n1"}}); err == nil {
		t.Fatal("the stopped pass returned no error")
	}
	for len(rec.Events) > 0 {
		if e := <-rec.Events; strings.Contains(e, EventPassFailed) {
			t.Errorf("event %q for a pass the agent's stop ended", e)
		}
	}
}

// TestReadyFalseWhileChanging: a node Ready on its old spec is not Ready
// (GPUsNotReady, for the new generation, naming the GPU and its phase)
// while a new spec's change is under way, here while every pass fails to
// publish the drain; Ready again once the change is done.
func TestReadyFalseWhileChanging(t *testing.T) {
	g := newRig(t, "1xA100-SXM4-80GB")
	g.setup(t, 0, "3g.40gb@0,3g.40gb@4")
	r, c, _ := nodeReconcilerOn(t, g, spec(0, "3g.40gb@0,3g.40gb@4"))
	req := ctrl.Request{NamespacedName: types.NamespacedName{Name: "n1"}}
	ready := func() metav1.Condition {
		t.Helper()
		var got v1alpha1.NodeMigLayout
		if err := c.Get(t.Context(), req.NamespacedName, &got); err != nil {
			t.Fatal(err)
		}
		cond := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionReady)
		if cond == nil {
			t.Fatalf("no Ready condition: %+v", got.Status)
		}
		return *cond
	}
	if _, err := r.Reconcile(t.Context(), req); err != nil {
		t.Fatal(err)
	}
	if got := ready(); got.Status != metav1.ConditionTrue || got.ObservedGeneration != 1 {
		t.Fatalf("Ready on the first spec: %+v", got)
	}
	var nml v1alpha1.NodeMigLayout
	if err := c.Get(t.Context(), req.NamespacedName, &nml); err != nil {
		t.Fatal(err)
	}
	nml.Spec.GPUs = []v1alpha1.GPUSpec{spec(0, "7g.80gb@0")}
	nml.Generation = 2
	if err := c.Update(t.Context(), &nml); err != nil {
		t.Fatal(err)
	}
	g.inv.failDrain = errors.New("updating ResourceSlice n1-gpu: forbidden")
	for pass := range 2 {
		if _, err := r.Reconcile(t.Context(), req); err == nil {
			t.Fatalf("pass %d succeeded with the drain publication refused", pass)
		}
		got := ready()
		if got.Status != metav1.ConditionFalse || got.Reason != v1alpha1.ReasonGPUsNotReady || got.ObservedGeneration != 2 ||
			got.Message != "not ready: gpu 0 Pending (PassFailed)" {
			t.Errorf("pass %d: Ready %s/%s generation %d %q, want False/GPUsNotReady for generation 2 naming gpu 0 Pending (PassFailed)",
				pass, got.Status, got.Reason, got.ObservedGeneration, got.Message)
		}
	}
	g.inv.failDrain = nil
	if _, err := r.Reconcile(t.Context(), req); err != nil {
		t.Fatal(err)
	}
	if got := ready(); got.Status != metav1.ConditionTrue || got.Reason != v1alpha1.ReasonLayoutApplied || got.ObservedGeneration != 2 {
		t.Errorf("Ready once the change is done: %+v", got)
	}
}

// TestStatusConflictReadsTheAPIServer: where the cache lags behind the
// agent's own last status write (every read from it gives an older
// resourceVersion, so every write conflicts), the retry reads the
// NodeMigLayout from the API server and the write goes through.
func TestStatusConflictReadsTheAPIServer(t *testing.T) {
	g := newRig(t, "1xA100-SXM4-80GB")
	g.setup(t, 0, "3g.40gb@0,3g.40gb@4")
	r, c, _ := nodeReconcilerOn(t, g, spec(0, "3g.40gb@0,3g.40gb@4"))
	var stale v1alpha1.NodeMigLayout
	if err := c.Get(t.Context(), types.NamespacedName{Name: "n1"}, &stale); err != nil {
		t.Fatal(err)
	}
	stale.Status.GPUs = []v1alpha1.GPUStatus{{Index: 0, Phase: v1alpha1.PhaseDraining}}
	if err := c.Status().Update(t.Context(), stale.DeepCopy()); err != nil {
		t.Fatal(err)
	}
	// The cache still shows the object before that write.
	r.Client = interceptor.NewClient(c, interceptor.Funcs{Get: func(ctx context.Context, cl client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
		stale.DeepCopyInto(obj.(*v1alpha1.NodeMigLayout))
		return nil
	}})
	write := func() error {
		return r.patchGPUPhase(t.Context(), actedOn{generation: 1}, 0, GPUResult{Phase: v1alpha1.PhaseRepartitioning, Reason: v1alpha1.ReasonRepartitioning})
	}
	if err := write(); !apierrors.IsConflict(err) {
		t.Fatalf("write through the lagging cache alone: %v, want a conflict (the test's premise)", err)
	}
	r.APIReader = c
	if err := write(); err != nil {
		t.Fatalf("write with the API server read on conflict: %v", err)
	}
	var got v1alpha1.NodeMigLayout
	if err := c.Get(t.Context(), types.NamespacedName{Name: "n1"}, &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Status.GPUs) != 1 || got.Status.GPUs[0].Phase != v1alpha1.PhaseRepartitioning {
		t.Errorf("status %+v, want gpu 0 Repartitioning", got.Status.GPUs)
	}
}

// TestStatusAfterInFlightRowIsWritten: a pass that showed a GPU in flight
// (its row patched Repartitioning) and ends with the status the lagging
// cache still shows from before writes it all the same: the NodeMigLayout
// is read from the API server, which holds the in-flight row.
func TestStatusAfterInFlightRowIsWritten(t *testing.T) {
	g := newRig(t, "1xA100-SXM4-80GB")
	g.setup(t, 0, "3g.40gb@0,3g.40gb@4")
	specs := []v1alpha1.GPUSpec{spec(0, "3g.40gb@0,3g.40gb@4")}
	r, c, _ := nodeReconcilerOn(t, g, specs...)
	ctx := t.Context()
	res, err := g.r.Sync(ctx, specs, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.writeStatus(ctx, actedOn{generation: 1}, res, false); err != nil {
		t.Fatal(err)
	}
	var stale v1alpha1.NodeMigLayout
	if err := c.Get(ctx, types.NamespacedName{Name: "n1"}, &stale); err != nil {
		t.Fatal(err)
	}
	if err := r.patchGPUPhase(ctx, actedOn{generation: 1}, 0, GPUResult{Phase: v1alpha1.PhaseRepartitioning, Reason: v1alpha1.ReasonRepartitioning}); err != nil {
		t.Fatal(err)
	}
	// The cache has not seen the patch.
	r.Client = interceptor.NewClient(c, interceptor.Funcs{Get: func(ctx context.Context, cl client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
		stale.DeepCopyInto(obj.(*v1alpha1.NodeMigLayout))
		return nil
	}})
	r.APIReader = c
	phase := func() v1alpha1.GPUPhase {
		var got v1alpha1.NodeMigLayout
		if err := c.Get(ctx, types.NamespacedName{Name: "n1"}, &got); err != nil {
			t.Fatal(err)
		}
		return got.Status.GPUs[0].Phase
	}
	if err := r.writeStatus(ctx, actedOn{generation: 1}, res, false); err != nil || phase() != v1alpha1.PhaseRepartitioning {
		t.Fatalf("premise: compared with the lagging cache the write is skipped (err %v, phase %s)", err, phase())
	}
	if err := r.writeStatus(ctx, actedOn{generation: 1}, res, true); err != nil {
		t.Fatal(err)
	}
	if got := phase(); got != v1alpha1.PhaseReady {
		t.Errorf("after a pass that showed the GPU in flight the row is %s, want Ready", got)
	}
}

// TestStoppedPassRepublishesTruth: the agent is stopped (SIGTERM) as a
// GPU's change takes the GPU's lock, so no NVML step of the change is
// taken. The pass still republishes the pool from NVML, untainted, rather
// than leave the drain publication (which, had a device been destroyed
// already, would name it) until the next agent starts.
func TestStoppedPassRepublishesTruth(t *testing.T) {
	g := newRig(t, "1xA100-SXM4-80GB")
	g.setup(t, 0, "3g.40gb@0,3g.40gb@4")
	r, _, _ := nodeReconcilerOn(t, g, spec(0, "7g.80gb@0"))
	ctx, cancel := context.WithCancel(t.Context())
	g.locks.onBegin = cancel
	_, _ = r.Reconcile(ctx, ctrl.Request{NamespacedName: types.NamespacedName{Name: "n1"}}) // cancelled mid-pass: an error
	if len(g.locks.begun) != 1 {
		t.Fatalf("the GPU's lock taken %d times, want once", len(g.locks.begun))
	}
	g.inv.mu.Lock()
	defer g.inv.mu.Unlock()
	if len(g.inv.pubs) < 3 || g.inv.pubs[len(g.inv.pubs)-3].draining == nil {
		t.Fatalf("publications %+v: want the drain, the withdrawal, then the pool again", g.inv.pubs)
	}
	last := g.inv.pubs[len(g.inv.pubs)-1]
	want := []string{"gpu-0-mig-3g40gb-9-0", "gpu-0-mig-3g40gb-9-4"}
	if len(last.draining) != 0 || !cmp.Equal(want, last.devices) {
		t.Errorf("last publication %+v, want %v untainted (NVML's truth: the stop came before any NVML step)", last, want)
	}
}

// TestRepartitionedOnlyWhenChanged: a GPU that becomes Ready without being
// changed (its spec changed and changed back before the agent acted, or a
// node seen for the first time on its desired layout) gets no Repartitioned
// event; one whose layout changed since its status was written does, even
// if this pass did not change it, and so does one this pass changed.
func TestRepartitionedOnlyWhenChanged(t *testing.T) {
	halves := "3g.40gb@0,3g.40gb@4"
	tests := map[string]struct {
		holds string // "": halves
		rows  []v1alpha1.GPUStatus
		want  []string
	}{
		"a spec changed and changed back": {
			rows: []v1alpha1.GPUStatus{{Index: 0, MIGEnabled: true, Layout: halves, Phase: v1alpha1.PhasePending, Reason: v1alpha1.ReasonPending}},
		},
		"a node first seen": {},
		"changed behind the status": {
			rows: []v1alpha1.GPUStatus{{Index: 0, MIGEnabled: true, Layout: "7g.80gb@0", Phase: v1alpha1.PhasePending, Reason: v1alpha1.ReasonPending}},
			want: []string{EventRepartitioned},
		},
		"a node first seen and changed": {
			holds: "7g.80gb@0",
			want:  []string{EventDraining, EventRepartitioned},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			g := newRig(t, "1xA100-SXM4-80GB")
			holds := tc.holds
			if holds == "" {
				holds = halves
			}
			g.setup(t, 0, holds)
			nml := &v1alpha1.NodeMigLayout{ObjectMeta: metav1.ObjectMeta{Name: "n1", Generation: 2},
				Spec:   v1alpha1.NodeMigLayoutSpec{GPUs: []v1alpha1.GPUSpec{spec(0, halves)}},
				Status: v1alpha1.NodeMigLayoutStatus{GPUs: tc.rows}}
			rec := events.NewFakeRecorder(20)
			r := &NodeReconciler{Client: nmlClient(t, nml, interceptor.Funcs{}), NodeName: "n1", Repartitioner: g.r, Recorder: rec}
			if _, err := r.Reconcile(t.Context(), ctrl.Request{NamespacedName: types.NamespacedName{Name: "n1"}}); err != nil {
				t.Fatal(err)
			}
			var got []string
			for len(rec.Events) > 0 {
				got = append(got, strings.Fields(<-rec.Events)[1])
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
		})
	}
}

// TestHeldNoteTellsMIGOff: a Repartitioned event says MIG mode off, MIG
// on without a device, or the layout, not an empty layout for both.
func TestHeldNoteTellsMIGOff(t *testing.T) {
	for want, sp := range map[string]v1alpha1.GPUSpec{
		"GPU 3 has MIG mode off":               {Index: 3},
		"GPU 3 is in MIG mode, with no device": {Index: 3, MIGEnabled: true},
		`GPU 3 holds "7g.80gb@0"`:              {Index: 3, MIGEnabled: true, Layout: "7g.80gb@0"},
	} {
		if got := heldNote(sp); got != want {
			t.Errorf("heldNote(%+v) = %q, want %q", sp, got, want)
		}
	}
}
