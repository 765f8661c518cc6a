package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestPlanSeparatesTheMigLayoutsOfAFile: the plans of the MigLayouts of one
// file are told one after the other, each after a blank line.
func TestPlanSeparatesTheMigLayoutsOfAFile(t *testing.T) {
	doc := func(name string) string {
		return "apiVersion: miglayout.io/v1alpha1\nkind: MigLayout\nmetadata: {name: " + name + "}\n" +
			"spec:\n  nodeSelector: {matchLabels: {pool: " + name + "}}\n  rules: [{profiles: {7g.80gb: 1}}]\n"
	}
	f := filepath.Join(t.TempDir(), "three.yaml")
	if err := os.WriteFile(f, []byte(doc("a")+"---\n"+doc("b")+"---\n"+doc("c")), 0o600); err != nil {
		t.Fatal(err)
	}
	out, _, err := runWith(t, []client.Object{node("gpu-a", nil)}, "plan", "-f", f)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"a", "b", "c"} {
		if !strings.Contains(out, "MigLayout "+name+" (Static)") {
			t.Errorf("plan lacks MigLayout %s:\n%s", name, out)
		}
	}
	if n := strings.Count(out, ".\n\nMigLayout "); n != 2 {
		t.Errorf("%d MigLayouts told after a blank line, want 2 (b and c):\n%s", n, out)
	}
}
