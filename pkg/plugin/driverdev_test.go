package plugin

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	cdiapi "tags.cncf.io/container-device-interface/pkg/cdi"
	cdispec "tags.cncf.io/container-device-interface/specs-go"

	"github.com/miglayout/miglayout/pkg/slices"
)

// hostDriverDev is the device directory of the GPU Operator's
// containerised driver on the host.
const hostDriverDev = "/run/nvidia/driver/dev"

// driverDevEnv is devEnv where the driver's own nodes (nvidiactl, the GPUs'
// nodes, nvidia-uvm-tools) are in the device directory of a driver
// installed in a container (returned), not in the host's /dev, as the GPU
// Operator's driver leaves them; nvidia-uvm stays in the host's /dev.
func driverDevEnv(t *testing.T) (e *env, devRoot, driverDev string) {
	e, devRoot = devEnv(t)
	driverDev = filepath.Join(t.TempDir(), "driver-root", "dev")
	if err := os.MkdirAll(driverDev, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"nvidiactl", "nvidia-uvm-tools", "nvidia0", "nvidia1"} {
		if err := os.Rename(filepath.Join(devRoot, n), filepath.Join(driverDev, n)); err != nil {
			t.Fatal(err)
		}
	}
	return e, devRoot, driverDev
}

// specNodes are the device nodes of claim uid1's CDI spec, claim-wide and
// of every device, by path: their host paths ("" where it is the path).
func specNodes(t *testing.T, e *env) map[string]string {
	t.Helper()
	var spec cdispec.Spec
	if err := json.Unmarshal(mustRead(t, filepath.Join(e.cdiDir, specName(slices.DefaultDriverName, uid1))), &spec); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	add := func(nodes []*cdispec.DeviceNode) {
		for _, n := range nodes {
			out[n.Path] = n.HostPath
		}
	}
	add(spec.ContainerEdits.DeviceNodes)
	for _, d := range spec.Devices {
		add(d.ContainerEdits.DeviceNodes)
	}
	return out
}

// TestPrepareWithContainerisedDriver: where the driver's device nodes are
// in its own device directory and not in the host's /dev (the GPU
// Operator's driver container), a prepare finds them there and its CDI
// spec gives their host paths, which the container runtime reads the
// device numbers from; nodes only the host's /dev has (nvidia-uvm, the MIG
// capability nodes the prepare makes there) keep their own path. Without
// the driver's directory, the prepare fails naming the missing nodes.
func TestPrepareWithContainerisedDriver(t *testing.T) {
	e, devRoot, driverDev := driverDevEnv(t)
	c := claim(uid1, "infer", alloc{"mig", slices.DefaultDriverName, node, "gpu-0-mig-1g10gb-19-2"})

	if r := e.prepare(e.pluginWithDev(devRoot), c); r.Err == nil || !strings.Contains(r.Err.Error(), "/dev/nvidiactl") {
		t.Fatalf("prepare without the driver's device directory = %v, want an error naming /dev/nvidiactl", r.Err)
	}

	p, err := New(Config{NodeName: node, GPUs: e.gpus, Locks: e.locks, CDIDir: e.cdiDir, CheckpointDir: e.cpDir,
		HostRoot: e.hostRoot, DevRoot: devRoot, DriverDevRoot: driverDev, HostDriverDevRoot: hostDriverDev})
	if err != nil {
		t.Fatal(err)
	}
	if r := e.prepare(p, c); r.Err != nil {
		t.Fatal(r.Err)
	}
	want := map[string]string{
		"/dev/nvidiactl":        hostDriverDev + "/nvidiactl",
		"/dev/nvidia-uvm":       "",
		"/dev/nvidia-uvm-tools": hostDriverDev + "/nvidia-uvm-tools",
		"/dev/nvidia0":          hostDriverDev + "/nvidia0",
	}
	for _, n := range capsNodes(t, p) {
		want[n] = ""
		checkCapsNode(t, devRoot, n)
	}
	if diff := cmp.Diff(want, specNodes(t, e)); diff != "" {
		t.Errorf("device nodes of the spec, path: host path (-want +got):\n%s", diff)
	}
	if !p.specOnDisk(p.claims[uid1]) {
		t.Error("the spec just written is not taken for current: every prepare would write it again")
	}
	cache, err := cdiapi.NewCache(cdiapi.WithSpecDirs(e.cdiDir), cdiapi.WithAutoRefresh(false))
	if err != nil {
		t.Fatal(err)
	}
	if errs := cache.GetErrors(); len(errs) > 0 {
		t.Errorf("the CDI library refuses the spec: %v", errs)
	}

	// The driver's directory goes first: an empty file of a node's name in
	// the host's /dev (the NVIDIA container runtime's legacy mode leaves
	// one where it mounts the node into a container that mounts the host's
	// /dev) is not taken for it. A node only the host's /dev has is.
	if err := os.WriteFile(filepath.Join(devRoot, "nvidiactl"), nil, 0o666); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(driverDev, "nvidia0"), filepath.Join(devRoot, "nvidia0")); err != nil {
		t.Fatal(err)
	}
	if r := e.prepare(p, c); r.Err != nil {
		t.Fatal(r.Err)
	}
	got := specNodes(t, e)
	if got["/dev/nvidiactl"] != hostDriverDev+"/nvidiactl" || got["/dev/nvidia0"] != "" {
		t.Errorf("host paths of /dev/nvidiactl %q and /dev/nvidia0 %q; want the driver's %s/nvidiactl and none (the host's /dev has only nvidia0)",
			got["/dev/nvidiactl"], got["/dev/nvidia0"], hostDriverDev)
	}
}
