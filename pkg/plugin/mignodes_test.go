package plugin

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"
)

// TestEnsureMIGManagementNodes: the config and monitor nodes are made with
// the nvidia-caps major and the minor and mode the driver gives; a driver
// without the capability files reports them missing, not failed; a bad
// capability file or no nvidia-caps major fails, and the other
// capability's node is still made; where the driver leaves its device files
// to the host (DeviceFileModify: 0), an existing node keeps its mode and a
// missing one is an error, not made.
func TestEnsureMIGManagementNodes(t *testing.T) {
	type node struct {
		Major, Minor uint32
		Mode         os.FileMode
	}
	const (
		config     = "DeviceFileMinor: 1\nDeviceFileMode: 256\nDeviceFileModify: 1\n"
		monitor    = "DeviceFileMinor: 2\nDeviceFileMode: 292\nDeviceFileModify: 1\n"
		configKeep = "DeviceFileMinor: 1\nDeviceFileMode: 256\nDeviceFileModify: 0\n"
		monKeep    = "DeviceFileMinor: 2\nDeviceFileMode: 292\nDeviceFileModify: 0\n"
	)
	cases := map[string]struct {
		procDevices string
		files       map[string]string // capability file -> content
		existing    map[string]node   // nodes the host has already
		wantNodes   []string
		wantMissing []string
		wantDev     map[string]node
		wantErr     []string
		// umask, when not 0, is the process's umask meanwhile.
		umask int
	}{
		"both made": {
			files:     map[string]string{"config": config, "monitor": monitor},
			wantNodes: []string{"/dev/nvidia-caps/nvidia-cap1", "/dev/nvidia-caps/nvidia-cap2"},
			wantDev:   map[string]node{"nvidia-cap1": {236, 1, 0o400}, "nvidia-cap2": {236, 2, 0o444}},
		},
		// mknod's mode is narrowed by the umask: the nodes get the
		// capabilities' modes all the same.
		"a umask that narrows the modes": {
			files:     map[string]string{"config": config, "monitor": monitor},
			umask:     0o277,
			wantNodes: []string{"/dev/nvidia-caps/nvidia-cap1", "/dev/nvidia-caps/nvidia-cap2"},
			wantDev:   map[string]node{"nvidia-cap1": {236, 1, 0o400}, "nvidia-cap2": {236, 2, 0o444}},
		},
		"driver without the capability files": {
			wantMissing: []string{"proc/driver/nvidia/capabilities/mig/config", "proc/driver/nvidia/capabilities/mig/monitor"},
			wantDev:     map[string]node{},
		},
		"config malformed, monitor made": {
			files:     map[string]string{"config": "DeviceFileMode: 256\n", "monitor": monitor},
			wantNodes: []string{"/dev/nvidia-caps/nvidia-cap2"},
			wantDev:   map[string]node{"nvidia-cap2": {236, 2, 0o444}},
			wantErr:   []string{"capability mig/config", "no DeviceFileMinor"},
		},
		"no nvidia-caps major": {
			procDevices: "Character devices:\n195 nvidia\n",
			files:       map[string]string{"config": config, "monitor": monitor},
			wantDev:     map[string]node{},
			wantErr:     []string{"capability mig/config", "capability mig/monitor", "lists no character device nvidia-caps"},
		},
		"host keeps its device files": {
			files:     map[string]string{"config": configKeep, "monitor": monKeep},
			existing:  map[string]node{"nvidia-cap1": {236, 1, 0o660}},
			wantNodes: []string{"/dev/nvidia-caps/nvidia-cap1"},
			wantDev:   map[string]node{"nvidia-cap1": {236, 1, 0o660}},
			wantErr:   []string{"nvidia-cap2 does not exist", "DeviceFileModify: 0"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			hostRoot, devRoot := t.TempDir(), filepath.Join(t.TempDir(), "dev")
			if err := os.MkdirAll(filepath.Join(devRoot, "nvidia-caps"), 0o755); err != nil {
				t.Fatal(err)
			}
			if len(tc.wantNodes) > 0 || len(tc.existing) > 0 {
				mknodOrSkip(t, devRoot)
			}
			pd := tc.procDevices
			if pd == "" {
				pd = procDevices
			}
			writeFile(t, filepath.Join(hostRoot, "proc/devices"), pd)
			for f, content := range tc.files {
				writeFile(t, filepath.Join(hostRoot, "proc/driver/nvidia/capabilities/mig", f), content)
			}
			for f, n := range tc.existing {
				path := filepath.Join(devRoot, "nvidia-caps", f)
				if err := unix.Mknod(path, unix.S_IFCHR|uint32(n.Mode), int(unix.Mkdev(n.Major, n.Minor))); err != nil {
					t.Fatal(err)
				}
				if err := os.Chmod(path, n.Mode); err != nil {
					t.Fatal(err)
				}
			}

			if tc.umask != 0 {
				old := unix.Umask(tc.umask)
				t.Cleanup(func() { unix.Umask(old) })
			}
			nodes, missing, err := EnsureMIGManagementNodes(devRoot, hostRoot)
			for _, want := range tc.wantErr {
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Errorf("error %v, want one containing %q", err, want)
				}
			}
			if len(tc.wantErr) == 0 && err != nil {
				t.Errorf("error %v", err)
			}
			if diff := cmp.Diff(tc.wantNodes, nodes); diff != "" {
				t.Errorf("nodes (-want +got):\n%s", diff)
			}
			var rel []string
			for _, m := range missing {
				r, _ := filepath.Rel(hostRoot, m)
				rel = append(rel, r)
			}
			if diff := cmp.Diff(tc.wantMissing, rel); diff != "" {
				t.Errorf("missing (-want +got):\n%s", diff)
			}
			got := map[string]node{}
			entries, _ := os.ReadDir(filepath.Join(devRoot, "nvidia-caps"))
			for _, de := range entries {
				var st unix.Stat_t
				if err := unix.Lstat(filepath.Join(devRoot, "nvidia-caps", de.Name()), &st); err != nil {
					t.Fatal(err)
				}
				if st.Mode&unix.S_IFMT != unix.S_IFCHR {
					t.Errorf("%s is not a character device", de.Name())
				}
				got[de.Name()] = node{unix.Major(st.Rdev), unix.Minor(st.Rdev), os.FileMode(st.Mode).Perm()}
			}
			if diff := cmp.Diff(tc.wantDev, got); diff != "" {
				t.Errorf("device nodes (-want +got):\n%s", diff)
			}
		})
	}
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o444); err != nil {
		t.Fatal(err)
	}
}
