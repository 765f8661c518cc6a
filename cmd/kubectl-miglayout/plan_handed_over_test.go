package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// TestPlanNodeHandedOverToAnotherMigLayout: MigLayout a controls
// shared-node, which the stored MigLayout other selects too (a conflict:
// left as it is). The file narrows a's selector off shared-node: once
// applied, other selects it alone, takes it over and applies its rule
// (7g.80gb to seven 1g.10gb). plan says so, with other's plan there, and
// exits 2; a paused other is named, and starts nothing (exit 3).
func TestPlanNodeHandedOverToAnotherMigLayout(t *testing.T) {
	f := filepath.Join(t.TempDir(), "a.yaml")
	doc := "apiVersion: miglayout.io/v1alpha1\nkind: MigLayout\nmetadata:\n  name: a\nspec:\n  nodeSelector:\n    matchLabels:\n      pool: a\n    matchExpressions:\n    - {key: team, operator: DoesNotExist}\n  rules:\n  - profiles: {7g.80gb: 1}\n"
	if err := os.WriteFile(f, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		paused   bool
		want     string
		wantCode int
	}{
		"taken over":        {want: "7g.80gb@0 -> 1g.10gb@0,", wantCode: 2},
		"taken over paused": {paused: true, want: "it is paused, so nothing is started there", wantCode: 3},
	} {
		t.Run(name, func(t *testing.T) {
			objs := handOverCluster(map[string]handOverML{
				"a":     {selector: metav1.LabelSelector{MatchLabels: map[string]string{"pool": "a"}}, profiles: map[string]int32{"7g.80gb": 1}},
				"other": {selector: metav1.LabelSelector{MatchLabels: map[string]string{"team": "x"}}, profiles: map[string]int32{"1g.10gb": 7}, paused: tc.paused},
			}, map[string]map[string]string{"a-node": {"pool": "a"}, "shared-node": {"pool": "a", "team": "x"}},
				map[string]string{"a-node": "a", "shared-node": "a"})
			out, _, err := runWith(t, objs, "plan", "--exit-code", "-f", f)
			if code := exitStatus(t, err); code != tc.wantCode {
				t.Errorf("exit status %d, want %d:\n%s", code, tc.wantCode, out)
			}
			for _, want := range []string{"no longer selects shared-node, which MigLayout other (Static) then selects alone and takes over", tc.want} {
				if !strings.Contains(out, want) {
					t.Errorf("plan lacks %q:\n%s", want, out)
				}
			}
			if strings.Contains(out, "their GPUs keep the layouts they have") {
				t.Errorf("plan says shared-node keeps its layouts:\n%s", out)
			}
		})
	}
}

// handOverCluster is the stored Static MigLayouts mls (each with one rule
// of profiles, paused or not), the nodes with their labels, and a NodeMigLayout per node
// controlled by the MigLayout owners names, each node's GPU 0 an A100 on
// 7g.80gb@0.
func handOverCluster(mls map[string]handOverML, nodes map[string]map[string]string, owners map[string]string) []client.Object {
	var objs []client.Object
	for name, m := range mls {
		objs = append(objs, &v1alpha1.MigLayout{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name)},
			Spec: v1alpha1.MigLayoutSpec{Mode: v1alpha1.ModeStatic, Paused: m.paused, NodeSelector: m.selector, Rules: []v1alpha1.LayoutRule{{Profiles: m.profiles}}}})
	}
	for name, labels := range nodes {
		owner := owners[name]
		objs = append(objs, node(name, labels), &v1alpha1.NodeMigLayout{ObjectMeta: metav1.ObjectMeta{Name: name, OwnerReferences: []metav1.OwnerReference{{
			APIVersion: v1alpha1.GroupVersion.String(), Kind: "MigLayout", Name: owner, UID: types.UID("uid-" + owner), Controller: ptr.To(true)}}},
			Spec: v1alpha1.NodeMigLayoutSpec{MigLayout: owner, GPUs: []v1alpha1.GPUSpec{{Index: 0, MIGEnabled: true, Layout: "7g.80gb@0"}}},
			Status: v1alpha1.NodeMigLayoutStatus{ObservedGeneration: 1, GPUs: []v1alpha1.GPUStatus{{Index: 0, Product: "NVIDIA A100-SXM4-80GB", Model: "A100-SXM4-80GB",
				MIGEnabled: true, MIGPending: true, Layout: "7g.80gb@0", Phase: v1alpha1.PhaseReady}}}})
	}
	return objs
}

type handOverML struct {
	selector metav1.LabelSelector
	profiles map[string]int32
	paused   bool
}

// TestPlanHandOverEdges: no handover where the controller makes none (the
// node's NodeMigLayout held by a MigLayout whose selector does not parse);
// a node two of the file's MigLayouts hand over is planned once; one handed
// to a MigLayout of the files is planned in its own section, not said to
// keep its layouts.
func TestPlanHandOverEdges(t *testing.T) {
	sel := func(kv ...string) metav1.LabelSelector {
		return metav1.LabelSelector{MatchLabels: map[string]string{kv[0]: kv[1]}}
	}
	whole, sevenths := map[string]int32{"7g.80gb": 1}, map[string]int32{"1g.10gb": 7}
	narrowed := func(name, label string) string {
		return "---\napiVersion: miglayout.io/v1alpha1\nkind: MigLayout\nmetadata:\n  name: " + name + "\nspec:\n  nodeSelector:\n    matchLabels:\n      " + label +
			"\n    matchExpressions:\n    - {key: team, operator: DoesNotExist}\n  rules:\n  - profiles: {7g.80gb: 1}\n"
	}
	xInFile := "---\napiVersion: miglayout.io/v1alpha1\nkind: MigLayout\nmetadata:\n  name: x\nspec:\n  nodeSelector:\n    matchLabels:\n      team: x\n  rules:\n  - profiles: {1g.10gb: 7}\n"
	for name, tc := range map[string]struct {
		objs     []client.Object
		file     string
		want     []string
		wantNot  []string
		wantCode int
	}{
		"held by an invalid selector": {
			objs: handOverCluster(map[string]handOverML{"a": {selector: sel("pool", "a"), profiles: whole}, "x": {selector: sel("team", "x"), profiles: sevenths}, "bad": {selector: sel("bad key", "a"), profiles: whole}},
				map[string]map[string]string{"a-node": {"pool": "a"}, "shared-node": {"pool": "a", "team": "x"}},
				map[string]string{"a-node": "a", "shared-node": "bad"}),
			file:    narrowed("a", "pool: a"),
			wantNot: []string{"takes over", "-> 1g.10gb@0"}, wantCode: 0,
		},
		"handed over by two": {
			objs: handOverCluster(map[string]handOverML{"a": {selector: sel("pool", "a"), profiles: whole}, "b": {selector: sel("zone", "z"), profiles: whole}, "x": {selector: sel("team", "x"), profiles: sevenths}},
				map[string]map[string]string{"a-node": {"pool": "a"}, "b-node": {"zone": "z"}, "shared-node": {"pool": "a", "zone": "z", "team": "x"}},
				map[string]string{"a-node": "a", "b-node": "b", "shared-node": "x"}),
			file:     narrowed("a", "pool: a") + narrowed("b", "zone: z"),
			want:     []string{"its plan on shared-node is shown above"},
			wantCode: 2,
		},
		"handed over by two, in part": {
			objs: handOverCluster(map[string]handOverML{"a": {selector: sel("pool", "a"), profiles: whole}, "b": {selector: sel("zone", "z"), profiles: whole}, "x": {selector: sel("team", "x"), profiles: sevenths}},
				map[string]map[string]string{"a-node": {"pool": "a"}, "b-node": {"zone": "z"}, "shared-node": {"pool": "a", "zone": "z", "team": "x"},
					"b-shared-node": {"zone": "z", "team": "x"}},
				map[string]string{"a-node": "a", "b-node": "b", "shared-node": "x", "b-shared-node": "x"}),
			file:     narrowed("a", "pool: a") + narrowed("b", "zone: z"),
			want:     []string{"its plan on shared-node is shown above", "\nb-shared-node"},
			wantCode: 2,
		},
		"handed over by a MigLayout whose selector the file fixes": {
			objs: handOverCluster(map[string]handOverML{"bad": {selector: sel("bad key", "a"), profiles: whole}, "x": {selector: sel("team", "x"), profiles: sevenths}},
				map[string]map[string]string{"a-node": {"pool": "a"}, "shared-node": {"pool": "a", "team": "x"}},
				map[string]string{"a-node": "bad", "shared-node": "bad"}),
			file:     narrowed("bad", "pool: a"),
			want:     []string{"no longer selects shared-node, which MigLayout x (Static) then selects alone and takes over", "7g.80gb@0 -> 1g.10gb@0"},
			wantCode: 2,
		},
		"handed to a MigLayout of the files": {
			objs: handOverCluster(map[string]handOverML{"a": {selector: sel("pool", "a"), profiles: whole}, "x": {selector: sel("team", "x"), profiles: map[string]int32{"3g.40gb": 2}}},
				map[string]map[string]string{"a-node": {"pool": "a"}, "shared-node": {"pool": "a", "team": "x"}},
				map[string]string{"a-node": "a", "shared-node": "a"}),
			file:     narrowed("a", "pool: a") + xInFile,
			want:     []string{"its plan in the files shows what it does there", "7g.80gb@0 -> 1g.10gb@0"},
			wantNot:  []string{"their GPUs keep the layouts they have"},
			wantCode: 2,
		},
	} {
		t.Run(name, func(t *testing.T) {
			f := filepath.Join(t.TempDir(), "f.yaml")
			if err := os.WriteFile(f, []byte(strings.TrimPrefix(tc.file, "---\n")), 0o644); err != nil {
				t.Fatal(err)
			}
			out, _, err := runWith(t, tc.objs, "plan", "--exit-code", "-f", f)
			if code := exitStatus(t, err); code != tc.wantCode {
				t.Errorf("exit status %d, want %d:\n%s", code, tc.wantCode, out)
			}
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("plan lacks %q:\n%s", w, out)
				}
			}
			for _, w := range tc.wantNot {
				if strings.Contains(out, w) {
					t.Errorf("plan says %q:\n%s", w, out)
				}
			}
			if n := strings.Count(out, "\nshared-node"); n > 1 {
				t.Errorf("shared-node planned %d times:\n%s", n, out)
			}
		})
	}
}
