package plugin

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"
	cdispec "tags.cncf.io/container-device-interface/specs-go"

	"github.com/miglayout/miglayout/pkg/slices"
)

const procDevices = `Character devices:
  1 mem
  4 /dev/vc/0
195 nvidia
236 nvidia-caps
237 nvidia-uvm

Block devices:
  8 sd
240 nvidia-caps-block
`

// driverNodes are the driver's own device nodes of devEnv: name → major,
// minor.
var driverNodes = map[string][2]uint32{
	"nvidiactl": {195, 255}, "nvidia0": {195, 0}, "nvidia1": {195, 1}, "nvidia-uvm": {237, 0}, "nvidia-uvm-tools": {237, 1},
}

// devEnv is env with a host /dev (devRoot) holding the driver's nodes and a
// /proc/devices; it skips where this process may not make device nodes
// (mknodOrSkip).
// mknodOrSkip skips t where this process may not make device nodes in
// dir (not root, or no CAP_MKNOD), except as root in CI (CI=true, as
// .ci/run runs): a CI container without CAP_MKNOD would skip every test
// of device nodes, so it fails there.
func mknodOrSkip(t *testing.T, dir string) {
	t.Helper()
	probe := filepath.Join(dir, "probe")
	if err := unix.Mknod(probe, unix.S_IFCHR|0o600, int(unix.Mkdev(1, 3))); err != nil {
		if os.Getenv("CI") == "true" && os.Geteuid() == 0 {
			t.Fatalf("cannot make device nodes here (%v): CI as root must run the device-node tests (give the container CAP_MKNOD)", err)
		}
		t.Skipf("cannot make device nodes here: %v", err)
	}
	_ = os.Remove(probe)
}

func devEnv(t *testing.T) (*env, string) {
	e := newEnv(t)
	devRoot := filepath.Join(t.TempDir(), "dev")
	if err := os.MkdirAll(devRoot, 0o755); err != nil {
		t.Fatal(err)
	}
	mknodOrSkip(t, devRoot)
	// The driver's own nodes, as the driver makes them (the majors of
	// procDevices; nvidia-uvm's are checked, the others' only for being
	// character devices).
	for n, dev := range driverNodes {
		if err := unix.Mknod(filepath.Join(devRoot, n), unix.S_IFCHR|0o666, int(unix.Mkdev(dev[0], dev[1]))); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(e.hostRoot, "proc"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(e.hostRoot, "proc/devices"), []byte(procDevices), 0o444); err != nil {
		t.Fatal(err)
	}
	return e, devRoot
}

func (e *env) pluginWithDev(devRoot string) *Plugin {
	e.t.Helper()
	p, err := New(Config{NodeName: node, GPUs: e.gpus, Locks: e.locks,
		CDIDir: e.cdiDir, CheckpointDir: e.cpDir, HostRoot: e.hostRoot, DevRoot: devRoot})
	if err != nil {
		e.t.Fatal(err)
	}
	return p
}

// capsNodes are the /dev/nvidia-caps nodes the prepared claims' specs name.
func capsNodes(t *testing.T, p *Plugin) []string {
	t.Helper()
	var out []string
	for _, c := range p.claims {
		for _, d := range c.Devices {
			for _, n := range d.DeviceNodes {
				if strings.HasPrefix(n, "/dev/nvidia-caps/") {
					out = append(out, n)
				}
			}
		}
	}
	return out
}

// checkCapsNode: the node is a character device of the nvidia-caps major
// (236 in procDevices) with the minor its name carries and the mode the
// capability file gives (292: 0444).
func checkCapsNode(t *testing.T, devRoot, n string) {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Lstat(hostDevPath(devRoot, n), &st); err != nil {
		t.Errorf("%s: %v", n, err)
		return
	}
	minor, _ := strconv.Atoi(strings.TrimPrefix(n, "/dev/nvidia-caps/nvidia-cap"))
	if st.Mode&unix.S_IFMT != unix.S_IFCHR || unix.Major(uint64(st.Rdev)) != 236 || unix.Minor(uint64(st.Rdev)) != uint32(minor) || st.Mode&0o777 != 0o444 {
		t.Errorf("%s: mode %o, device %d:%d; want a character device 236:%d, mode 0444",
			n, st.Mode, unix.Major(uint64(st.Rdev)), unix.Minor(uint64(st.Rdev)), minor)
	}
}

// TestPrepareCreatesCapabilityNodes: preparing a MIG device creates its
// missing /dev/nvidia-caps nodes as nvidia-modprobe would, leaves an
// existing one alone, and creates them again when they went (a reboot: /dev
// is a tmpfs) and the kubelet asks again. A node of another device number
// (left from before a driver reload, which may change the nvidia-caps
// major) is made again and one of another mode chmodded, as nvidia-modprobe
// does: a stale node would not grant the MIG device's capability.
func TestPrepareCreatesCapabilityNodes(t *testing.T) {
	e, devRoot := devEnv(t)
	p := e.pluginWithDev(devRoot)
	c := claim(uid1, "infer", alloc{"mig", slices.DefaultDriverName, node, "gpu-0-mig-1g10gb-19-2"})
	if r := e.prepare(p, c); r.Err != nil {
		t.Fatal(r.Err)
	}
	nodes := capsNodes(t, p)
	if len(nodes) != 2 {
		t.Fatalf("the spec names caps nodes %v, want the GI's and the CI's", nodes)
	}
	for _, n := range nodes {
		checkCapsNode(t, devRoot, n)
	}
	for _, n := range nodes {
		if err := os.Remove(hostDevPath(devRoot, n)); err != nil {
			t.Fatal(err)
		}
	}
	if r := e.prepare(e.pluginWithDev(devRoot), c); r.Err != nil {
		t.Fatal(r.Err)
	}
	for _, n := range nodes {
		checkCapsNode(t, devRoot, n)
	}

	// The driver reloaded with major 236 where it had 235: the GI's node
	// is of the old major, the CI's of the right one but mode 0600.
	for i, n := range nodes {
		path := hostDevPath(devRoot, n)
		if err := os.Remove(path); err != nil {
			t.Fatal(err)
		}
		minor, _ := strconv.Atoi(strings.TrimPrefix(n, "/dev/nvidia-caps/nvidia-cap"))
		major, mode := uint32(235), uint32(0o444)
		if i == 1 {
			major, mode = 236, 0o600
		}
		if err := unix.Mknod(path, unix.S_IFCHR|mode, int(unix.Mkdev(major, uint32(minor)))); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(path, os.FileMode(mode)); err != nil {
			t.Fatal(err)
		}
	}
	if r := e.prepare(e.pluginWithDev(devRoot), c); r.Err != nil {
		t.Fatal(r.Err)
	}
	for _, n := range nodes {
		checkCapsNode(t, devRoot, n)
	}
}

// TestPrepareWithoutDeviceNodes: a node the driver installation must make
// that is missing, a file in the way of a caps node, or a driver without
// the nvidia-caps major fail the prepare with an error naming it, and the
// claim is not prepared (the kubelet retries).
func TestPrepareWithoutDeviceNodes(t *testing.T) {
	for name, tc := range map[string]struct {
		// setup breaks the host; caps are the caps nodes the claim's
		// spec names.
		setup func(t *testing.T, devRoot, hostRoot string, caps []string)
		want  string
	}{
		"nvidia-uvm not loaded": {func(t *testing.T, devRoot, hostRoot string, _ []string) {
			for _, n := range []string{"nvidia-uvm", "nvidia-uvm-tools"} {
				if err := os.Remove(filepath.Join(devRoot, n)); err != nil {
					t.Fatal(err)
				}
			}
			writeParams(t, hostRoot, 1)
			if err := os.WriteFile(filepath.Join(hostRoot, "proc/devices"), []byte(strings.ReplaceAll(procDevices, "237 nvidia-uvm\n", "")), 0o444); err != nil {
				t.Fatal(err)
			}
		}, "device nodes /dev/nvidia-uvm of gpu-0-mig-1g10gb-19-2 do not exist on the host"},
		"nvidia-uvm nodes the host keeps": {func(t *testing.T, devRoot, hostRoot string, _ []string) {
			for _, n := range []string{"nvidia-uvm", "nvidia-uvm-tools"} {
				if err := os.Remove(filepath.Join(devRoot, n)); err != nil {
					t.Fatal(err)
				}
			}
			writeParams(t, hostRoot, 0)
		}, "device nodes /dev/nvidia-uvm of gpu-0-mig-1g10gb-19-2 do not exist on the host"},
		"a file where a caps node goes": {func(t *testing.T, devRoot, _ string, caps []string) {
			if err := os.MkdirAll(filepath.Join(devRoot, "nvidia-caps"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(hostDevPath(devRoot, caps[0]), nil, 0o444); err != nil {
				t.Fatal(err)
			}
		}, "is not a character device"},
		"a GPU node that is a symbolic link": {func(t *testing.T, devRoot, _ string, _ []string) {
			path := filepath.Join(devRoot, "nvidia0")
			if err := os.Rename(path, filepath.Join(devRoot, "nvidia0-node")); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink("nvidia0-node", path); err != nil {
				t.Fatal(err)
			}
		}, "device nodes /dev/nvidia0 of gpu-0-mig-1g10gb-19-2 do not exist on the host: the NVIDIA driver installation creates them (nvidia-modprobe, or nvidia-ctk system create-device-nodes --control-devices; nvidia-uvm needs its kernel module loaded); /dev/nvidia0 in the host's /dev is not a character device"},
		"an empty file in place of the control node": {func(t *testing.T, devRoot, _ string, _ []string) {
			path := filepath.Join(devRoot, "nvidiactl")
			if err := os.Remove(path); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}, "device nodes /dev/nvidiactl of"},
		"a caps node the host keeps that is an empty file": {func(t *testing.T, devRoot, hostRoot string, caps []string) {
			// Every capability file says the host keeps its device files.
			driverKeepsDeviceFiles(t, hostRoot)
			if err := os.MkdirAll(filepath.Join(devRoot, "nvidia-caps"), 0o755); err != nil {
				t.Fatal(err)
			}
			for _, n := range caps {
				if err := os.WriteFile(hostDevPath(devRoot, n), nil, 0o444); err != nil {
					t.Fatal(err)
				}
			}
		}, "exists and is not a character device, and the NVIDIA driver leaves its device files to the host"},
		"no nvidia-caps major": {func(t *testing.T, _, hostRoot string, _ []string) {
			if err := os.WriteFile(filepath.Join(hostRoot, "proc/devices"), []byte("Character devices:\n195 nvidia\n\nBlock devices:\n236 nvidia-caps\n"), 0o444); err != nil {
				t.Fatal(err)
			}
		}, "lists no character device nvidia-caps"},
	} {
		t.Run(name, func(t *testing.T) {
			e, devRoot := devEnv(t)
			c := claim(uid1, "infer", alloc{"mig", slices.DefaultDriverName, node, "gpu-0-mig-1g10gb-19-2"})
			// The caps nodes the spec names, from a prepare that
			// looks at no device node.
			plain := e.pluginWithDev("")
			if r := e.prepare(plain, c); r.Err != nil {
				t.Fatal(r.Err)
			}
			caps := capsNodes(t, plain)
			if err := e.unprepare(plain, c); err != nil {
				t.Fatal(err)
			}
			tc.setup(t, devRoot, e.hostRoot, caps)
			p := e.pluginWithDev(devRoot)
			r := e.prepare(p, c)
			if r.Err == nil || !strings.Contains(r.Err.Error(), tc.want) {
				t.Fatalf("prepare = %v, want an error saying %q", r.Err, tc.want)
			}
			if got := p.PreparedDevices(); len(got) != 0 {
				t.Errorf("a failed prepare left %v prepared", got)
			}
		})
	}
}

// TestPrepareWithoutUVMTools: a host without /dev/nvidia-uvm-tools (nvidia-uvm
// loaded by hand, not by nvidia-modprobe) prepares claims with specs that do
// not name it, as the NVIDIA container toolkit's do (a runtime refuses a CDI
// device node that is missing); once it exists, the next prepare of the
// claim writes the spec again with it.
func TestPrepareWithoutUVMTools(t *testing.T) {
	e, devRoot := devEnv(t)
	tools := filepath.Join(devRoot, "nvidia-uvm-tools")
	if err := os.Remove(tools); err != nil {
		t.Fatal(err)
	}
	c := claim(uid1, "infer", alloc{"mig", slices.DefaultDriverName, node, "gpu-0-mig-1g10gb-19-2"})
	names := func() []string { return claimWideNodes(t, e) }
	p := e.pluginWithDev(devRoot)
	if r := e.prepare(p, c); r.Err != nil {
		t.Fatal(r.Err)
	}
	if diff := cmp.Diff([]string{"/dev/nvidiactl", "/dev/nvidia-uvm"}, names()); diff != "" {
		t.Errorf("claim-wide device nodes without nvidia-uvm-tools (-want +got):\n%s", diff)
	}
	// A file that is no device node does not count.
	if err := os.WriteFile(tools, nil, 0o666); err != nil {
		t.Fatal(err)
	}
	if r := e.prepare(p, c); r.Err != nil {
		t.Fatal(r.Err)
	}
	if diff := cmp.Diff([]string{"/dev/nvidiactl", "/dev/nvidia-uvm"}, names()); diff != "" {
		t.Errorf("claim-wide device nodes with an empty file at nvidia-uvm-tools (-want +got):\n%s", diff)
	}
	if err := os.Remove(tools); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mknod(tools, unix.S_IFCHR|0o666, int(unix.Mkdev(237, 1))); err != nil {
		t.Fatal(err)
	}
	if r := e.prepare(p, c); r.Err != nil {
		t.Fatal(r.Err)
	}
	if diff := cmp.Diff([]string{"/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools"}, names()); diff != "" {
		t.Errorf("claim-wide device nodes once nvidia-uvm-tools exists (-want +got):\n%s", diff)
	}
}

// TestPrepareWithoutDevRoot: with no DevRoot (simulated GPUs) no device
// node is looked at.
func TestPrepareWithoutDevRoot(t *testing.T) {
	e := newEnv(t)
	if r := e.prepare(e.pluginWithDev(""), claim(uid1, "infer", alloc{"mig", slices.DefaultDriverName, node, "gpu-0-mig-1g10gb-19-2"})); r.Err != nil {
		t.Fatal(r.Err)
	}
}

func TestCharMajor(t *testing.T) {
	path := filepath.Join(t.TempDir(), "devices")
	if err := os.WriteFile(path, []byte(procDevices), 0o444); err != nil {
		t.Fatal(err)
	}
	for driver, want := range map[string]uint32{"nvidia-caps": 236, "nvidia-uvm": 237, "nvidia": 195} {
		if got, err := charMajor(path, driver); err != nil || got != want {
			t.Errorf("charMajor(%s) = %d, %v; want %d", driver, got, err, want)
		}
	}
	// A driver whose name starts with another's is not that one
	// (nvidia-caps-imex-channels, listed first, is not nvidia-caps).
	imex := filepath.Join(t.TempDir(), "devices")
	if err := os.WriteFile(imex, []byte(strings.Replace(procDevices, "236 nvidia-caps\n", "234 nvidia-caps-imex-channels\n236 nvidia-caps\n", 1)), 0o444); err != nil {
		t.Fatal(err)
	}
	if got, err := charMajor(imex, "nvidia-caps"); err != nil || got != 236 {
		t.Errorf("charMajor(nvidia-caps) after nvidia-caps-imex-channels = %d, %v; want 236", got, err)
	}
	// Block devices do not count.
	if _, err := charMajor(path, "nvidia-caps-block"); err == nil {
		t.Error("charMajor found a block device")
	}
	if _, err := charMajor(filepath.Join(t.TempDir(), "none"), "nvidia-caps"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("charMajor of a missing file = %v, want ErrNotExist", err)
	}
}

func TestReadCapabilityMode(t *testing.T) {
	path := filepath.Join(t.TempDir(), "access")
	for content, want := range map[string]capability{
		"DeviceFileMinor: 12\nDeviceFileMode: 292\nDeviceFileModify: 1\n": {minor: 12, mode: 0o444},
		"DeviceFileMinor: 13\nDeviceFileMode: 438\n":                      {minor: 13, mode: 0o666},
		"DeviceFileMinor: 14\n":                                           {minor: 14, mode: 0o444},
		"DeviceFileMinor: 15\nDeviceFileMode: 256\nDeviceFileModify: 0\n": {minor: 15, mode: 0o400, keep: true},
	} {
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		if got, err := readCapability(path); err != nil || got != want {
			t.Errorf("readCapability(%q) = %+v, %v; want %+v", content, got, err, want)
		}
	}
	if err := os.WriteFile(path, []byte("DeviceFileMinor: 12\nDeviceFileMode: 4095\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := readCapability(path); err == nil {
		t.Error("readCapability accepted mode 4095 (07777)")
	}
}

// writeParams writes the NVIDIA driver's params file under hostRoot with
// ModifyDeviceFiles modify, device files root:44, mode 0660.
func writeParams(t *testing.T, hostRoot string, modify int) {
	t.Helper()
	dir := filepath.Join(hostRoot, "proc/driver/nvidia")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	params := fmt.Sprintf("ResmanDebugLevel: 4294967295\nDeviceFileUID: 0\nDeviceFileGID: 44\nDeviceFileMode: 432\nModifyDeviceFiles: %d\n", modify)
	if err := os.WriteFile(filepath.Join(dir, "params"), []byte(params), 0o444); err != nil {
		t.Fatal(err)
	}
}

// TestPrepareMakesUVMNodes: with nvidia-uvm loaded (its major, 237, in
// /proc/devices) but /dev/nvidia-uvm and /dev/nvidia-uvm-tools missing (no
// nvidia-modprobe or udev rule made them: they appear once a CUDA program
// runs, after the prepare that needs them), the prepare makes both as
// nvidia-modprobe -u -c=0 does, with the owner and mode the driver's
// params give, and the spec names both.
func TestPrepareMakesUVMNodes(t *testing.T) {
	e, devRoot := devEnv(t)
	for _, n := range []string{"nvidia-uvm", "nvidia-uvm-tools"} {
		if err := os.Remove(filepath.Join(devRoot, n)); err != nil {
			t.Fatal(err)
		}
	}
	writeParams(t, e.hostRoot, 1)
	p := e.pluginWithDev(devRoot)
	c := claim(uid1, "infer", alloc{"mig", slices.DefaultDriverName, node, "gpu-0-mig-1g10gb-19-2"})
	if r := e.prepare(p, c); r.Err != nil {
		t.Fatal(r.Err)
	}
	for n, minor := range map[string]uint32{"nvidia-uvm": 0, "nvidia-uvm-tools": 1} {
		var st unix.Stat_t
		if err := unix.Lstat(filepath.Join(devRoot, n), &st); err != nil {
			t.Errorf("%s: %v", n, err)
			continue
		}
		if st.Mode&unix.S_IFMT != unix.S_IFCHR || unix.Major(uint64(st.Rdev)) != 237 || unix.Minor(uint64(st.Rdev)) != minor || st.Mode&0o777 != 0o660 || st.Gid != 44 {
			t.Errorf("%s: mode %o, device %d:%d, group %d; want a character device 237:%d, mode 0660, group 44",
				n, st.Mode, unix.Major(uint64(st.Rdev)), unix.Minor(uint64(st.Rdev)), st.Gid, minor)
		}
	}
	if diff := cmp.Diff([]string{"/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools"}, claimWideNodes(t, e)); diff != "" {
		t.Errorf("claim-wide device nodes (-want +got):\n%s", diff)
	}
}

// TestPrepareMakesStaleUVMNodeAgain: a /dev/nvidia-uvm of another major
// (left from before nvidia-uvm was loaded again, which may change its
// major) is made again as nvidia-modprobe would: a container given it
// would open another device.
func TestPrepareMakesStaleUVMNodeAgain(t *testing.T) {
	e, devRoot, path := staleUVMEnv(t)
	tools := filepath.Join(devRoot, "nvidia-uvm-tools")
	if err := os.Remove(tools); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(tools, nil, 0o666); err != nil {
		t.Fatal(err)
	}
	p := e.pluginWithDev(devRoot)
	c := claim(uid1, "infer", alloc{"mig", slices.DefaultDriverName, node, "gpu-0-mig-1g10gb-19-2"})
	if r := e.prepare(p, c); r.Err != nil {
		t.Fatal(r.Err)
	}
	var st unix.Stat_t
	if err := unix.Lstat(path, &st); err != nil {
		t.Fatal(err)
	}
	if unix.Major(uint64(st.Rdev)) != 237 || unix.Minor(uint64(st.Rdev)) != 0 {
		t.Errorf("/dev/nvidia-uvm is %d:%d, want 237:0 (nvidia-uvm's major in /proc/devices)", unix.Major(uint64(st.Rdev)), unix.Minor(uint64(st.Rdev)))
	}
	// /dev/nvidia-uvm-tools, a regular file here (no device of another
	// number: something else put it there), is left alone.
	if fi, err := os.Lstat(filepath.Join(devRoot, "nvidia-uvm-tools")); err != nil || !fi.Mode().IsRegular() {
		t.Errorf("/dev/nvidia-uvm-tools, a regular file, is now %v (%v); want it left alone", fi.Mode(), err)
	}
}

// claimWideNodes are the device nodes the CDI spec of claim uid1 gives all
// the claim's containers.
func claimWideNodes(t *testing.T, e *env) []string {
	t.Helper()
	var spec cdispec.Spec
	if err := json.Unmarshal(mustRead(t, filepath.Join(e.cdiDir, specName(slices.DefaultDriverName, uid1))), &spec); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, n := range spec.ContainerEdits.DeviceNodes {
		out = append(out, n.Path)
	}
	return out
}

// fsImmutableFL is FS_IMMUTABLE_FL of linux/fs.h, which x/sys/unix lacks.
const fsImmutableFL = 0x10

// setImmutable sets or clears the immutable attribute of dir (chattr +i),
// so that no entry of it can be made or removed, even by root; it skips
// where the file system or the process may not.
func setImmutable(t *testing.T, dir string, on bool) {
	t.Helper()
	f, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	flags, err := unix.IoctlGetInt(int(f.Fd()), unix.FS_IOC_GETFLAGS)
	if err == nil {
		if on {
			flags |= fsImmutableFL
		} else {
			flags &^= fsImmutableFL
		}
		err = unix.IoctlSetPointerInt(int(f.Fd()), unix.FS_IOC_SETFLAGS, flags)
	}
	if err != nil {
		if on {
			t.Skipf("cannot make %s immutable here: %v", dir, err)
		}
		t.Errorf("clearing the immutable attribute of %s: %v", dir, err)
	}
}

// TestPrepareWithAStaleUVMNodeThatStays: a /dev/nvidia-uvm of another major
// that cannot be made again (its removal fails) fails the prepare, naming
// the cause, rather than hand the container a node of another device.
func TestPrepareWithAStaleUVMNodeThatStays(t *testing.T) {
	e, devRoot, _ := staleUVMEnv(t)
	setImmutable(t, devRoot, true)
	t.Cleanup(func() { setImmutable(t, devRoot, false) })
	p := e.pluginWithDev(devRoot)
	r := e.prepare(p, claim(uid1, "whole", alloc{"gpu", slices.DefaultDriverName, node, "gpu-1"}))
	if r.Err == nil || !strings.Contains(r.Err.Error(), "removing /dev/nvidia-uvm") {
		t.Fatalf("prepare with a stale /dev/nvidia-uvm that cannot be removed = %v, want an error saying so", r.Err)
	}
	if got := p.PreparedDevices(); len(got) != 0 {
		t.Errorf("a failed prepare left %v prepared", got)
	}
}

// TestReadDeviceFileParams: the NVIDIA driver's device file settings, with
// its defaults (modify, root:root, 0666) for those the file lacks, and the
// mode reduced to its permission bits.
func TestReadDeviceFileParams(t *testing.T) {
	for name, tc := range map[string]struct {
		params string
		want   deviceFileParams
	}{
		"all given": {"DeviceFileUID: 0\nDeviceFileGID: 44\nDeviceFileMode: 432\nModifyDeviceFiles: 0\n",
			deviceFileParams{modify: false, uid: 0, gid: 44, mode: 0o660}},
		"none given":                  {"ResmanDebugLevel: 4294967295\n", deviceFileParams{modify: true, mode: 0o666}},
		"mode with setuid and sticky": {"DeviceFileMode: 3510\n", deviceFileParams{modify: true, mode: 0o666}},
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "params")
			if err := os.WriteFile(path, []byte(tc.params), 0o444); err != nil {
				t.Fatal(err)
			}
			got, err := readDeviceFileParams(path)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(deviceFileParams{})); diff != "" {
				t.Errorf("params (-want +got):\n%s", diff)
			}
		})
	}
}

// staleUVMEnv is devEnv with /dev/nvidia-uvm (its path returned) of major
// 240, another than the loaded module's, and the driver's params asking
// for device files to be made.
func staleUVMEnv(t *testing.T) (*env, string, string) {
	t.Helper()
	e, devRoot := devEnv(t)
	path := filepath.Join(devRoot, "nvidia-uvm")
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mknod(path, unix.S_IFCHR|0o666, int(unix.Mkdev(240, 0))); err != nil {
		t.Fatal(err)
	}
	writeParams(t, e.hostRoot, 1)
	return e, devRoot, path
}

// driverKeepsDeviceFiles makes every MIG capability file under hostRoot's
// /proc/driver/nvidia/capabilities say that the driver leaves its device
// files to the host (DeviceFileModify: 0).
func driverKeepsDeviceFiles(t *testing.T, hostRoot string) {
	t.Helper()
	err := filepath.WalkDir(filepath.Join(hostRoot, "proc/driver/nvidia/capabilities"), func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() != "access" {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(path, []byte(strings.ReplaceAll(string(b), "DeviceFileModify: 1", "DeviceFileModify: 0")), 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}
