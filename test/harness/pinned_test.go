package harness

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"golang.org/x/mod/modfile"
)

// TestPinnedModulesMatchVersions: test/testbin/build.sh and this package pin
// the same versions, and the scratch modules committed for them (go.mod and
// go.sum under test/testbin/modules) require those versions. A version bump
// that forgets the modules would silently build from an unpinned graph.
func TestPinnedModulesMatchVersions(t *testing.T) {
	script, err := os.ReadFile(filepath.Join("..", "testbin", "build.sh"))
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"K8S_VERSION": KubernetesVersion, "ETCD_VERSION": EtcdVersion} {
		var got string
		if m := regexp.MustCompile(`(?m)^` + name + `=(\S+)$`).FindSubmatch(script); m != nil {
			got = string(m[1])
		}
		if got != want {
			t.Errorf("build.sh pins %s=%q, harness %q", name, got, want)
		}
	}
	for file, require := range map[string]struct{ path, version string }{
		"k8s-v" + KubernetesVersion: {"k8s.io/kubernetes", "v" + KubernetesVersion},
		"etcd-v" + EtcdVersion:      {"go.etcd.io/etcd/server/v3", "v" + EtcdVersion},
	} {
		base := filepath.Join("..", "testbin", "modules", file)
		data, err := os.ReadFile(base + ".go.mod")
		if err != nil {
			t.Errorf("no committed scratch module for %s: %v", file, err)
			continue
		}
		f, err := modfile.Parse(base+".go.mod", data, nil)
		if err != nil {
			t.Fatal(err)
		}
		var got string
		for _, r := range f.Require {
			if r.Mod.Path == require.path {
				got = r.Mod.Version
			}
		}
		if got != require.version {
			t.Errorf("%s.go.mod requires %s %q, want %q", file, require.path, got, require.version)
		}
		sum, err := os.ReadFile(base + ".go.sum")
		if err != nil {
			t.Errorf("no committed go.sum for %s: %v", file, err)
			continue
		}
		if !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(require.path+" "+require.version) + ` h1:`).Match(sum) {
			t.Errorf("%s.go.sum has no checksum of %s %s", file, require.path, require.version)
		}
	}
}
