package fsyncdir

import (
	"errors"
	"io/fs"
	"path/filepath"
	"testing"
)

func TestSync(t *testing.T) {
	if err := Sync(t.TempDir()); err != nil {
		t.Errorf("Sync of a directory: %v", err)
	}
	if err := Sync(filepath.Join(t.TempDir(), "gone")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Sync of a directory that does not exist: %v, want fs.ErrNotExist", err)
	}
}
