package main

import (
	"strings"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestPlanRefusesNegativeAgingAfter: --auto-aging-after takes 0 (never) or
// more, as the controller's flag does; a negative value is refused before
// any file or cluster is read.
func TestPlanRefusesNegativeAgingAfter(t *testing.T) {
	_, _, err := runWith(t, nil, "plan", "-f", "testdata/plan-auto.yaml", "--auto-aging-after=-1m")
	if err == nil || !strings.Contains(err.Error(), "--auto-aging-after=-1m0s") {
		t.Errorf("plan: %v, want --auto-aging-after refused", err)
	}
}

// TestNegativeRequestTimeoutRefused: --request-timeout takes 0 (none) or
// more; a negative one is refused before the kubeconfig is read.
func TestNegativeRequestTimeoutRefused(t *testing.T) {
	e := &env{}
	cmd := newRootCommandEnv(e)
	if err := cmd.PersistentFlags().Parse([]string{"--request-timeout", "-5s"}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.restConfig(); err == nil || !strings.Contains(err.Error(), "--request-timeout=-5s") {
		t.Errorf("restConfig: %v, want --request-timeout refused", err)
	}
}

// TestPlanTakesZeroAgingAfter: --auto-aging-after=0 is the controller's
// "never" (no pod is planned by age), not a value plan refuses.
func TestPlanTakesZeroAgingAfter(t *testing.T) {
	objs := []client.Object{node("auto-node", map[string]string{"pool": "auto"}), migClass()}
	if _, _, err := runWith(t, objs, "plan", "--auto-aging-after=0", "-f", "testdata/plan-auto.yaml"); err != nil {
		t.Errorf("plan --auto-aging-after=0: %v, want it taken (never planned by age)", err)
	}
}

// TestPlanRefusesSchedulerNamesTheControllerRefuses: --auto-scheduler-names
// is refused as the controller's flag is: empty, a name given twice, or one
// that is no pod's spec.schedulerName.
func TestPlanRefusesSchedulerNamesTheControllerRefuses(t *testing.T) {
	for arg, want := range map[string]string{
		"--auto-scheduler-names=":      "no scheduler named",
		"--auto-scheduler-names=a,b,a": `"a" is given twice`,
		"--auto-scheduler-names=A_B":   `"A_B" is no scheduler name`,
	} {
		_, _, err := runWith(t, nil, "plan", "-f", "testdata/plan-auto.yaml", arg)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("plan %s: %v, want an error saying %q", arg, err, want)
		}
	}
}
