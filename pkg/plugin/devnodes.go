package plugin

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/miglayout/miglayout/pkg/slices"
)

// capsDriver is the name of the NVIDIA capability devices' character major
// in /proc/devices (dynamic: the kernel gives it when the driver loads).
const capsDriver = "nvidia-caps"

// ensureDeviceNodes makes sure the host has the device nodes a CDI spec of
// device src names, before the spec is handed to the kubelet: the container
// runtime refuses to start a container whose CDI device node is missing, with
// an error far from its cause.
//
// The /dev/nvidia-caps nodes of a MIG device (its GPU instance's and compute
// instance's access capabilities) are created where missing, as
// nvidia-modprobe -f does: a character device of the nvidia-caps major
// (<HostRoot>/proc/devices), with the minor and the mode the driver gives in
// the capability's access file (NVIDIA's MIG User Guide, "Device Nodes and
// Capabilities"); nothing else creates them on a node whose container
// runtime injects devices from CDI specs only. So are /dev/nvidia-uvm and
// /dev/nvidia-uvm-tools where the nvidia-uvm module is loaded
// (ensureUVMNodes). The other nodes (the GPU's /dev/nvidia<minor>,
// /dev/nvidiactl) are the driver installation's to create, with the
// permissions the host configures: one missing is an error saying so, as
// is a missing /dev/nvidia-uvm that could not be made. A missing
// /dev/nvidia-uvm-tools is no error: a spec names it only where it exists
// (optionalControlNodes).
//
// dirs.dev is where the host's /dev is seen by the plugin; a node other than
// the /dev/nvidia-caps ones is looked for in the device directory of a
// driver installed in a container first (dirs.driverDev: the GPU
// Operator's), and counts only as a character device (nodeDirs.locate).
// The /dev/nvidia-caps and Unified Memory nodes are made in the host's
// /dev.
func ensureDeviceNodes(dirs nodeDirs, hostRoot string, src slices.Source, nodes []string) error {
	devRoot := dirs.dev
	if err := ensureUVMNodes(devRoot, hostRoot); err != nil {
		return err
	}
	var missing []string
	for _, n := range append(append([]string{}, requiredControlNodes...), nodes...) {
		if strings.HasPrefix(n, "/dev/nvidia-caps/") {
			continue
		}
		if _, found, err := dirs.locate(n); err != nil {
			return fmt.Errorf("checking device node %s: %w", n, err)
		} else if !found {
			missing = append(missing, n)
		}
	}
	if len(missing) > 0 {
		where := "on the host"
		if dirs.driverDev != "" {
			where = fmt.Sprintf("on the host, in /dev or in the driver's %s", dirs.hostDriverDev)
		}
		var odd string
		if files := dirs.notDevices(missing); len(files) > 0 {
			what := "are not character devices"
			if len(files) == 1 {
				what = "is not a character device"
			}
			odd = fmt.Sprintf("; %s in the host's /dev %s (an empty file the NVIDIA container runtime leaves there where it mounts the node into a container that mounts the host's /dev, or a symbolic link): remove it",
				strings.Join(files, ", "), what)
		}
		return fmt.Errorf("device nodes %s of %s do not exist %s: the NVIDIA driver installation creates them (nvidia-modprobe, or nvidia-ctk system create-device-nodes --control-devices; nvidia-uvm needs its kernel module loaded)%s",
			strings.Join(missing, ", "), src.Name, where, odd)
	}
	if src.MIG == nil {
		return nil
	}
	for _, ci := range []int{-1, src.MIG.CIID} {
		path := capabilityPath(hostRoot, src.GPU.Minor, src.MIG.GIID, ci)
		c, err := readCapability(path)
		if err != nil {
			return fmt.Errorf("reading MIG capability of %s (GI %d, CI %d): %w", src.Name, src.MIG.GIID, ci, err)
		}
		if c.keep {
			// The host's node: in its /dev or the driver's device directory.
			if _, found, err := dirs.locate(capabilityNode(c.minor)); err != nil {
				return fmt.Errorf("checking the device node of MIG capability %s of %s: %w", path, src.Name, err)
			} else if found {
				continue
			}
		}
		if err := ensureCapabilityNode(devRoot, hostRoot, c); err != nil {
			return fmt.Errorf("creating the device node of MIG capability %s of %s: %w", path, src.Name, err)
		}
	}
	return nil
}

// nodeDirs are the directories a device node a CDI spec names may be in,
// as the plugin sees them: the host's /dev (dev) and the device directory
// of a driver installed in a container (driverDev, hostDriverDev on the
// host; empty where there is none). See Config.DevRoot and DriverDevRoot.
type nodeDirs struct {
	dev, driverDev, hostDriverDev string
}

// locate looks for device node path (/dev/...) as a character device in
// the device directory of a driver installed in a container, then in the
// host's /dev, and returns the host path a CDI spec gives it: its path in
// the driver's device directory on the host where it is there, "" where
// it is in the host's /dev (the spec's path is the host path) or nowhere.
// The driver's directory goes first, as NVIDIA's own CDI specs for such a
// driver name it: the host's /dev may hold an empty file of the node's
// name (the NVIDIA container runtime's legacy mode makes one where it
// bind-mounts the driver's node into a container whose /dev is the
// host's), which the container runtime would refuse as no device node.
// A file there that is not a character device does not count. found says
// whether the node is found; err is a failure to look that is not its
// absence.
func (d nodeDirs) locate(path string) (hostPath string, found bool, err error) {
	if d.driverDev != "" {
		switch ok, err := isCharDevice(hostDevPath(d.driverDev, path)); {
		case err != nil:
			return "", false, err
		case ok:
			return hostDevPath(d.hostDriverDev, path), true, nil
		}
	}
	ok, err := isCharDevice(hostDevPath(d.dev, path))
	return "", ok, err
}

// notDevices are those of paths that the host's /dev has as something other
// than a character device.
func (d nodeDirs) notDevices(paths []string) []string {
	var out []string
	for _, p := range paths {
		if _, err := os.Lstat(hostDevPath(d.dev, p)); err == nil {
			out = append(out, p)
		}
	}
	return out
}

// isCharDevice reports whether path is a character device (not followed
// if a symbolic link: the container runtime reads a CDI device node's host
// path so); a path that does not exist is none, and no error.
func isCharDevice(path string) (bool, error) {
	fi, err := os.Lstat(path)
	if err != nil {
		return false, ignoreNotExist(err)
	}
	return fi.Mode()&fs.ModeCharDevice != 0, nil
}

func ignoreNotExist(err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}

// capabilityNode is the device node of the capability of the given minor.
func capabilityNode(minor int) string { return fmt.Sprintf("/dev/nvidia-caps/nvidia-cap%d", minor) }

// hostDevPath is where host path /dev/... is seen under devRoot.
func hostDevPath(devRoot, path string) string {
	return filepath.Join(devRoot, strings.TrimPrefix(path, "/dev/"))
}

// ensureCapabilityNode makes /dev/nvidia-caps/nvidia-cap<minor> under devRoot
// the character device <major of nvidia-caps in /proc/devices>:<minor> with
// the capability's mode, as nvidia-modprobe -f does: a missing node is
// created, one of another device number (left from before a driver reload,
// which may change the major) is made again, one of another mode is
// chmodded. A file there that is not a character device is an error.
// Where the driver says its device files are the host's (DeviceFileModify:
// 0), an existing node is left as it is and a missing one is an error.
func ensureCapabilityNode(devRoot, hostRoot string, c capability) error {
	path := hostDevPath(devRoot, capabilityNode(c.minor))
	if c.keep {
		const host = "the NVIDIA driver leaves its device files to the host (DeviceFileModify: 0, NVreg_ModifyDeviceFiles=0): make it there"
		switch ok, err := isCharDevice(path); {
		case err != nil:
			return err
		case ok:
			return nil
		}
		if _, err := os.Lstat(path); err == nil {
			return fmt.Errorf("%s exists and is not a character device, and %s", path, host)
		}
		return fmt.Errorf("%s does not exist, and %s", path, host)
	}
	major, err := charMajor(filepath.Join(hostRoot, "proc/devices"), capsDriver)
	if err != nil {
		return err
	}
	want := unix.Mkdev(major, uint32(c.minor))
	var st unix.Stat_t
	switch err := unix.Lstat(path, &st); {
	case err == nil && st.Mode&unix.S_IFMT != unix.S_IFCHR:
		fi, _ := os.Lstat(path)
		return fmt.Errorf("%s exists and is not a character device (%v)", path, fi.Mode().Type())
	case err == nil && st.Rdev == want:
		if os.FileMode(st.Mode).Perm() == c.mode.Perm() {
			return nil
		}
		return os.Chmod(path, c.mode.Perm())
	case err == nil:
		// Another device number: from before a driver reload.
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("removing %s (%d:%d, want %d:%d): %w", path, unix.Major(st.Rdev), unix.Minor(st.Rdev), major, c.minor, err)
		}
	case !errors.Is(err, unix.ENOENT):
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	err = unix.Mknod(path, unix.S_IFCHR|uint32(c.mode.Perm()), int(want))
	if errors.Is(err, unix.EEXIST) {
		return nil // made meanwhile (by the driver's tools)
	}
	if err != nil {
		return fmt.Errorf("mknod %s (%d:%d): %w", path, major, c.minor, err)
	}
	// The umask narrowed mknod's mode.
	return os.Chmod(path, c.mode.Perm())
}

// charMajor reads the major number of a character device driver from
// /proc/devices ("Character devices:" section, lines "<major> <name>").
func charMajor(procDevices, driver string) (uint32, error) {
	data, err := os.ReadFile(procDevices)
	if err != nil {
		return 0, fmt.Errorf("reading the major of %s: %w", driver, err)
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	inChar := false
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case strings.HasSuffix(line, "devices:"):
			inChar = line == "Character devices:"
			continue
		case !inChar:
			continue
		}
		num, name, ok := strings.Cut(line, " ")
		if !ok || strings.TrimSpace(name) != driver {
			continue
		}
		n, err := strconv.ParseUint(num, 10, 32)
		if err != nil {
			return 0, fmt.Errorf("parsing %s: major %q of %s is not a number", procDevices, num, driver)
		}
		return uint32(n), nil
	}
	return 0, fmt.Errorf("%s lists no character device %s: is the NVIDIA driver loaded?", procDevices, driver)
}
