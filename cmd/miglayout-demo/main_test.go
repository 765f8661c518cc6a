package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// The demo applies its embedded workload in two parts; each part must hold exactly the
// objects the step names, as valid YAML.
func TestWorkloadDocs(t *testing.T) {
	for _, tc := range []struct {
		keys  []string
		kinds []string
	}{
		{[]string{"Namespace", "gpu-16g", "trainer"}, []string{"Namespace", "ResourceClaim", "Pod"}},
		{[]string{"one-1g", "notebook"}, []string{"ResourceClaimTemplate", "Pod"}},
		{[]string{"four-g", "finetune", "too-big", "oversized"}, []string{"ResourceClaimTemplate", "Pod", "ResourceClaimTemplate", "Pod"}},
	} {
		docs := strings.Split(workloadDocs(tc.keys...), "\n---\n")
		if len(docs) != len(tc.kinds) {
			t.Fatalf("workloadDocs(%v): %d documents, want %d:\n%s", tc.keys, len(docs), len(tc.kinds), strings.Join(docs, "\n---\n"))
		}
		for i, doc := range docs {
			var obj struct {
				Kind     string `json:"kind"`
				Metadata struct {
					Name, Namespace string
				} `json:"metadata"`
			}
			if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
				t.Fatalf("document %d of %v: %v", i, tc.keys, err)
			}
			if obj.Kind != tc.kinds[i] {
				t.Errorf("document %d of %v is a %s, want %s", i, tc.keys, obj.Kind, tc.kinds[i])
			}
			if obj.Kind != "Namespace" && obj.Metadata.Namespace != namespace {
				t.Errorf("%s %s is in namespace %q, want %q", obj.Kind, obj.Metadata.Name, obj.Metadata.Namespace, namespace)
			}
		}
	}
	if strings.Contains(workload, "allocationMode: Count") {
		t.Error(`the workload uses allocationMode "Count", which does not exist (ExactCount)`)
	}
}

// The demo's MigLayout selects the demo's nodes and has a rule for each of their GPU models.
func TestDemoLayout(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", layoutFile))
	if err != nil {
		t.Fatal(err)
	}
	var ml v1alpha1.MigLayout
	if err := yaml.UnmarshalStrict(data, &ml); err != nil {
		t.Fatal(err)
	}
	if ml.Name != layoutName || ml.Spec.NodeSelector.MatchLabels[demoLabel] != "true" {
		t.Errorf("MigLayout %s selects %v, want name %s and %s=true", ml.Name, ml.Spec.NodeSelector.MatchLabels, layoutName, demoLabel)
	}
	// Step 8 patches /spec/rules/0/profiles: rule 0 must be the A100 rule.
	if len(ml.Spec.Rules) != 2 || ml.Spec.Rules[0].ProductName != "A100-SXM4-80GB" || ml.Spec.Rules[1].ProductName != "H100-SXM5-80GB" {
		t.Errorf("rules %+v, want the A100 rule first, then the H100 rule", ml.Spec.Rules)
	}
}
