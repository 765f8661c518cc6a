package plugin

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestReadDeviceFileParamsIgnoresUnparsableValues: a setting whose value is
// not a decimal number keeps the driver's default, as one the file lacks.
func TestReadDeviceFileParamsIgnoresUnparsableValues(t *testing.T) {
	path := filepath.Join(t.TempDir(), "params")
	params := "ModifyDeviceFiles: yes\nDeviceFileUID: root\nDeviceFileGID: 4x\nDeviceFileMode: 0o660\n"
	if err := os.WriteFile(path, []byte(params), 0o444); err != nil {
		t.Fatal(err)
	}
	got, err := readDeviceFileParams(path)
	if err != nil {
		t.Fatal(err)
	}
	want := deviceFileParams{modify: true, mode: 0o666}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(deviceFileParams{})); diff != "" {
		t.Errorf("params (-want +got):\n%s", diff)
	}
}
