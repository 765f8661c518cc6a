package gpu

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestFindNVMLLibrarySaysWhatItSkipped: a library directory whose
// libnvidia-ml.so.1 is no regular file (here a directory) is skipped, and
// the error names it and why; the directories that simply lack the library
// are not named as skipped.
func TestFindNVMLLibrarySaysWhatItSkipped(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "usr/lib64", nvmlLibrary), 0o755); err != nil {
		t.Fatal(err)
	}
	got, err := FindNVMLLibrary(root)
	if !errors.Is(err, ErrNotFound) {
		t.Fatalf("FindNVMLLibrary = %q, %v; want an error wrapping ErrNotFound", got, err)
	}
	want := "; skipped usr/lib64: " + filepath.Join(root, "usr/lib64", nvmlLibrary) + " is not a regular file)"
	if !strings.Contains(err.Error(), want) {
		t.Errorf("error %q lacks %q", err, want)
	}
	if strings.Contains(err.Error(), "skipped usr/lib/") || strings.Contains(err.Error(), "; lib64:") {
		t.Errorf("error %q names a directory without the library as skipped; want only usr/lib64", err)
	}

	// A library further on is found past the directory.
	lib := filepath.Join(root, "lib64", nvmlLibrary)
	if err := os.MkdirAll(filepath.Dir(lib), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(lib, []byte("ELF"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := FindNVMLLibrary(root); err != nil || got != lib {
		t.Errorf("FindNVMLLibrary = %q, %v; want %s", got, err, lib)
	}
}
