package plugin

import (
	"os"
	"path/filepath"
	goslices "slices"
	"testing"

	"github.com/miglayout/miglayout/pkg/slices"
)

// TestRemoveStaleSpecsLeavesWhatItDidNotWrite: RemoveStaleSpecs removes
// only regular files named as this driver names a claim's spec, with a
// claim UID: a directory or a symbolic link under such a name, and a file
// named so but with no UID, are not specs it wrote, and stay.
func TestRemoveStaleSpecsLeavesWhatItDidNotWrite(t *testing.T) {
	tests := map[string]func(t *testing.T, path string){
		"a directory": func(t *testing.T, path string) {
			if err := os.Mkdir(path, 0o755); err != nil {
				t.Fatal(err)
			}
		},
		"a symbolic link": func(t *testing.T, path string) {
			target := filepath.Join(t.TempDir(), "spec.json")
			if err := os.WriteFile(target, []byte(`{}`), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(target, path); err != nil {
				t.Fatal(err)
			}
		},
	}
	for name, create := range tests {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			p := e.plugin("")
			path := filepath.Join(e.cdiDir, specName(slices.DefaultDriverName, uid2))
			create(t, path)
			removed, err := p.RemoveStaleSpecs()
			if err != nil || len(removed) != 0 {
				t.Errorf("RemoveStaleSpecs = %v, %v; want nothing removed", removed, err)
			}
			if _, err := os.Lstat(path); err != nil {
				t.Errorf("%s is gone: %v", path, err)
			}
		})
	}
	t.Run("a file named without a claim UID", func(t *testing.T) {
		e := newEnv(t)
		p := e.plugin("")
		path := filepath.Join(e.cdiDir, specName(slices.DefaultDriverName, ""))
		if err := os.WriteFile(path, []byte(`{}`), 0o644); err != nil {
			t.Fatal(err)
		}
		removed, err := p.RemoveStaleSpecs()
		if err != nil || len(removed) != 0 {
			t.Errorf("RemoveStaleSpecs = %v, %v; want nothing removed", removed, err)
		}
		if _, err := os.Lstat(path); err != nil {
			t.Errorf("%s is gone: %v", path, err)
		}
	})
}

// TestRemoveStaleSpecsReportsASpecItCannotRemove: a stale spec whose removal
// fails is reported in the error and not among the paths removed.
func TestRemoveStaleSpecsReportsASpecItCannotRemove(t *testing.T) {
	e := newEnv(t)
	p := e.plugin("")
	stale := filepath.Join(e.cdiDir, specName(slices.DefaultDriverName, uid2))
	if err := os.WriteFile(stale, []byte(`{}`), 0o644); err != nil {
		t.Fatal(err)
	}
	setImmutable(t, e.cdiDir, true)
	t.Cleanup(func() { setImmutable(t, e.cdiDir, false) })
	removed, err := p.RemoveStaleSpecs()
	if err == nil {
		t.Errorf("RemoveStaleSpecs succeeded on a directory nothing can be removed from")
	}
	if goslices.Contains(removed, stale) {
		t.Errorf("RemoveStaleSpecs reports %s removed (%v), but it is there", stale, removed)
	}
	if _, err := os.Stat(stale); err != nil {
		t.Errorf("%s: %v", stale, err)
	}
}
