package plugin

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"
)

// writeMIGCaps writes the MIG management capability files under hostRoot:
// name -> content ("" leaves it out).
func writeMIGCaps(t *testing.T, hostRoot string, files map[string]string) {
	t.Helper()
	dir := filepath.Join(hostRoot, "proc/driver/nvidia/capabilities/mig")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, content := range files {
		if content == "" {
			continue
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o444); err != nil {
			t.Fatal(err)
		}
	}
}

// TestEnsureMIGManagementNodes: the config and monitor nodes are made with
// the nvidia-caps major and the minor and mode the driver gives; a
// capability the driver lacks is reported missing, not failed; a bad
// capability file fails, and the other capability's node is still made.
func TestEnsureMIGManagementNodes(t *testing.T) {
	type node struct {
		Major, Minor uint32
		Mode         os.FileMode
	}
	const (
		config  = "DeviceFileMinor: 1\nDeviceFileMode: 256\nDeviceFileModify: 1\n"
		monitor = "DeviceFileMinor: 2\nDeviceFileMode: 292\nDeviceFileModify: 1\n"
	)
	cases := map[string]struct {
		files       map[string]string
		wantNodes   []string
		wantMissing []string
		wantDev     map[string]node
		wantErr     bool
	}{
		"both made": {
			files:     map[string]string{"config": config, "monitor": monitor},
			wantNodes: []string{"/dev/nvidia-caps/nvidia-cap1", "/dev/nvidia-caps/nvidia-cap2"},
			wantDev: map[string]node{
				"nvidia-cap1": {236, 1, 0o400},
				"nvidia-cap2": {236, 2, 0o444},
			},
		},
		"driver without MIG": {
			files:       map[string]string{},
			wantMissing: []string{"proc/driver/nvidia/capabilities/mig/config", "proc/driver/nvidia/capabilities/mig/monitor"},
			wantDev:     map[string]node{},
		},
		"config unreadable, monitor made": {
			files:     map[string]string{"config": "DeviceFileMode: 256\n", "monitor": monitor},
			wantNodes: []string{"/dev/nvidia-caps/nvidia-cap2"},
			wantDev:   map[string]node{"nvidia-cap2": {236, 2, 0o444}},
			wantErr:   true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			e, devRoot := devEnv(t)
			writeMIGCaps(t, e.hostRoot, tc.files)
			nodes, missing, err := EnsureMIGManagementNodes(devRoot, e.hostRoot)
			if (err != nil) != tc.wantErr {
				t.Fatalf("error %v, want error %v", err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.wantNodes, nodes); diff != "" {
				t.Errorf("nodes (-want +got):\n%s", diff)
			}
			var rel []string
			for _, m := range missing {
				r, _ := filepath.Rel(e.hostRoot, m)
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
