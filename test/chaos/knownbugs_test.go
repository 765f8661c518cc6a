package chaos

import (
	"context"
	"testing"

	"github.com/miglayout/miglayout/pkg/mig"
	"github.com/miglayout/miglayout/pkg/mig/gpu"
	"github.com/miglayout/miglayout/pkg/mig/nvmlsim"
)

// TestScenarioIsDeterministic: a scenario derives from its seed alone (the regression
// table and -seeds replays depend on it), and Seeds spreads the main faults evenly.
func TestScenarioIsDeterministic(t *testing.T) {
	for _, seed := range Seeds(99, 2*len(PrimaryFaults)) {
		if a, b := NewScenario(seed).Describe(), NewScenario(seed).Describe(); a != b {
			t.Fatalf("seed %d gave two scenarios:\n%s\n%s", seed, a, b)
		}
	}
	count := map[FaultKind]int{}
	for _, seed := range Seeds(5, 3*len(PrimaryFaults)) {
		count[PrimaryFaults[seed%int64(len(PrimaryFaults))]]++
	}
	for _, k := range PrimaryFaults {
		if count[k] != 3 {
			t.Errorf("fault %s drawn %d times in %d scenarios, want 3", k, count[k], 3*len(PrimaryFaults))
		}
	}
}

// TestOrphanGIIsRolledBack is the regression test of the first bug the chaos suite
// found, without a cluster: when
// nvmlGpuInstanceCreateComputeInstance reports SUCCESS but no compute instance exists
// (nvmlsim Lie; on real hardware, a CI destroyed behind the agent's back between create
// and read-back), NVMLManager.CreateMIGDevice returns no error and a device with CIID -1.
// The agent's apply() then counts it as created and matches() (GIs without CI included)
// reported the GPU Ready. CreateMIGDevice must refuse (and roll back) a GI without
// its compute instance.
func TestOrphanGIIsRolledBack(t *testing.T) {
	sim, err := nvmlsim.New(nvmlsim.Config{Spec: "1x" + a100})
	if err != nil {
		t.Fatal(err)
	}
	m, err := gpu.NewNVML(sim, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := m.SetMIGMode(ctx, 0, true); err != nil {
		t.Fatal(err)
	}
	if err := sim.InjectFault(nvmlsim.Fault{Op: "CreateComputeInstance", Nth: 1, Lie: true}); err != nil {
		t.Fatal(err)
	}
	d, err := m.CreateMIGDevice(ctx, 0, mig.Device{Profile: "1g.20gb", Start: 4})
	orphan := false
	for _, gi := range sim.Snapshot().GPUs[0].GPUInstances {
		orphan = orphan || len(gi.ComputeInstances) == 0
	}
	if err == nil {
		t.Fatalf("CreateMIGDevice returned %+v and no error, yet NVML created no compute instance", d)
	}
	if orphan {
		t.Errorf("CreateMIGDevice failed (%v) but left a GI without compute instance", err)
	}
}

// TestRegressionSeedsReplay: each regression seed draws, with the main faults
// there were when it was found, the main fault it found its bug with, whatever
// main faults were added since.
func TestRegressionSeedsReplay(t *testing.T) {
	for _, tc := range regressions {
		sc := NewScenarioOf(tc.seed, tc.mainFaults)
		if len(sc.Faults) == 0 || sc.Faults[0].Kind != tc.fault {
			t.Errorf("seed %d with %d main faults: %s, want main fault %s", tc.seed, tc.mainFaults, sc.Describe(), tc.fault)
		}
	}
}
