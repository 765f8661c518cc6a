package plugin

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/miglayout/miglayout/pkg/mig/gpu"
	"github.com/miglayout/miglayout/pkg/mig/gpu/gputest"
	"github.com/miglayout/miglayout/pkg/slices"
)

// TestRealDeviceNodes runs on a machine with an NVIDIA GPU and driver when
// gputest.HardwareEnv (MIGLAYOUT_NVML_HARDWARE) is 1 (skipped otherwise), from a process that sees
// the host's / and /dev (NVIDIA_DRIVER_ROOT as in pkg/mig/gpu's
// TestRealNVML). It changes nothing: it reads what the plugin reads of the
// host (/proc/devices, the driver's params and MIG capability files) and
// checks that the device nodes a whole GPU's CDI spec names exist as
// character devices of the driver's majors and minors, and that the MIG
// management capabilities' /dev/nvidia-caps nodes, where present, have the
// device number and mode their capability files give, which is what
// ensureDeviceNodes and EnsureMIGManagementNodes leave alone (neither is
// called: each may make or fix a node).
func TestRealDeviceNodes(t *testing.T) {
	root := gputest.Hardware(t)
	const hostRoot, devRoot = "/", "/dev"
	procDevices := filepath.Join(hostRoot, "proc/devices")
	m, err := gpu.OpenAt(t.Context(), root)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Shutdown()
	gpus, err := m.GPUs(t.Context())
	if err != nil {
		t.Fatalf("listing GPUs: %v", err)
	}
	params, err := readDeviceFileParams(filepath.Join(hostRoot, "proc/driver/nvidia/params"))
	t.Logf("driver device file settings: %+v (%v)", params, err)

	// charDevice checks that path is the character device major:minor of
	// the named driver in /proc/devices.
	charDevice := func(path, driver string, minor uint32) (unix.Stat_t, bool) {
		t.Helper()
		major, err := charMajor(procDevices, driver)
		if err != nil {
			t.Errorf("%s: %v", path, err)
			return unix.Stat_t{}, false
		}
		var st unix.Stat_t
		if err := unix.Stat(hostDevPath(devRoot, path), &st); err != nil {
			t.Errorf("%s: %v", path, err)
			return st, false
		}
		if st.Mode&unix.S_IFMT != unix.S_IFCHR || st.Rdev != unix.Mkdev(major, minor) {
			t.Errorf("%s is %d:%d (mode %o), want the character device %d:%d of %s", path,
				unix.Major(st.Rdev), unix.Minor(st.Rdev), st.Mode, major, minor, driver)
			return st, false
		}
		return st, true
	}

	charDevice("/dev/nvidiactl", "nvidiactl", 255)
	for _, n := range uvmNodes {
		if n.path == "/dev/nvidia-uvm-tools" {
			if _, err := os.Stat(hostDevPath(devRoot, n.path)); err != nil {
				t.Logf("%s: %v (optional: a spec names it only where it exists)", n.path, err)
				continue
			}
		}
		charDevice(n.path, uvmDriver, n.minor)
	}
	for _, g := range gpus {
		nodes, err := ownDeviceNodes(hostRoot, slices.Source{Name: slices.GPUDeviceName(g.Index), GPU: g})
		if err != nil {
			t.Errorf("GPU %d: %v", g.Index, err)
			continue
		}
		for _, n := range nodes {
			if !strings.HasPrefix(n, "/dev/nvidia-caps/") {
				charDevice(n, "nvidia", uint32(g.Minor))
			}
		}
		t.Logf("GPU %d (%s, minor %d): device nodes %v", g.Index, g.ProductName, g.Minor, nodes)
	}
	for _, name := range migManagementCapabilities {
		path := filepath.Join(hostRoot, "proc/driver/nvidia/capabilities", name)
		c, err := readCapability(path)
		if err != nil {
			t.Errorf("MIG capability %s: %v", name, err)
			continue
		}
		node := "/dev/nvidia-caps/nvidia-cap" + strconv.Itoa(c.minor)
		if _, err := os.Stat(hostDevPath(devRoot, node)); os.IsNotExist(err) {
			t.Logf("MIG capability %s (%+v): %s does not exist; the agent makes it", name, c, node)
			continue
		}
		st, ok := charDevice(node, capsDriver, uint32(c.minor))
		if ok && os.FileMode(st.Mode).Perm() != c.mode.Perm() {
			t.Errorf("%s has mode %v, its capability file %v", node, os.FileMode(st.Mode).Perm(), c.mode.Perm())
		}
		t.Logf("MIG capability %s: %+v at %s", name, c, node)
	}
}
