package plugin

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/miglayout/miglayout/pkg/slices"
)

// TestPrepareLeavesCurrentUVMNodes: Unified Memory device nodes that are
// character devices of the loaded module's number are left as they are,
// with the owner and mode the host gave them, even where the driver's
// params would make them otherwise: only missing nodes and nodes of
// another device number are made again.
func TestPrepareLeavesCurrentUVMNodes(t *testing.T) {
	e, devRoot := devEnv(t)
	nodes := map[string]uint32{"nvidia-uvm": 0, "nvidia-uvm-tools": 1}
	inodes := map[string]uint64{}
	for n, minor := range nodes {
		path := filepath.Join(devRoot, n)
		if err := os.Remove(path); err != nil {
			t.Fatal(err)
		}
		if err := unix.Mknod(path, unix.S_IFCHR|0o600, int(unix.Mkdev(237, minor))); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(path, 0o600); err != nil {
			t.Fatal(err)
		}
		var st unix.Stat_t
		if err := unix.Lstat(path, &st); err != nil {
			t.Fatal(err)
		}
		inodes[n] = st.Ino
	}
	writeParams(t, e.hostRoot, 1) // would make them 0660, group 44
	p := e.pluginWithDev(devRoot)
	if r := e.prepare(p, claim(uid1, "infer", alloc{"mig", slices.DefaultDriverName, node, "gpu-0-mig-1g10gb-19-2"})); r.Err != nil {
		t.Fatal(r.Err)
	}
	for n := range nodes {
		var st unix.Stat_t
		if err := unix.Lstat(filepath.Join(devRoot, n), &st); err != nil {
			t.Fatal(err)
		}
		if st.Ino != inodes[n] || st.Mode&0o777 != 0o600 || st.Gid != 0 {
			t.Errorf("%s: inode %d, mode %o, group %d; want it left as it was (inode %d, mode 0600, group 0)",
				n, st.Ino, st.Mode&0o777, st.Gid, inodes[n])
		}
	}
}
