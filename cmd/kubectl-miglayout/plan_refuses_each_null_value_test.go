package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestPlanRefusesASingleNullValue: one entry left without a value is
// enough for plan to refuse the MigLayout, naming it, whether a selector
// label, a rule's profile count or an Auto policy's spare count.
func TestPlanRefusesASingleNullValue(t *testing.T) {
	const head = "apiVersion: miglayout.io/v1alpha1\nkind: MigLayout\nmetadata: {name: nulls}\nspec:\n"
	for name, tc := range map[string]struct{ spec, want string }{
		"a selector label": {"  nodeSelector:\n    matchLabels:\n      pool:\n  rules:\n  - profiles: {1g.10gb: 1}\n",
			"spec.nodeSelector.matchLabels[pool] left without a value"},
		"a profile count": {"  nodeSelector:\n    matchLabels:\n      pool: a\n  rules:\n  - profiles:\n      3g.40gb:\n",
			"spec.rules[0].profiles[3g.40gb] left without a value"},
		"a spare count": {"  nodeSelector:\n    matchLabels:\n      pool: a\n  mode: Auto\n  policy:\n    spares:\n      1g.10gb:\n",
			"spec.policy.spares[1g.10gb] left without a value"},
	} {
		t.Run(name, func(t *testing.T) {
			f := filepath.Join(t.TempDir(), "nulls.yaml")
			if err := os.WriteFile(f, []byte(head+tc.spec), 0o600); err != nil {
				t.Fatal(err)
			}
			out, _, err := runWith(t, []client.Object{node("gpu-a", map[string]string{"pool": "a"})}, "plan", "-f", f)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("plan: %v, want an error saying %q; planned:\n%s", err, tc.want, out)
			}
		})
	}
}
