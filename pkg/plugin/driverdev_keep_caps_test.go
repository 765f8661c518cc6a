package plugin

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/miglayout/miglayout/pkg/slices"
)

// TestPrepareWithCapsNodesTheContainerisedDriverKeeps: where the driver
// keeps its device files (DeviceFileModify: 0) and a driver installed in a
// container has the MIG capability nodes in its own device directory only,
// a prepare finds them there (nothing to make in the host's /dev) and its
// CDI spec gives their host paths in that directory.
func TestPrepareWithCapsNodesTheContainerisedDriverKeeps(t *testing.T) {
	e, devRoot, driverDev := driverDevEnv(t)
	p, err := New(Config{NodeName: node, GPUs: e.gpus, Locks: e.locks, CDIDir: e.cdiDir, CheckpointDir: e.cpDir,
		HostRoot: e.hostRoot, DevRoot: devRoot, DriverDevRoot: driverDev, HostDriverDevRoot: hostDriverDev})
	if err != nil {
		t.Fatal(err)
	}
	c := claim(uid1, "infer", alloc{"mig", slices.DefaultDriverName, node, "gpu-0-mig-1g10gb-19-2"})
	// A first prepare makes the caps nodes in the host's /dev; they move to
	// the driver's directory, and the driver now keeps its device files.
	if r := e.prepare(p, c); r.Err != nil {
		t.Fatal(r.Err)
	}
	caps := capsNodes(t, p)
	if err := e.unprepare(p, c); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(devRoot, "nvidia-caps"), filepath.Join(driverDev, "nvidia-caps")); err != nil {
		t.Fatal(err)
	}
	driverKeepsDeviceFiles(t, e.hostRoot)

	if r := e.prepare(p, c); r.Err != nil {
		t.Fatalf("prepare with the caps nodes in the driver's directory: %v", r.Err)
	}
	got, want := map[string]string{}, map[string]string{}
	for _, n := range caps {
		got[n] = specNodes(t, e)[n]
		want[n] = hostDriverDev + strings.TrimPrefix(n, "/dev")
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("host paths of the caps nodes (-want +got):\n%s", diff)
	}
}
