package plugin

import (
	"errors"
	"testing"

	"github.com/miglayout/miglayout/pkg/mig"
	"github.com/miglayout/miglayout/pkg/slices"
)

// TestReprepareGoneDeviceKeepsPreparation: after a reboot (MIG devices gone,
// checkpoint kept) a claim of two MIG devices is asked for again while the
// agent has created only the first of them again. The prepare fails with
// ErrDeviceGone and, as TestPrepareAfterReboot requires for one device,
// keeps the claim's preparation (its devices stay protected), whichever of
// the two comes first in the allocation.
func TestReprepareGoneDeviceKeepsPreparation(t *testing.T) {
	e := newEnv(t)
	const first, second = "gpu-0-mig-1g10gb-19-2", "gpu-0-mig-1g10gb-19-3"
	c := claim(uid1, "pair",
		alloc{"pair", slices.DefaultDriverName, node, first},
		alloc{"pair", slices.DefaultDriverName, node, second})
	if r := e.prepare(e.plugin(""), c); r.Err != nil {
		t.Fatal(r.Err)
	}
	// The reboot: both MIG devices are gone.
	for _, start := range []int{2, 3} {
		if err := e.gpus.DestroyMIGDevice(e.ctx, 0, mig.Device{Profile: "1g.10gb", Start: start}); err != nil {
			t.Fatal(err)
		}
	}
	p := e.plugin("")
	// The agent has created the first one again (new UUID), not yet the second.
	e.createMIG(mig.Device{Profile: "1g.10gb", Start: 2})
	r := e.prepare(p, c)
	if !errors.Is(r.Err, ErrDeviceGone) {
		t.Fatalf("prepare with %s not created again = %v, want ErrDeviceGone", second, r.Err)
	}
	got := p.PreparedDevices()
	for _, d := range []string{first, second} {
		if _, ok := got[d]; !ok {
			t.Errorf("the failed prepare dropped the claim's preparation of %s: PreparedDevices = %v", d, got)
		}
	}
	if got := e.plugin("").PreparedDevices(); len(got) != 2 {
		t.Errorf("checkpoint after the failed prepare holds %v, want both devices", got)
	}
}

// TestCheckpointNotDurable: when the checkpoint's directory cannot be synced
// after the rename (the file holds the new claims, a power loss may undo
// them), prepare and unprepare still succeed and memory follows the file,
// so a restarted plugin and this one agree on what is prepared, and an
// unprepare removes the claim from both.
func TestCheckpointNotDurable(t *testing.T) {
	e := newEnv(t)
	restore := syncDir
	syncDir = func(string) error { return errors.New("input/output error") }
	t.Cleanup(func() { syncDir = restore })

	const dev = "gpu-0-mig-1g10gb-19-2"
	c := claim(uid1, "infer", alloc{"mig", slices.DefaultDriverName, node, dev})
	p := e.plugin("")
	if r := e.prepare(p, c); r.Err != nil {
		t.Fatalf("prepare with the directory sync failing = %v, want success (the checkpoint holds the claim)", r.Err)
	}
	if _, ok := p.PreparedDevices()[dev]; !ok {
		t.Errorf("plugin forgot the prepared claim: %v", p.PreparedDevices())
	}
	if _, ok := e.plugin("").PreparedDevices()[dev]; !ok {
		t.Errorf("checkpoint lacks the prepared claim")
	}
	if err := e.unprepare(p, c); err != nil {
		t.Fatalf("unprepare with the directory sync failing = %v, want success", err)
	}
	if got := p.PreparedDevices(); len(got) != 0 {
		t.Errorf("plugin still holds %v after unprepare", got)
	}
	if got := e.plugin("").PreparedDevices(); len(got) != 0 {
		t.Errorf("checkpoint still holds %v after unprepare", got)
	}
}
