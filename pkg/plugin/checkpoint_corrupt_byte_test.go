package plugin

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/types"
)

// TestCheckpointOneByteCorrupted: a checkpoint with any one byte changed
// (to each of a set of values that keep or break the JSON: a flipped low
// bit, the other letter case, quote, brace, digit, space) is refused or
// read as the claims written, never as other claims: a claim read with
// another device or UUID would leave the device it holds destroyable, or
// hand a container the wrong device.
func TestCheckpointOneByteCorrupted(t *testing.T) {
	claims := map[types.UID]PreparedClaim{
		"uid-1": inferClaim(),
		"uid-2": {UID: "uid-2", Namespace: "team-b", Name: "train", Devices: []PreparedDevice{{
			Requests: []string{"a", "b"}, Pool: "node-a", Device: "gpu-1", GPUIndex: 1, AdminAccess: true,
			UUID: "GPU-1", DeviceNodes: []string{"/dev/nvidia1"}, CDIDeviceID: "k8s.mig.miglayout.io/claim=uid-2-gpu-1",
		}}},
	}
	dir := t.TempDir()
	path := filepath.Join(dir, CheckpointFile)
	if err := writeCheckpoint(path, claims); err != nil {
		t.Fatal(err)
	}
	good, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	edits := []func(byte) byte{
		func(b byte) byte { return b ^ 0x01 },
		func(b byte) byte { return b ^ 0x20 }, // letter case; space <-> NUL
		func(byte) byte { return '"' },
		func(byte) byte { return '}' },
		func(byte) byte { return '7' },
		func(byte) byte { return ' ' },
	}
	corrupt := filepath.Join(dir, "corrupt.json")
	refused, same := 0, 0
	for i := range good {
		for _, edit := range edits {
			b := edit(good[i])
			if b == good[i] {
				continue
			}
			data := append([]byte(nil), good...)
			data[i] = b
			if err := os.WriteFile(corrupt, data, 0o600); err != nil {
				t.Fatal(err)
			}
			got, err := readCheckpoint(corrupt)
			if err != nil {
				refused++
				continue
			}
			if diff := cmp.Diff(claims, got); diff != "" {
				t.Fatalf("byte %d changed from %q to %q: read as other claims (-written +read):\n%s", i, good[i], b, diff)
			}
			same++
		}
	}
	// Both outcomes occur: whitespace and key case may change harmlessly,
	// and most changes are refused.
	if refused == 0 || same == 0 {
		t.Fatalf("%d corruptions refused, %d read as written; want some of each", refused, same)
	}
	t.Logf("%d corruptions refused, %d read as written", refused, same)
}
