package plugin

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/miglayout/miglayout/pkg/slices"
)

// TestPrepareAgainChecksDeviceNodes: the kubelet's repeated prepare of a
// prepared claim (after a reboot, /dev being a tmpfs) checks the device
// nodes its spec names, as the first prepare does: one missing on the host
// fails the prepare, naming it, rather than handing the kubelet a spec a
// container cannot start with; the preparation stays.
func TestPrepareAgainChecksDeviceNodes(t *testing.T) {
	e, devRoot := devEnv(t)
	p := e.pluginWithDev(devRoot)
	const dev = "gpu-0-mig-1g10gb-19-2"
	c := claim(uid1, "infer", alloc{"mig", slices.DefaultDriverName, node, dev})
	if r := e.prepare(p, c); r.Err != nil {
		t.Fatal(r.Err)
	}
	if err := os.Remove(filepath.Join(devRoot, "nvidiactl")); err != nil {
		t.Fatal(err)
	}
	r := e.prepare(p, c)
	if r.Err == nil || !strings.Contains(r.Err.Error(), "/dev/nvidiactl") {
		t.Fatalf("prepare again with /dev/nvidiactl missing: %v (devices %+v), want an error naming /dev/nvidiactl", r.Err, r.Devices)
	}
	if _, ok := p.PreparedDevices()[dev]; !ok {
		t.Errorf("PreparedDevices = %v after the failed prepare, want %s still prepared", p.PreparedDevices(), dev)
	}
}
