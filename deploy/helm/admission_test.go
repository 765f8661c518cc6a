package helm

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// TestAgentCriticalPriorityHasQuota: GKE (and any cluster that limits
// critical PriorityClasses by default, see
// https://kubernetes.io/docs/concepts/policy/resource-quotas/#limit-priority-class-consumption-by-default)
// admits a pod of system-node-critical outside kube-system only in a
// namespace with a ResourceQuota scoped to that class: without one the
// agent DaemonSet would create no pod ("insufficient quota to match these
// scopes").
func TestAgentCriticalPriorityHasQuota(t *testing.T) {
	r := render(t, nil)
	ds := find(t, r, "DaemonSet", "miglayout-agent")
	pc, _, _ := unstructuredString(ds.Object, "spec", "template", "spec", "priorityClassName")
	if pc != "system-node-critical" {
		t.Fatalf("agent priorityClassName %q, want system-node-critical (the chart's default)", pc)
	}
	if quotaAdmits(t, r, pc) {
		return
	}
	t.Errorf("the agent runs at %s in namespace miglayout-system but the chart renders no ResourceQuota scoped to that PriorityClass there: on GKE its pods are refused (insufficient quota to match these scopes)", pc)
}

// quotaAdmits reports whether r has a ResourceQuota in miglayout-system,
// scoped to PriorityClass class, that limits pods.
func quotaAdmits(t *testing.T, r *Rendered, class string) bool {
	t.Helper()
	for _, o := range r.Objects {
		if o.GetKind() != "ResourceQuota" || o.GetNamespace() != "miglayout-system" {
			continue
		}
		q := convert[corev1.ResourceQuota](t, o)
		if q.Spec.ScopeSelector == nil {
			continue
		}
		for _, e := range q.Spec.ScopeSelector.MatchExpressions {
			if e.ScopeName == corev1.ResourceQuotaScopePriorityClass && e.Operator == corev1.ScopeSelectorOpIn && slices.Contains(e.Values, class) {
				if _, ok := q.Spec.Hard[corev1.ResourcePods]; ok {
					return true
				}
			}
		}
	}
	return false
}

func unstructuredString(obj map[string]any, path ...string) (string, bool, error) {
	var cur any = obj
	for _, p := range path {
		m, ok := cur.(map[string]any)
		if !ok {
			return "", false, nil
		}
		cur = m[p]
	}
	s, ok := cur.(string)
	return s, ok, nil
}

// TestInstallDocsNamePodSecurityLevel: the agent is privileged with
// hostPath volumes, so Pod Security Admission admits it only in a namespace
// at the privileged level; where the cluster's default level is baseline or
// restricted, an install made without labelling the namespace has every
// agent pod refused: the chart README's install steps label it.
func TestInstallDocsNamePodSecurityLevel(t *testing.T) {
	r := render(t, nil)
	if !strings.Contains(r.Manifest, "privileged: true") {
		t.Fatal("agent not privileged by default: the test reads the chart wrong, or the chart changed")
	}
	readme, err := os.ReadFile(filepath.Join(ChartDir(), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(readme), "pod-security.kubernetes.io/enforce") {
		t.Error("the agent needs Pod Security level privileged, but the chart README's install steps never label the namespace pod-security.kubernetes.io/enforce=privileged")
	}
}
