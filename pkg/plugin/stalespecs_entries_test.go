package plugin

import (
	"os"
	"path/filepath"
	goslices "slices"
	"strings"
	"testing"

	"github.com/miglayout/miglayout/pkg/slices"
	"k8s.io/apimachinery/pkg/types"
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
	e.plugin("") // makes the checkpoint directory
	if err := writeCheckpoint(filepath.Join(e.cpDir, CheckpointFile), map[types.UID]PreparedClaim{}); err != nil {
		t.Fatal(err)
	}
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

// TestRemoveStaleSpecsWithoutCheckpointFile: where New found no checkpoint
// file (the checkpoint directory moved by a changed kubelet plugin path,
// say), the specs of prepared claims cannot be told from stale ones: none
// is removed, and the error names them. A file whose name carries no claim
// UID (another version's) is never removed.
func TestRemoveStaleSpecsWithoutCheckpointFile(t *testing.T) {
	e := newEnv(t)
	p := e.plugin("")
	running := claim(uid1, "running", alloc{"gpu", slices.DefaultDriverName, node, "gpu-0-mig-1g10gb-19-2"})
	if r := e.prepare(p, running); r.Err != nil {
		t.Fatal(r.Err)
	}
	spec := filepath.Join(e.cdiDir, specName(slices.DefaultDriverName, uid1))
	other := filepath.Join(e.cdiDir, specName(slices.DefaultDriverName, types.UID(string(uid2)+"_gpu")))
	if err := os.WriteFile(other, []byte(`{}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(e.cpDir, CheckpointFile), filepath.Join(t.TempDir(), CheckpointFile)); err != nil {
		t.Fatal(err)
	}
	removed, err := e.plugin("").RemoveStaleSpecs()
	if len(removed) != 0 || err == nil || !strings.Contains(err.Error(), filepath.Base(spec)) || strings.Contains(err.Error(), filepath.Base(other)) {
		t.Errorf("RemoveStaleSpecs = %v, %v; want nothing removed and an error naming %s only", removed, err, filepath.Base(spec))
	}
	for _, path := range []string{spec, other} {
		if _, err := os.Stat(path); err != nil {
			t.Errorf("%s: %v", path, err)
		}
	}
}
