package chaos

import (
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/miglayout/miglayout/pkg/mig"
)

func a100View(t *testing.T, node string, idx int, pinned string) gpuView {
	t.Helper()
	m, err := mig.DefaultCatalog().Model(a100)
	if err != nil {
		t.Fatal(err)
	}
	l, err := mig.ParseLayout(pinned)
	if err != nil && pinned != "" {
		t.Fatal(err)
	}
	return gpuView{Node: node, Index: idx, Model: m, MIGOn: true, Pinned: l}
}

// TestJudgePending: a pending pod that a GPU can take beside the devices in use is
// stuck; one that fits nowhere is excused, and so is a smaller or lower-priority one
// while a large pod that fits nowhere may keep a placement.
func TestJudgePending(t *testing.T) {
	gpus := []gpuView{a100View(t, "n", 0, "3g.40gb@4"), a100View(t, "n", 1, "4g.40gb@0,1g.10gb@4")}
	j := judgePending([]autoPod{{Name: "small", Profile: "1g.10gb"}}, gpus, nil)
	if j.Stuck["small"] == "" {
		t.Errorf("a 1g.10gb beside 3g.40gb@4 must be served: %+v", j)
	}
	j = judgePending([]autoPod{{Name: "whole", Profile: "7g.80gb"}, {Name: "four", Profile: "4g.40gb", Priority: AutoPriority}}, gpus, nil)
	if j.Excused["whole"] == "" || j.Stuck["four"] == "" {
		t.Errorf("7g.80gb fits nowhere (excused), a high-priority 4g.40gb@0 fits on gpu 0 (stuck): %+v", j)
	}
	j = judgePending([]autoPod{{Name: "whole", Profile: "7g.80gb"}, {Name: "small", Profile: "1g.10gb"}}, gpus, nil)
	if j.Excused["small"] == "" {
		t.Errorf("a 1g.10gb may wait while a placement is kept for a 7g.80gb: %+v", j)
	}
	j = judgePending([]autoPod{{Name: "whole", Profile: "7g.80gb"}, {Name: "high", Profile: "1g.10gb", Priority: AutoPriority}}, gpus, nil)
	if j.Stuck["high"] == "" {
		t.Errorf("a high-priority 1g.10gb is planned before the 7g.80gb and must be served: %+v", j)
	}
	// The 7g.80gb's placement is kept on gpu 0: the 1g.10gb fits there only (gpu 1
	// has 4g.40gb@0 and 1g.10gb@4 pinned, and room at 5 and 6).
	kept := map[string]keptPlacement{"whole": {Node: "n", GPU: 0, Placement: mig.Placement{Start: 0, Size: 8}}}
	j = judgePending([]autoPod{{Name: "whole", Profile: "7g.80gb"}, {Name: "small", Profile: "1g.10gb"}}, gpus, kept)
	if j.Stuck["small"] == "" {
		t.Errorf("a 1g.10gb fits on gpu 1, clear of the placement kept on gpu 0: %+v", j)
	}
	j = judgePending([]autoPod{{Name: "whole", Profile: "7g.80gb"}, {Name: "two", Profile: "2g.20gb"}}, gpus, kept)
	if j.Excused["two"] == "" {
		t.Errorf("a 2g.20gb fits only on gpu 0, where the 7g.80gb's placement is kept: %+v", j)
	}
	// A chain: the 4g.40gb fits only on gpu 0, where the 7g.80gb's placement is kept,
	// so the planner keeps it one on gpu 1 (4g.40gb@0, free once 1g.10gb@2 is released);
	// the 1g.10gb fits only on placements kept for the two.
	chain := []gpuView{a100View(t, "n", 0, "1g.10gb@6"), a100View(t, "n", 1, "1g.10gb@2,3g.40gb@4")}
	kept = map[string]keptPlacement{
		"whole": {Node: "n", GPU: 0, Placement: mig.Placement{Start: 0, Size: 8}},
		"four":  {Node: "n", GPU: 1, Placement: mig.Placement{Start: 0, Size: 4}},
	}
	j = judgePending([]autoPod{{Name: "whole", Profile: "7g.80gb"}, {Name: "four", Profile: "4g.40gb"}, {Name: "small", Profile: "1g.10gb"}}, chain, kept)
	if j.Excused["four"] == "" || j.Excused["small"] == "" {
		t.Errorf("the 4g.40gb fits only where the 7g.80gb's placement is kept, the 1g.10gb only where the two are: %+v", j)
	}
	delete(kept, "four")
	j = judgePending([]autoPod{{Name: "whole", Profile: "7g.80gb"}, {Name: "four", Profile: "4g.40gb"}, {Name: "small", Profile: "1g.10gb"}}, chain, kept)
	if j.Excused["small"] == "" || !strings.Contains(j.Excused["small"], "may be kept for four") {
		t.Errorf("the 4g.40gb's kept placement is not known: the 1g.10gb may wait for it: %+v", j)
	}
	if !holdTogether([]autoPod{{Profile: "7g.80gb"}, {Profile: "4g.40gb"}, {Profile: "3g.40gb"}}, gpus) {
		t.Error("two freed A100s hold a 7g.80gb, a 4g.40gb and a 3g.40gb")
	}
	if holdTogether([]autoPod{{Profile: "7g.80gb"}, {Profile: "7g.80gb"}, {Profile: "1g.10gb"}}, gpus) {
		t.Error("two A100s do not hold two 7g.80gb and a 1g.10gb")
	}
}

// TestAutoScenarioIsDeterministic: an Auto scenario derives from its seed alone, and
// AutoSeeds spreads the main faults evenly.
func TestAutoScenarioIsDeterministic(t *testing.T) {
	for _, seed := range AutoSeeds(99, 2*len(AutoFaults)) {
		if a, b := NewAutoScenario(seed, 12*time.Second).Describe(), NewAutoScenario(seed, 12*time.Second).Describe(); a != b {
			t.Fatalf("seed %d gave two scenarios:\n%s\n%s", seed, a, b)
		}
	}
	count := map[FaultKind]int{}
	for _, seed := range AutoSeeds(5, 2*len(AutoFaults)) {
		count[AutoFaults[seed%int64(len(AutoFaults))]]++
	}
	for _, k := range AutoFaults {
		if count[k] != 2 {
			t.Errorf("fault %s drawn %d times, want 2", k, count[k])
		}
	}
}

// TestUnusedDestroys: a device created and destroyed again without an allocation counts,
// once however often its destroy is logged (a retry); one a claim was allocated (named
// among any other devices seen allocated), or one that existed before the run, does not.
func TestUnusedDestroys(t *testing.T) {
	twice := []byte(`I1 "Creating MIG device" node="n" gpu=0 device="3g.40gb@4"
I2 "Creating MIG device" node="n" gpu=1 device="1g.10gb@6"
I3 "Destroying MIG device" node="n" gpu=0 device="3g.40gb@4"
I4 "Destroying MIG device" node="n" gpu=1 device="1g.10gb@6"
I5 "Destroying MIG device" node="n" gpu=1 device="7g.80gb@0"
`)
	retried := []byte(`I1 "Creating MIG device" node="n" gpu=0 device="3g.40gb@4"
I2 "Destroying MIG device" node="n" gpu=0 device="3g.40gb@4"
I3 "Destroying MIG device" node="n" gpu=0 device="3g.40gb@4"
I4 "Creating MIG device" node="n" gpu=1 device="1g.10gb@6"
I5 "Destroying MIG device" node="n" gpu=1 device="1g.10gb@6"
`)
	for name, tc := range map[string]struct {
		log       []byte
		allocated []string
		want      int
	}{
		"nothing allocated":               {log: twice, want: 2},
		"gpu 1's 1g.10gb@6 allocated":     {log: twice, allocated: []string{"gpu-1-mig-1g10gb-19-6"}, want: 1},
		"a destroy retried":               {log: retried, want: 2},
		"one allocated among other names": {log: retried, allocated: []string{"gpu-1-mig-1g10gb-19-6", "gpu-0-mig-1g10gb-19-0", "gpu-1-mig-2g20gb-14-0", "gpu-0-mig-7g80gb-0-0"}, want: 1},
	} {
		t.Run(name, func(t *testing.T) {
			for range 20 { // map order
				if got := unusedDestroys(tc.log, sets.New(tc.allocated...)); got != tc.want {
					t.Fatalf("%d unused destroys, want %d", got, tc.want)
				}
			}
		})
	}
}
