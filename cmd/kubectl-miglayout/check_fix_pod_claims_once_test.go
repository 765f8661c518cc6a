package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// TestCheckFixMovesPodClaimsOnce: --fix moves the claims of pod-level
// resources into each container, once: a container that names the claim
// already keeps one entry of it (the API server refuses a container that
// names a claim twice).
func TestCheckFixMovesPodClaimsOnce(t *testing.T) {
	f := filepath.Join(t.TempDir(), "in.yaml")
	if err := os.WriteFile(f, []byte(`apiVersion: v1
kind: Pod
metadata: {name: p}
spec:
  resourceClaims: [{name: gpu, resourceClaimTemplateName: t}]
  resources: {claims: [{name: gpu}]}
  containers:
  - name: app
    image: x
    resources: {claims: [{name: gpu}]}
  - name: side
    image: x
`), 0o600); err != nil {
		t.Fatal(err)
	}
	fixed, _, err := runWith(t, nil, "check", "--offline", "--fix", "-f", f)
	if err == nil {
		t.Error("check --fix: no error, want the pod-level claims found")
	}
	var pod corev1.Pod
	if err := yaml.Unmarshal([]byte(fixed), &pod); err != nil {
		t.Fatal(err)
	}
	got := map[string][]string{}
	for _, c := range pod.Spec.Containers {
		for _, cl := range c.Resources.Claims {
			got[c.Name] = append(got[c.Name], cl.Name)
		}
	}
	if diff := cmp.Diff(map[string][]string{"app": {"gpu"}, "side": {"gpu"}}, got); diff != "" {
		t.Errorf("container claims after --fix (-want +got):\n%s\n%s", diff, fixed)
	}
}
