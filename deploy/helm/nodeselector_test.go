package helm

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
)

// TestAgentNodeSelectorReplacesTheDefault: the README has the operator
// label the GPU nodes nvidia.com/mig.capable=true "or another label given as
// agent.nodeSelector". A selector given in the values is the agent's
// selector; the default label must not be ANDed into it (Helm merges a map
// value with the default map), or the agent runs on no node that lacks
// nvidia.com/mig.capable=true, and no claim on those nodes is ever
// prepared.
func TestAgentNodeSelectorReplacesTheDefault(t *testing.T) {
	want := map[string]string{"example.com/gpu-pool": "mig"}
	ds := convert[appsv1.DaemonSet](t, find(t, render(t, map[string]any{"agent": map[string]any{
		"nodeSelector": map[string]any{"example.com/gpu-pool": "mig"}}}), "DaemonSet", "miglayout-agent"))
	if diff := cmp.Diff(want, ds.Spec.Template.Spec.NodeSelector); diff != "" {
		t.Errorf("agent nodeSelector with agent.nodeSelector={example.com/gpu-pool: mig} (-want +got):\n%s", diff)
	}
}

// TestAgentNodeSelectorDefault: with no agent.nodeSelector the agent runs
// on the nodes GPU feature discovery marks MIG-capable, and an empty map
// given explicitly means the same (never every node).
func TestAgentNodeSelectorDefault(t *testing.T) {
	want := map[string]string{"nvidia.com/mig.capable": "true"}
	for name, values := range map[string]map[string]any{
		"unset": nil,
		"empty": {"agent": map[string]any{"nodeSelector": map[string]any{}}},
		"null":  {"agent": map[string]any{"nodeSelector": nil}},
	} {
		ds := convert[appsv1.DaemonSet](t, find(t, render(t, values), "DaemonSet", "miglayout-agent"))
		if diff := cmp.Diff(want, ds.Spec.Template.Spec.NodeSelector); diff != "" {
			t.Errorf("%s: agent nodeSelector (-want +got):\n%s", name, diff)
		}
	}
}

// TestNotesNameTheAgentSelector: the install notes tell the operator which
// nodes the agent runs on: the selector the DaemonSet gets, the default
// label included (not "{}").
func TestNotesNameTheAgentSelector(t *testing.T) {
	tests := map[string]struct {
		values map[string]any
		want   string
	}{
		"default": {want: `{"nvidia.com/mig.capable":"true"}`},
		"given": {values: map[string]any{"agent": map[string]any{"nodeSelector": map[string]any{"example.com/gpu-pool": "mig"}}},
			want: `{"example.com/gpu-pool":"mig"}`},
	}
	for name, tc := range tests {
		if r := render(t, tc.values); !strings.Contains(r.Notes, "nodes matching "+tc.want) {
			t.Errorf("%s: NOTES do not name selector %s:\n%s", name, tc.want, r.Notes)
		}
	}
}
