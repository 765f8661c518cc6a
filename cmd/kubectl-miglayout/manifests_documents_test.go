package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReadManifestsDocuments: documents are numbered by their place among
// the file's non-empty documents (an empty one, as a leading "---" makes,
// is not counted); a List's items are documents of their own (a List
// without items has none); an object of a kind whose name only ends in
// List (a custom resource) is a document as it is, not a List.
func TestReadManifestsDocuments(t *testing.T) {
	for name, tc := range map[string]struct {
		manifest string
		want     []string // each document's describe()
	}{
		"empty documents": {"---\n---\nkind: Pod\n---\n\n---\nkind: Pod\nmetadata: {name: b}\n",
			[]string{"f.yaml: Pod (document 1)", "f.yaml: Pod b"}},
		"a List": {"kind: List\napiVersion: v1\nitems:\n- {kind: Pod, metadata: {name: a}}\n- {kind: Pod, metadata: {name: b}}\n",
			[]string{"f.yaml: Pod a", "f.yaml: Pod b"}},
		"a List without items": {"kind: List\napiVersion: v1\n---\nkind: Pod\nmetadata: {name: a}\n",
			[]string{"f.yaml: Pod a"}},
		"a kind of a name ending in List": {"apiVersion: example.com/v1\nkind: AllowList\nmetadata: {name: ips}\nspec: {}\n",
			[]string{"f.yaml: AllowList ips"}},
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			f := filepath.Join(dir, "f.yaml")
			if err := os.WriteFile(f, []byte(tc.manifest), 0o600); err != nil {
				t.Fatal(err)
			}
			docs, err := (&env{}).readManifests([]string{f})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, d := range docs {
				got = append(got, strings.TrimPrefix(d.describe(), dir+string(filepath.Separator)))
			}
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("documents read:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
	if _, err := (&env{}).readManifests(nil); err == nil || !strings.Contains(err.Error(), "no manifests") {
		t.Errorf("reading no file: %v, want an error saying there are no manifests", err)
	}
	empty := filepath.Join(t.TempDir(), "empty.yaml")
	if err := os.WriteFile(empty, []byte("---\n# nothing\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := (&env{}).readManifests([]string{empty}); err == nil || !strings.Contains(err.Error(), "no objects in "+empty) {
		t.Errorf("reading a file of no object: %v, want an error saying there are none", err)
	}
}
