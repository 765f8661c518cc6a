package plugin

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// blockFile makes path a directory that is not empty, moving a file there
// aside: a write that renames a file onto path fails, as does removing it
// (a full or read-only disk, as the plugin sees it).
func blockFile(t *testing.T, path string) {
	t.Helper()
	if err := os.Rename(path, path+".kept"); err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(path, "blocker"), 0o700); err != nil {
		t.Fatal(err)
	}
}
