package helm

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestAgentEventsAboutClaimsOnlyWithBindingConditions: the agent records
// Events about ResourceClaims only to refuse a binding (BindingRefused),
// which it does only with binding conditions on; otherwise the agent
// node policy lets its Events be about its own NodeMigLayout and Node
// alone. (The
// policy's verdicts are checked against a real API server in
// test/e2e, TestAgentConfinedToItsNode.)
func TestAgentEventsAboutClaimsOnlyWithBindingConditions(t *testing.T) {
	for name, tc := range map[string]struct {
		binding   bool
		wantClaim bool
	}{
		"binding conditions off": {},
		"binding conditions on":  {binding: true, wantClaim: true},
	} {
		t.Run(name, func(t *testing.T) {
			r, err := Render(Options{KubeVersion: "v1.37.2", Values: map[string]any{"agent": map[string]any{"deviceBindingConditions": tc.binding}}})
			if err != nil {
				t.Fatal(err)
			}
			vap := find(t, r, "ValidatingAdmissionPolicy", "miglayout-agent-node-scope")
			vars, _, err := unstructured.NestedSlice(vap.Object, "spec", "variables")
			if err != nil {
				t.Fatal(err)
			}
			expr := ""
			for _, v := range vars {
				if m, ok := v.(map[string]any); ok && m["name"] == "eventOwned" {
					expr, _ = m["expression"].(string)
				}
			}
			if expr == "" {
				t.Fatal("no eventOwned variable in the agent node policy")
			}
			gotClaim := strings.Contains(expr, "'ResourceClaim'")
			if gotClaim != tc.wantClaim {
				t.Errorf("eventOwned lets Events about ResourceClaims through: %t, want %t:\n%s", gotClaim, tc.wantClaim, expr)
			}
			if gotClaim && !strings.Contains(expr, "'ResourceClaim' && object.?reason.orValue('') == 'BindingRefused'") {
				t.Errorf("eventOwned lets Events of any reason about ResourceClaims through:\n%s", expr)
			}
		})
	}
}
