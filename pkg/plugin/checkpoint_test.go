package plugin

import (
	"bytes"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/types"
)

// inferClaim is a prepared claim of one MIG device, as the checkpoint
// records it.
func inferClaim() PreparedClaim {
	return PreparedClaim{UID: "uid-1", Namespace: "team-a", Name: "infer", Devices: []PreparedDevice{{
		Requests: []string{"mig"}, Pool: "node-a", Device: "gpu-0-mig-1g10gb-19-3", GPUIndex: 0,
		UUID: "MIG-1", GPUUUID: "GPU-0", DeviceNodes: []string{"/dev/nvidia0"}, CDIDeviceID: "k8s.mig.miglayout.io/claim=uid-1-gpu-0-mig-1g10gb-19-3",
	}}}
}

// TestReadCheckpoint: a checkpoint is read back as written; one a later
// version wrote, with fields this version does not know, is read too (its
// checksum covers what was written, not what this version re-encodes), so
// rolling the agent back never strands a node's prepared devices; a file
// whose claims changed after writing, or of another format version, is
// refused.
func TestReadCheckpoint(t *testing.T) {
	claims := map[types.UID]PreparedClaim{"uid-1": inferClaim()}
	// file is a checkpoint of the given version whose claims are raw
	// (indented, as written), with the checksum a writer computes over
	// their compact encoding; tamper edits the claims after the checksum.
	file := func(version, raw string, tamper func(string) string) string {
		var compact bytes.Buffer
		if err := json.Compact(&compact, []byte(raw)); err != nil {
			t.Fatal(err)
		}
		if tamper != nil {
			raw = tamper(raw)
		}
		return fmt.Sprintf(`{"version": %q, "checksum": %d, "claims": %s}`, version, crc32.ChecksumIEEE(compact.Bytes()), raw)
	}
	current, err := json.MarshalIndent(claims, "  ", "  ")
	if err != nil {
		t.Fatal(err)
	}
	// A later version's record: a device field and a claim field unknown here.
	later := strings.Replace(string(current), `"gpuIndex": 0,`, `"gpuIndex": 0, "migProfileID": 19,`, 1)
	later = strings.Replace(later, `"name": "infer",`, `"name": "infer", "preparedAt": "2026-12-01T10:00:00Z",`, 1)
	if later == string(current) {
		t.Fatal("fixture unchanged")
	}
	tests := map[string]struct {
		contents string
		want     map[types.UID]PreparedClaim
		wantErr  string
	}{
		"written by this version": {contents: file(CheckpointVersion, string(current), nil), want: claims},
		"written by a later version with more fields": {
			contents: file(CheckpointVersion, later, nil), want: claims},
		"claims changed after writing": {
			contents: file(CheckpointVersion, string(current), func(s string) string { return strings.Replace(s, "MIG-1", "MIG-2", 1) }),
			wantErr:  "corrupt"},
		"another format version": {contents: file("miglayout.io/plugin-checkpoint/v2", string(current), nil), wantErr: "version"},
		// Claims lost (null) in a file whose checksum is of claims: not
		// an empty checkpoint, whose checksum is that of "{}".
		"claims null, checksum of claims": {
			contents: fmt.Sprintf(`{"version": %q, "checksum": %d, "claims": null}`, CheckpointVersion, crc32.ChecksumIEEE(current)),
			wantErr:  "corrupt"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), CheckpointFile)
			if err := os.WriteFile(path, []byte(tc.contents), 0o600); err != nil {
				t.Fatal(err)
			}
			got, err := readCheckpoint(path)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("readCheckpoint = %v, want an error with %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("claims (-want +got):\n%s", diff)
			}
		})
	}
}

// TestWriteCheckpointReadsBack: what writeCheckpoint writes, readCheckpoint
// reads back unchanged.
func TestWriteCheckpointReadsBack(t *testing.T) {
	claims := map[types.UID]PreparedClaim{
		"uid-1": {UID: "uid-1", Namespace: "team-a", Name: "a<b>&c", Devices: []PreparedDevice{{Requests: []string{"r"}, Pool: "n", Device: "gpu-1", UUID: "GPU-1"}}},
		"uid-2": {UID: "uid-2", Namespace: "team-b", Name: "other"},
	}
	path := filepath.Join(t.TempDir(), CheckpointFile)
	if err := writeCheckpoint(path, claims); err != nil {
		t.Fatal(err)
	}
	got, err := readCheckpoint(path)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(claims, got); diff != "" {
		t.Errorf("claims (-written +read):\n%s", diff)
	}
}

// TestReadCheckpointWithoutClaims: a checkpoint that holds no claims, its
// claims key left out or null, with the checksum of the claims' canonical
// empty encoding ("{}", what checksum gives for the empty map every writer
// of this package holds, and what a writer that leaves an empty claims map
// out, omitempty, computes), reads as no claims: refusing it would fail
// New, and the agent would not start.
func TestReadCheckpointWithoutClaims(t *testing.T) {
	emptySum := crc32.ChecksumIEEE([]byte("{}"))
	for name, claims := range map[string]string{
		"claims key left out": "",
		"claims null":         `, "claims": null`,
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), CheckpointFile)
			data := fmt.Sprintf(`{"version": %q, "checksum": %d%s}`, CheckpointVersion, emptySum, claims)
			if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
				t.Fatal(err)
			}
			got, err := readCheckpoint(path)
			if err != nil {
				t.Fatalf("readCheckpoint(%s) = %v, want no claims", data, err)
			}
			if len(got) != 0 {
				t.Errorf("claims %v, want none", got)
			}
		})
	}
}

// TestNewWithCorruptCheckpointSaysWhatToDo: a plugin whose checkpoint is
// corrupt does not start, and its error says why and how to recover,
// naming the file.
func TestNewWithCorruptCheckpointSaysWhatToDo(t *testing.T) {
	e := newEnv(t)
	if err := os.MkdirAll(e.cpDir, 0o700); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(e.cpDir, CheckpointFile)
	if err := os.WriteFile(path, []byte(`{"version": "`+CheckpointVersion+`", "checksum": 1, "claims": {}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := New(Config{NodeName: node, GPUs: e.gpus, Locks: e.locks, CDIDir: e.cdiDir, CheckpointDir: e.cpDir, HostRoot: e.hostRoot})
	if err == nil {
		t.Fatal("a plugin started on a corrupt checkpoint")
	}
	for _, want := range []string{"corrupt", "kubectl drain", "move " + path + " aside"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
}

// TestWriteCheckpointTemporaryFile: a checkpoint write works whatever TMPDIR
// says (its temporary file is made beside the checkpoint: a rename is atomic
// only within one file system, and the plugin's /tmp is rarely the host
// directory's), and a write that fails leaves no temporary file behind.
func TestWriteCheckpointTemporaryFile(t *testing.T) {
	claims := map[types.UID]PreparedClaim{"uid-1": {UID: "uid-1", Namespace: "team-a", Name: "infer"}}
	tests := map[string]struct {
		// setup prepares dir, the checkpoint's directory, and returns
		// the checkpoint's path.
		setup   func(t *testing.T, dir string) string
		wantErr bool
	}{
		"TMPDIR does not exist": {setup: func(t *testing.T, dir string) string {
			t.Setenv("TMPDIR", filepath.Join(dir, "no-such-dir"))
			return filepath.Join(dir, CheckpointFile)
		}},
		"the rename fails (a directory is in the way)": {setup: func(t *testing.T, dir string) string {
			path := filepath.Join(dir, CheckpointFile)
			if err := os.MkdirAll(filepath.Join(path, "x"), 0o700); err != nil {
				t.Fatal(err)
			}
			return path
		}, wantErr: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			path := tc.setup(t, dir)
			err := writeCheckpoint(path, claims)
			if (err != nil) != tc.wantErr {
				t.Fatalf("writeCheckpoint = %v, want error %v", err, tc.wantErr)
			}
			if !tc.wantErr {
				got, err := readCheckpoint(path)
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(claims, got); diff != "" {
					t.Errorf("claims (-written +read):\n%s", diff)
				}
			}
			left, err := filepath.Glob(filepath.Join(dir, checkpointTemps))
			if err != nil {
				t.Fatal(err)
			}
			if len(left) != 0 {
				t.Errorf("temporary files left in the checkpoint's directory: %v", left)
			}
		})
	}
}

// TestWriteCheckpointSyncsItsDirectory: a checkpoint write syncs the
// checkpoint's directory after the rename, so that a power loss right after
// a prepare cannot bring the old file back (and the agent then destroy the
// devices of a claim a container runs on).
func TestWriteCheckpointSyncsItsDirectory(t *testing.T) {
	var synced []string
	restore := syncDir
	syncDir = func(dir string) error {
		synced = append(synced, dir)
		return restore(dir)
	}
	t.Cleanup(func() { syncDir = restore })
	dir := t.TempDir()
	if err := writeCheckpoint(filepath.Join(dir, CheckpointFile), map[types.UID]PreparedClaim{}); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{dir}, synced); diff != "" {
		t.Errorf("directories synced (-want +got):\n%s", diff)
	}
}
