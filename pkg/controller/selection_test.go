package controller

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

func TestSelectNodes(t *testing.T) {
	nodes := map[string]map[string]string{
		"a1": {"pool": "a"},
		"a2": {"pool": "a", "zone": "z1"},
		"b1": {"pool": "b", "zone": "z1"},
		"c1": {},
	}
	tests := map[string]struct {
		ml      v1alpha1.MigLayout
		others  []v1alpha1.MigLayout
		want    Selection
		message string
	}{
		"selects by label": {
			ml:   migLayout("a").selects("pool", "a").build(),
			want: Selection{Nodes: []string{"a1", "a2"}},
		},
		"empty selector selects every node": {
			ml:   migLayout("all").build(),
			want: Selection{Nodes: []string{"a1", "a2", "b1", "c1"}},
		},
		"selects nothing": {
			ml:   migLayout("none").selects("pool", "x").build(),
			want: Selection{},
		},
		"overlap with another MigLayout": {
			ml:     migLayout("a").selects("pool", "a").build(),
			others: []v1alpha1.MigLayout{migLayout("z1").selects("zone", "z1").build(), migLayout("b").selects("pool", "b").build()},
			want: Selection{
				Nodes:     []string{"a1", "a2"},
				Conflicts: map[string][]string{"z1": {"a2"}},
			},
			message: `MigLayout "z1" also selects node a2; these nodes are left as they are until one MigLayout selects them (change a node selector or the nodes' labels, or delete one of the MigLayouts)`,
		},
		"overlap with several MigLayouts": {
			ml:     migLayout("all").build(),
			others: []v1alpha1.MigLayout{migLayout("z1").selects("zone", "z1").build(), migLayout("a").selects("pool", "a").build()},
			want: Selection{
				Nodes:     []string{"a1", "a2", "b1", "c1"},
				Conflicts: map[string][]string{"z1": {"a2", "b1"}, "a": {"a1", "a2"}},
			},
			message: `MigLayout "a" also selects nodes a1, a2; MigLayout "z1" also selects nodes a2, b1; these nodes are left as they are until one MigLayout selects them (change a node selector or the nodes' labels, or delete one of the MigLayouts)`,
		},
		"a MigLayout being deleted selects nothing": {
			ml:     migLayout("a").selects("pool", "a").build(),
			others: []v1alpha1.MigLayout{migLayout("old").selects("pool", "a").deleting().build()},
			want:   Selection{Nodes: []string{"a1", "a2"}},
		},
		"another MigLayout with a bad selector selects nothing": {
			ml: migLayout("a").selects("pool", "a").build(),
			others: []v1alpha1.MigLayout{migLayout("bad").selector(metav1.LabelSelector{
				MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "pool", Operator: "Like"}},
			}).build()},
			want: Selection{Nodes: []string{"a1", "a2"}},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			all := append([]v1alpha1.MigLayout{tc.ml}, tc.others...)
			got, err := SelectNodes(&tc.ml, all, nodes)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("selection (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.message, got.ConflictMessage()); diff != "" {
				t.Errorf("conflict message (-want +got):\n%s", diff)
			}
			for _, n := range got.Nodes {
				shared := false
				for _, ns := range tc.want.Conflicts {
					for _, c := range ns {
						shared = shared || c == n
					}
				}
				if got.Conflicted(n) != shared {
					t.Errorf("Conflicted(%s) = %v, want %v", n, got.Conflicted(n), shared)
				}
			}
		})
	}
}

func TestSelectNodesBadSelector(t *testing.T) {
	ml := migLayout("bad").selector(metav1.LabelSelector{
		MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "pool", Operator: "Like"}},
	}).build()
	if _, err := SelectNodes(&ml, nil, map[string]map[string]string{"n": {}}); err == nil {
		t.Fatal("SelectNodes accepted the operator Like")
	}
}
