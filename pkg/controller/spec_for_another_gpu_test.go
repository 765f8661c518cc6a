package controller

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2/ktesting"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/miglayout/miglayout/api/v1alpha1"
	"github.com/miglayout/miglayout/pkg/mig"
)

// TestDesiredGPUsForTheGPUAtEachIndex: each entry carries the UUID of the
// GPU it is for, and the entry written before is kept stable only where it
// was written for that GPU: one written for the GPU NVML showed at the
// index before numbering the GPUs anew is fitted afresh.
func TestDesiredGPUsForTheGPUAtEachIndex(t *testing.T) {
	rs := rules(rule("one").counts("3g.40gb", 1))
	inv := inventory(h100(0).uuid("GPU-new").layout(""))
	fresh, problems := DesiredGPUs(mig.DefaultCatalog(), rs, inv, nil)
	if len(problems) > 0 || len(fresh) != 1 {
		t.Fatalf("desired %+v, problems %+v", fresh, problems)
	}
	const kept = "3g.40gb@0"
	if fresh[0].Layout == kept {
		t.Fatalf("a fresh fit gives %s too: the test shows nothing", kept)
	}
	for name, tc := range map[string]struct{ writtenFor, want string }{
		"written for this GPU":           {"GPU-new", kept},
		"written by an earlier release":  {"", kept},
		"written for the GPU seen there": {"GPU-old", fresh[0].Layout},
	} {
		t.Run(name, func(t *testing.T) {
			before := v1alpha1.GPUSpec{Index: 0, UUID: tc.writtenFor, MIGEnabled: true, Layout: kept}
			got, problems := DesiredGPUs(mig.DefaultCatalog(), rs, inv, []v1alpha1.GPUSpec{before})
			if len(problems) > 0 || len(got) != 1 {
				t.Fatalf("desired %+v, problems %+v", got, problems)
			}
			if diff := cmp.Diff([]string{"GPU-new", tc.want}, []string{got[0].UUID, got[0].Layout}); diff != "" {
				t.Errorf("GPU 0's entry (UUID, layout) (-want +got):\n%s", diff)
			}
		})
	}
}

// TestStaticSpecWrittenAgainForRenumberedGPUs: n1 had an A100 at index 0
// (7g.80gb@0 by its product rule) and two H100s (halves). After a reboot
// the A100 is not found and NVML numbers the H100s 0 and 1; the agent
// blocks GPU 0 (its entry was written for the A100). The controller writes
// each entry again for the GPU its index names now.
func TestStaticSpecWrittenAgainForRenumberedGPUs(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ml := staticMigLayout("a", "uid-a", "a")
	ml.Spec.Rules = rules(rule("a100").product("A100-SXM4-80GB").layout(wholeLayout), rule("h100").product("H100-SXM5-80GB").layout(halvesLayout))
	before := []v1alpha1.GPUSpec{
		{Index: 0, UUID: "GPU-a100", MIGEnabled: true, Layout: wholeLayout, Reason: `rule "a100"`},
		{Index: 1, UUID: "GPU-h100-a", MIGEnabled: true, Layout: halvesLayout, Reason: `rule "h100"`},
		{Index: 2, UUID: "GPU-h100-b", MIGEnabled: true, Layout: halvesLayout, Reason: `rule "h100"`},
	}
	nml := ownedBy(nodeMigLayout("n1").spec(before...).status(
		h100(0).uuid("GPU-h100-a").layout("").phase(v1alpha1.PhaseBlocked, v1alpha1.ReasonSpecForAnotherGPU, "written for GPU-a100"),
		h100(1).uuid("GPU-h100-b").layout(""),
	).build(), ml)
	c := reconciledOnce(t, ctx, ml, node("n1", map[string]string{"pool": "a"}), nml)
	want := []specEntry{{"GPU-h100-a", halvesLayout}, {"GPU-h100-b", halvesLayout}}
	if diff := cmp.Diff(want, specEntries(t, ctx, c, "n1")); diff != "" {
		t.Errorf("n1's spec entries (-want +got):\n%s", diff)
	}
}

// specEntry is a spec entry's GPU UUID and layout.
type specEntry struct{ UUID, Layout string }

// specEntries are the entries of node's NodeMigLayout spec as c has it.
func specEntries(t *testing.T, ctx context.Context, c client.Client, node string) []specEntry {
	t.Helper()
	var got v1alpha1.NodeMigLayout
	if err := c.Get(ctx, types.NamespacedName{Name: node}, &got); err != nil {
		t.Fatal(err)
	}
	var out []specEntry
	for _, g := range got.Spec.GPUs {
		out = append(out, specEntry{g.UUID, g.Layout})
	}
	return out
}

// TestAutoEntryWrittenAgainForRenumberedGPU: an Auto plan's entry carries
// the UUID of the GPU it was planned for. When the agent blocks it, the
// GPU at its index being another one now (NVML numbered the GPUs anew),
// the change is cancelled and the entry written for the GPU there now.
func TestAutoEntryWrittenAgainForRenumberedGPU(t *testing.T) {
	ml := autoMigLayout("auto", nil)
	h := newAutoCluster(t, ml, node("n1", map[string]string{"pool": "auto"}),
		autoNML("n1", ml, a100(0).uuid("GPU-a").layout("7g.80gb@0")),
		autoClaim("c1", profileSelector("3g.40gb")), autoPod("p1", h0(), "c1"))
	h.settle()
	entry := func() v1alpha1.GPUSpec {
		t.Helper()
		var nml v1alpha1.NodeMigLayout
		if err := h.c.Get(t.Context(), types.NamespacedName{Name: "n1"}, &nml); err != nil {
			t.Fatal(err)
		}
		if len(nml.Spec.GPUs) != 1 {
			t.Fatalf("n1's spec %+v, want one entry", nml.Spec.GPUs)
		}
		return nml.Spec.GPUs[0]
	}
	if got := entry(); got.UUID != "GPU-a" || got.Layout == "7g.80gb@0" {
		t.Fatalf("first plan: n1/gpu-0 -> %q for %q, want a change for p1 written for GPU-a", got.Layout, got.UUID)
	}
	if err := h.c.Delete(t.Context(), autoPod("p1", h0(), "c1")); err != nil {
		t.Fatal(err)
	}
	h.agent("n1", func(st []v1alpha1.GPUStatus, _ []v1alpha1.GPUSpec) []v1alpha1.GPUStatus {
		st[0].UUID, st[0].Layout = "GPU-b", "7g.80gb@0"
		st[0].Phase, st[0].Reason, st[0].Message = v1alpha1.PhaseBlocked, v1alpha1.ReasonSpecForAnotherGPU, "written for GPU-a"
		return st
	})
	h.settle()
	if got := entry(); got.UUID != "GPU-b" || got.Layout != "7g.80gb@0" {
		t.Errorf("after the renumbering n1/gpu-0 -> %q for %q, want the change cancelled (7g.80gb@0) for GPU-b", got.Layout, got.UUID)
	}
}

// TestRowOfEntryForItsGPUIsNoRetry: GPU 0 was Blocked under an entry
// written for another GPU; the entry written again for GPU 0, with the
// same layout, is a new change: its Repartitioning row is not judged as a
// retry of the Blocked one.
func TestRowOfEntryForItsGPUIsNoRetry(t *testing.T) {
	entry := v1alpha1.GPUSpec{Index: 0, UUID: "GPU-a", MIGEnabled: true, Layout: halvesLayout}
	nml := nodeMigLayout("n1").spec(entry).
		status(a100(0).uuid("GPU-b").layout(wholeLayout).phase(v1alpha1.PhaseBlocked, v1alpha1.ReasonSpecForAnotherGPU, "written for GPU-a")).build()
	nml.Generation, nml.Status.ObservedGeneration = 1, 1
	stuck := rememberStuck(nil, nml)
	if _, ok := stuck[0]; !ok {
		t.Fatal("the Blocked row is not remembered: the test shows nothing")
	}
	entry.UUID = "GPU-b"
	nml = nodeMigLayout("n1").spec(entry).
		status(a100(0).uuid("GPU-b").layout(wholeLayout).phase(v1alpha1.PhaseRepartitioning, v1alpha1.ReasonRepartitioning, "")).build()
	nml.Generation, nml.Status.ObservedGeneration = 2, 1
	if got, ok := rememberStuck(stuck, nml)[0]; ok {
		t.Errorf("GPU 0's change for itself judged as a retry of %s %s", got.row.Phase, got.row.Reason)
	}
}

// TestEntryForAnotherGPULeftAsItIs: where the controller does not decide a
// GPU's layout afresh (Auto mode, a pause, a conflict, a release), an
// entry written for another GPU than the one at its index now is set to
// what that GPU holds, for it: nothing was started under it, and the agent
// keeps the GPU Blocked until its entry is its own. A MIG-off entry on a
// GPU in MIG mode (the GPU that left is back) and a MIG-on entry on a GPU
// with MIG off alike; a GPU NVML cannot read, or with a mode change
// pending, and an entry of an earlier release (no UUID), keep theirs.
func TestEntryForAnotherGPULeftAsItIs(t *testing.T) {
	blocked := func(b *gpuBuilder) *gpuBuilder {
		return b.phase(v1alpha1.PhaseBlocked, v1alpha1.ReasonSpecForAnotherGPU, "written for another GPU")
	}
	// A change blocked by a device in use stays under dropUnstarted too.
	inUse := func(b *gpuBuilder) *gpuBuilder {
		return b.inUse(wholeLayout).phase(v1alpha1.PhaseBlocked, v1alpha1.ReasonDeviceInUse, "claim ns/c holds it")
	}
	type entry struct {
		UUID      string
		MIGOn     bool
		Layout    string
		Rewritten bool
	}
	for name, tc := range map[string]struct {
		spec v1alpha1.GPUSpec
		row  *gpuBuilder
		want entry
	}{
		"MIG-off entry on a GPU in MIG mode": {
			v1alpha1.GPUSpec{Index: 0, UUID: "GPU-c"}, blocked(a100(0).uuid("GPU-a").layout(wholeLayout)),
			entry{"GPU-a", true, wholeLayout, true}},
		"MIG-on entry on a GPU with MIG off": {
			specGPU(0, halvesLayout, "serves ns/p1"), blocked(a100(0).uuid("GPU-b").migOff()),
			entry{"GPU-b", false, "", true}},
		"an entry for the GPU there": {
			withSpecUUID(specGPU(0, halvesLayout, "r"), "GPU-a"), inUse(a100(0).uuid("GPU-a").layout(wholeLayout)),
			entry{"GPU-a", true, halvesLayout, false}},
		"an entry of an earlier release": {
			specGPU(0, halvesLayout, "r"), inUse(a100(0).uuid("GPU-a").layout(wholeLayout)),
			entry{"", true, halvesLayout, false}},
		"a GPU NVML cannot read": {
			withSpecUUID(specGPU(0, halvesLayout, "r"), "GPU-x"), a100(0).uuid("GPU-a").phase(v1alpha1.PhaseFailed, v1alpha1.ReasonGPUUnreadable, "lost"),
			entry{"GPU-x", true, halvesLayout, false}},
	} {
		t.Run(name, func(t *testing.T) {
			sp := tc.spec
			if sp.UUID == "" && tc.want.Rewritten {
				sp.UUID = "GPU-other"
			}
			nml := nodeMigLayout("n1").spec(sp).status(tc.row).build()
			for _, got := range [][]v1alpha1.GPUSpec{asItIsForRenumbered(nml, nml.Spec.GPUs), dropUnstarted(nml, dropForConflict)} {
				g := got[0]
				e := entry{g.UUID, g.MIGEnabled, g.Layout, strings.Contains(g.Reason, "numbered the GPUs anew")}
				if diff := cmp.Diff(tc.want, e); diff != "" {
					t.Errorf("entry (-want +got):\n%s", diff)
				}
			}
		})
	}
}

func withSpecUUID(s v1alpha1.GPUSpec, uuid string) v1alpha1.GPUSpec { s.UUID = uuid; return s }

// TestIndexLeftByRenumberingKeepsItsEntry: after the GPUs were numbered
// anew, the row of the index NVML no longer counts names no GPU (the one it
// showed is at another index now) but keeps the index's product: Static
// rules keep an entry for it, so its loss shows (GPUMissing, Degraded)
// until the GPU is back or the NodeMigLayout is deleted.
func TestIndexLeftByRenumberingKeepsItsEntry(t *testing.T) {
	missing := h100(2).layout("").phase(v1alpha1.PhaseFailed, v1alpha1.ReasonGPUMissing, "the node has no GPU with index 2")
	inv := inventory(h100(0).uuid("GPU-h1").layout(halvesLayout), h100(1).uuid("GPU-h2").layout(halvesLayout), missing)
	got, problems := DesiredGPUs(mig.DefaultCatalog(), rules(rule("h100").product("H100-SXM5-80GB").layout(halvesLayout)), inv, nil)
	if len(problems) > 0 {
		t.Fatalf("problems %+v", problems)
	}
	var indexes []int32
	for _, g := range got {
		indexes = append(indexes, g.Index)
	}
	if diff := cmp.Diff([]int32{0, 1, 2}, indexes); diff != "" {
		t.Errorf("spec entries' indexes (-want +got):\n%s", diff)
	}
}
