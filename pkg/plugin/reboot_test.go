package plugin

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"

	"github.com/miglayout/miglayout/pkg/slices"
)

// TestPrepareReplacesStaleCapabilityNode: a /dev/nvidia-caps node left from
// before a driver reload (the nvidia-caps major is dynamic: 235 then, 236
// in /proc/devices now) is a character device of another device number.
// nvidia-modprobe, which ensureDeviceNodes says it follows, checks st_rdev
// (and the mode) and makes such a node again; ensureCapabilityNode keeps
// any character device, and the spec hands the container a node that does
// not grant the MIG device's capability.
func TestPrepareReplacesStaleCapabilityNode(t *testing.T) {
	e, devRoot := devEnv(t)
	c := claim(uid1, "infer", alloc{"mig", slices.DefaultDriverName, node, "gpu-0-mig-1g10gb-19-2"})
	plain := e.pluginWithDev("")
	if r := e.prepare(plain, c); r.Err != nil {
		t.Fatal(r.Err)
	}
	caps := capsNodes(t, plain)
	if err := e.unprepare(plain, c); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(devRoot, "nvidia-caps"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, n := range caps {
		minor, _ := strconv.Atoi(strings.TrimPrefix(n, "/dev/nvidia-caps/nvidia-cap"))
		if err := unix.Mknod(hostDevPath(devRoot, n), unix.S_IFCHR|0o444, int(unix.Mkdev(235, uint32(minor)))); err != nil {
			t.Fatal(err)
		}
	}
	if r := e.prepare(e.pluginWithDev(devRoot), c); r.Err != nil {
		t.Fatal(r.Err)
	}
	for _, n := range caps {
		checkCapsNode(t, devRoot, n)
	}
}

// TestPrepareFromCheckpointBeforeGPUUUID: a checkpoint whose MIG device
// records carry no gpuUUID (written before the field) still answers the
// kubelet's repeated prepare with the devices prepared then.
func TestPrepareFromCheckpointBeforeGPUUUID(t *testing.T) {
	e := newEnv(t)
	c := mixedClaim(slices.DefaultDriverName)
	first := e.prepare(e.plugin(""), c)
	if first.Err != nil {
		t.Fatal(first.Err)
	}
	old := mustRead(t, filepath.Join("testdata", "checkpoint-before-gpuuuid.json"))
	if strings.Contains(string(old), "gpuUUID") {
		t.Fatal("fixture has gpuUUID")
	}
	if err := os.WriteFile(filepath.Join(e.cpDir, CheckpointFile), old, 0o600); err != nil {
		t.Fatal(err)
	}
	r := e.prepare(e.plugin(""), c)
	if r.Err != nil {
		t.Fatalf("prepare from a checkpoint without gpuUUID: %v", r.Err)
	}
	if diff := cmp.Diff(first.Devices, r.Devices); diff != "" {
		t.Errorf("prepared devices (-first +now):\n%s", diff)
	}
}
