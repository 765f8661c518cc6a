package chaos

import "testing"

// TestHarnessErrorsFailTheScenario: a scenario whose own steps failed (a
// fault not armed, the layout change never written) tested less than it
// says, and fails, though every invariant count is 0: before, it passed on
// no evidence, the change never made and so nothing drained.
func TestHarnessErrorsFailTheScenario(t *testing.T) {
	for name, failed := range map[string]bool{
		"static, clean":         (&Result{}).Failed(),
		"auto, clean":           (&AutoResult{}).Failed(),
		"static, harness error": (&Result{HarnessErrors: 1, Problems: []string{"setting MigLayout chaos: refused"}}).Failed(),
		"auto, harness error":   (&AutoResult{HarnessErrors: 1, Problems: []string{"creating the PriorityClass: refused"}}).Failed(),
	} {
		if want := name == "static, harness error" || name == "auto, harness error"; failed != want {
			t.Errorf("%s: Failed() = %v, want %v", name, failed, want)
		}
	}
}
