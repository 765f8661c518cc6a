package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestStateLockMakesAPrivateDirectory: the state directory, made where
// missing, and the lock file are readable by the agent's user only.
func TestStateLockMakesAPrivateDirectory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	release, err := lockStateDir(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	for path, want := range map[string]os.FileMode{dir: 0o700, filepath.Join(dir, stateLockFile): 0o600} {
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Mode().Perm(); got&^want != 0 {
			t.Errorf("%s: mode %v, want at most %v", path, got, want)
		}
	}
}

// TestStateLockOfAStateDirectoryThatCannotBeMade: a state directory that
// cannot be made (a file is in the way) is reported as such.
func TestStateLockOfAStateDirectoryThatCannotBeMade(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := lockStateDir(context.Background(), filepath.Join(file, "state"))
	if err == nil || !strings.Contains(err.Error(), "creating the state directory") {
		t.Errorf("lockStateDir: %v, want the state directory not made", err)
	}
}
