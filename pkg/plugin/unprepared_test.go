package plugin

import (
	"testing"

	"github.com/miglayout/miglayout/pkg/slices"
)

// TestOnUnpreparedCalledWhenDevicesReleased: the agent hears of an
// unprepare that released prepared devices (a GPU may have waited for them
// alone), once they are out of PreparedDevices, and only then: not for a
// claim that was never prepared here, nor when asked again.
func TestOnUnpreparedCalledWhenDevicesReleased(t *testing.T) {
	e := newEnv(t)
	var p *Plugin
	var calls, preparedAtCall int
	var err error
	p, err = New(Config{NodeName: node, GPUs: e.gpus, Locks: e.locks, CDIDir: e.cdiDir, CheckpointDir: e.cpDir,
		HostRoot: e.hostRoot, OnUnprepared: func() {
			calls++
			preparedAtCall = len(p.PreparedDevices()) // also shows no lock is held
		}})
	if err != nil {
		t.Fatal(err)
	}
	c := mixedClaim(slices.DefaultDriverName)
	if r := e.prepare(p, c); r.Err != nil {
		t.Fatal(r.Err)
	}
	other := claim(uid2, "never-prepared", alloc{"mig", slices.DefaultDriverName, node, "gpu-0-mig-1g10gb-19-2"})
	if err := e.unprepare(p, other); err != nil {
		t.Fatal(err)
	}
	if calls != 0 {
		t.Errorf("OnUnprepared called %d times for a claim never prepared", calls)
	}
	if err := e.unprepare(p, c); err != nil {
		t.Fatal(err)
	}
	if calls != 1 {
		t.Errorf("OnUnprepared called %d times after a prepared claim was unprepared, want 1", calls)
	}
	if preparedAtCall != 0 {
		t.Errorf("at OnUnprepared %d devices were still prepared, want 0", preparedAtCall)
	}
	if err := e.unprepare(p, c); err != nil {
		t.Fatal(err)
	}
	if calls != 1 {
		t.Errorf("OnUnprepared called again (%d) for a claim unprepared already", calls)
	}
}
