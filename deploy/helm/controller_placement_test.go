package helm

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

// TestControllerPrefersNodesWithoutAgent: the controller prefers nodes the
// agent does not run on (its default nodeSelector, or the one given): a
// privileged agent sees its node's pods' service-account tokens. With more
// than one replica the replicas also spread over nodes; a controller
// affinity given replaces both.
func TestControllerPrefersNodesWithoutAgent(t *testing.T) {
	notOn := func(key, value string) corev1.PreferredSchedulingTerm {
		return corev1.PreferredSchedulingTerm{Weight: 100, Preference: corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{
			{Key: key, Operator: corev1.NodeSelectorOpNotIn, Values: []string{value}}}}}
	}
	given := map[string]any{"nodeAffinity": map[string]any{"requiredDuringSchedulingIgnoredDuringExecution": map[string]any{
		"nodeSelectorTerms": []any{map[string]any{"matchExpressions": []any{map[string]any{"key": "role", "operator": "In", "values": []any{"control"}}}}}}}}
	for name, tc := range map[string]struct {
		values     map[string]any
		wantPrefer []corev1.PreferredSchedulingTerm
		wantSpread bool
		wantGiven  bool
	}{
		"defaults": {
			wantPrefer: []corev1.PreferredSchedulingTerm{notOn("nvidia.com/mig.capable", "true")},
			wantSpread: true,
		},
		"the agent's own nodeSelector, one replica": {
			values: map[string]any{"agent": map[string]any{"nodeSelector": map[string]any{"gpu": "mig", "pool": "a100"}},
				"controller": map[string]any{"replicas": 1, "leaderElection": map[string]any{"enabled": false}}},
			wantPrefer: []corev1.PreferredSchedulingTerm{notOn("gpu", "mig"), notOn("pool", "a100")},
		},
		"a controller affinity given": {
			values:    map[string]any{"controller": map[string]any{"affinity": given}},
			wantGiven: true,
		},
	} {
		t.Run(name, func(t *testing.T) {
			d := convert[appsv1.Deployment](t, find(t, render(t, tc.values), "Deployment", "miglayout-controller"))
			a := d.Spec.Template.Spec.Affinity
			if a == nil {
				t.Fatal("the controller has no affinity")
			}
			if tc.wantGiven {
				if a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil || a.PodAntiAffinity != nil ||
					len(a.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution) != 0 {
					t.Errorf("affinity %+v, want the one given only", a)
				}
				return
			}
			var prefer []corev1.PreferredSchedulingTerm
			if a.NodeAffinity != nil {
				prefer = a.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution
			}
			if diff := cmp.Diff(tc.wantPrefer, prefer); diff != "" {
				t.Errorf("preferred node affinity (-want +got):\n%s", diff)
			}
			if spread := a.PodAntiAffinity != nil; spread != tc.wantSpread {
				t.Errorf("replicas spread %t, want %t", spread, tc.wantSpread)
			}
		})
	}
}

// TestNotesWarnWhenAgentPolicyDoesNotDeny: the install notes warn where the
// agent admission policy confines no agent: off, or set to warn or audit
// only.
func TestNotesWarnWhenAgentPolicyDoesNotDeny(t *testing.T) {
	for name, tc := range map[string]struct {
		policy   map[string]any
		binding  bool
		wantWarn bool
	}{
		"default (Deny)":                 {wantWarn: false},
		"off":                            {policy: map[string]any{"enabled": false}, wantWarn: true},
		"off, with binding conditions":   {policy: map[string]any{"enabled": false}, binding: true, wantWarn: true},
		"Warn and Audit":                 {policy: map[string]any{"validationActions": []any{"Warn", "Audit"}}, wantWarn: true},
		"Audit, with binding conditions": {policy: map[string]any{"validationActions": []any{"Audit"}}, binding: true, wantWarn: true},
		"Deny and Audit too":             {policy: map[string]any{"validationActions": []any{"Deny", "Audit"}}, wantWarn: false},
	} {
		t.Run(name, func(t *testing.T) {
			values := map[string]any{"agent": map[string]any{"deviceBindingConditions": tc.binding}}
			if tc.policy != nil {
				values["agentNodePolicy"] = tc.policy
			}
			r, err := Render(Options{KubeVersion: "v1.37.2", Values: values})
			if err != nil {
				t.Fatal(err)
			}
			if warned := strings.Contains(r.Notes, "WARNING: agentNodePolicy"); warned != tc.wantWarn {
				t.Errorf("warning in NOTES %t, want %t:\n%s", warned, tc.wantWarn, r.Notes)
			}
			// With binding conditions an unconfined agent can also
			// write claims' status.
			if claims := strings.Contains(r.Notes, "ResourceClaim's status"); claims != (tc.wantWarn && tc.binding) {
				t.Errorf("NOTES name claims' status %t, want %t:\n%s", claims, tc.wantWarn && tc.binding, r.Notes)
			}
		})
	}
}

// TestControllerWithoutLeaderElectionIsRecreated: without leader election
// (one replica, which the chart allows) an update must not run the new
// controller beside the old one, both planning with no Lease between them:
// the Deployment recreates it. With leader election it is a rolling update
// (the new replica waits for the Lease), written out in full so that the
// chart owns it and a later switch to Recreate drops it.
func TestControllerWithoutLeaderElectionIsRecreated(t *testing.T) {
	for name, tc := range map[string]struct {
		values map[string]any
		want   appsv1.DeploymentStrategyType
	}{
		"leader election (default)": {want: appsv1.RollingUpdateDeploymentStrategyType},
		"one replica without leader election": {values: map[string]any{"controller": map[string]any{"replicas": 1, "leaderElection": map[string]any{"enabled": false}}},
			want: appsv1.RecreateDeploymentStrategyType},
	} {
		t.Run(name, func(t *testing.T) {
			d := convert[appsv1.Deployment](t, find(t, render(t, tc.values), "Deployment", "miglayout-controller"))
			if got := d.Spec.Strategy.Type; got != tc.want {
				t.Errorf("strategy %q, want %q", got, tc.want)
			}
			if ru := d.Spec.Strategy.RollingUpdate; (ru != nil) != (tc.want == appsv1.RollingUpdateDeploymentStrategyType) {
				t.Errorf("rollingUpdate %+v with strategy %q", ru, tc.want)
			}
		})
	}
}
