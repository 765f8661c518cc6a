package plugin

import (
	"errors"
	"testing"

	"github.com/miglayout/miglayout/pkg/slices"
)

// TestPrepareIfSupersededWhileProcessesAreListed: a conditional prepare
// (prepareClaimIf with an expected record) of a claim allocated other
// devices than its record holds lists the processes on the record's
// devices first; where the kubelet prepares the claim anew meanwhile, the
// conditional prepare gives up (errSuperseded) and leaves the kubelet's new
// preparation as it is, rather than dropping it as stale.
func TestPrepareIfSupersededWhileProcessesAreListed(t *testing.T) {
	e, p, h, _ := preparedBesideTheKubelet(t)
	expect := p.claims[uid1]
	driver := slices.DefaultDriverName
	moved := claim(uid1, "infer", alloc{"mig", driver, node, "gpu-0-mig-1g10gb-19-2"})
	h.meanwhile = func() {
		if r := e.prepare(p, claim(uid1, "infer", alloc{"whole", driver, node, "gpu-1"})); r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	if _, err := p.prepareClaimIf(e.ctx, moved, &expect); !errors.Is(err, errSuperseded) {
		t.Errorf("conditional prepare of a claim the kubelet prepared anew meanwhile: %v, want %v", err, errSuperseded)
	}
	if h.meanwhile != nil {
		t.Fatal("the kubelet's prepare did not run while the conditional prepare read NVML: the test shows nothing")
	}
	if rec, ok := p.claims[uid1]; !ok || len(rec.Devices) != 1 || rec.Devices[0].Device != "gpu-1" {
		t.Errorf("record %+v (held %t) after the conditional prepare gave up, want the kubelet's preparation of gpu-1", rec.Devices, ok)
	}
	if _, ok := p.PreparedDevices()["gpu-1"]; !ok {
		t.Errorf("PreparedDevices = %v, want gpu-1 protected", p.PreparedDevices())
	}
}
