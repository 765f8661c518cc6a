package plugin

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// uvmDriver is the name of the NVIDIA Unified Memory driver's character
// major in /proc/devices (dynamic, given when nvidia-uvm.ko loads).
const uvmDriver = "nvidia-uvm"

// uvmNodes are the Unified Memory device nodes by minor, as nvidia-modprobe
// -u -c=0 makes them: /dev/nvidia-uvm (0) and /dev/nvidia-uvm-tools (1).
var uvmNodes = []struct {
	path  string
	minor uint32
}{{"/dev/nvidia-uvm", 0}, {"/dev/nvidia-uvm-tools", 1}}

// deviceFileParams are the NVIDIA kernel module's settings for the device
// files it leaves to user space (<HostRoot>/proc/driver/nvidia/params:
// ModifyDeviceFiles, DeviceFileUID, DeviceFileGID, DeviceFileMode, the last
// in decimal, e.g. 438 for 0666).
type deviceFileParams struct {
	modify   bool
	uid, gid int
	mode     uint32
}

// readDeviceFileParams reads the params file; a setting it lacks keeps the
// driver's default (modify, root:root, 0666).
func readDeviceFileParams(path string) (deviceFileParams, error) {
	p := deviceFileParams{modify: true, mode: 0o666}
	data, err := os.ReadFile(path)
	if err != nil {
		return p, fmt.Errorf("reading the NVIDIA driver's device file settings: %w", err)
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		key, value, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSpace(value), 10, 64)
		if err != nil {
			continue
		}
		switch strings.TrimSpace(key) {
		case "ModifyDeviceFiles":
			p.modify = n != 0
		case "DeviceFileUID":
			p.uid = int(n)
		case "DeviceFileGID":
			p.gid = int(n)
		case "DeviceFileMode":
			p.mode = uint32(n) & 0o777
		}
	}
	return p, nil
}

// ensureUVMNodes makes the Unified Memory device nodes under devRoot that
// are missing, or are character devices of another device number (left
// from before the module was loaded again, which may change its major), as
// nvidia-modprobe -u -c=0 does, where the nvidia-uvm module is loaded (its
// major in <HostRoot>/proc/devices) and the driver lets user space make its
// device files (ModifyDeviceFiles): a character device of that major with
// the owner and mode the driver's params give. Nothing else makes them on a
// host whose nvidia-uvm was loaded without nvidia-modprobe or a udev rule
// (they appear when the first CUDA program or the NVIDIA container runtime
// hook runs it, after a prepare that needs them). An error is a node it
// failed to make; it makes none, and says nothing, where the module is not
// loaded, the params file is unreadable, or the host keeps its device files
// (the caller reports a missing /dev/nvidia-uvm). A file there that is not
// a character device is left alone.
func ensureUVMNodes(devRoot, hostRoot string) error {
	major, err := charMajor(filepath.Join(hostRoot, "proc/devices"), uvmDriver)
	if err != nil {
		return nil // not loaded: the caller says the module must be
	}
	// missing, or stale: of another device number (removed first).
	var missing, stale []int
	for i, n := range uvmNodes {
		var st unix.Stat_t
		switch err := unix.Lstat(hostDevPath(devRoot, n.path), &st); {
		case errors.Is(err, unix.ENOENT):
			missing = append(missing, i)
		case err == nil && st.Mode&unix.S_IFMT == unix.S_IFCHR && st.Rdev != unix.Mkdev(major, n.minor):
			missing = append(missing, i)
			stale = append(stale, i)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	params, err := readDeviceFileParams(filepath.Join(hostRoot, "proc/driver/nvidia/params"))
	if err != nil || !params.modify {
		return nil // the owner and mode are not known, or the host's to set
	}
	for _, i := range missing {
		n := uvmNodes[i]
		path := hostDevPath(devRoot, n.path)
		if slices.Contains(stale, i) {
			if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("removing %s, of another device number than %d:%d: %w", n.path, major, n.minor, err)
			}
		}
		err := unix.Mknod(path, unix.S_IFCHR|params.mode, int(unix.Mkdev(major, n.minor)))
		if errors.Is(err, unix.EEXIST) {
			continue // made meanwhile
		}
		if err == nil {
			err = os.Chmod(path, os.FileMode(params.mode)) // the umask narrowed mknod's mode
		}
		if err == nil {
			err = os.Lchown(path, params.uid, params.gid)
		}
		if err != nil {
			_ = os.Remove(path) // made again, with the right owner and mode, by the next prepare
			return fmt.Errorf("making %s (%d:%d): %w", n.path, major, n.minor, err)
		}
	}
	return nil
}
