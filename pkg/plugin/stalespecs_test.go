package plugin

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/renameio/v2"
	"k8s.io/apimachinery/pkg/types"

	"github.com/miglayout/miglayout/pkg/slices"
)

// TestRemoveStaleSpecsAtStart: an agent stopped between a prepare's CDI
// spec write and its checkpoint write leaves a spec of a claim it never
// prepared (the kubelet got no answer); at the next start that spec goes,
// and so do the temporary files a crash left (the checkpoint's, and those
// the CDI library writes this driver's specs through), while the specs of
// prepared claims, other vendors' specs and temporary files, and other
// files stay. The kubelet's
// prepare of the claim afterwards writes its spec again.
func TestRemoveStaleSpecsAtStart(t *testing.T) {
	e := newEnv(t)
	if r := e.prepare(e.plugin(""), mixedClaim(slices.DefaultDriverName)); r.Err != nil {
		t.Fatal(r.Err)
	}
	checkpoint := filepath.Join(e.cpDir, CheckpointFile)
	before := mustRead(t, checkpoint)
	unanswered := claim(uid2, "infer", alloc{"mig", slices.DefaultDriverName, node, "gpu-0-mig-1g10gb-19-3"})
	if r := e.prepare(e.plugin(""), unanswered); r.Err != nil {
		t.Fatal(r.Err)
	}
	// The stop came before the checkpoint write.
	if err := os.WriteFile(checkpoint, before, 0o644); err != nil {
		t.Fatal(err)
	}
	kept := filepath.Join(e.cdiDir, specName(slices.DefaultDriverName, uid1))
	stale := filepath.Join(e.cdiDir, specName(slices.DefaultDriverName, uid2))
	keptSpec := mustRead(t, kept)
	mustRead(t, stale)
	others := map[string][]byte{
		// NVIDIA's DRA driver's spec of the same claim UID, and the
		// node's static spec.
		filepath.Join(e.cdiDir, specName("gpu.nvidia.com", uid2)): []byte(`{"cdiVersion":"0.6.0","kind":"k8s.gpu.nvidia.com/claim","devices":[]}`),
		filepath.Join(e.cdiDir, "nvidia.yaml"):                    []byte("cdiVersion: 0.6.0\nkind: nvidia.com/gpu\ndevices: []\n"),
		// The CDI library's own temporary file, and the plugin's socket's
		// directory neighbour.
		// too short to name its kind, and another vendor's.
		filepath.Join(e.cdiDir, "spec.123.tmp"):       []byte("{"),
		filepath.Join(e.cdiDir, "spec.789.tmp"):       []byte(`{"cdiVersion":"0.6.0","kind":"k8s.gpu.nvidia.com/claim","dev`),
		filepath.Join(e.cpDir, "checkpoint.json.bak"): before,
	}
	for path, data := range others {
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// The temporary files of a checkpoint write and of an Xid marks write
	// killed before their rename.
	var temps []string
	for _, name := range []string{CheckpointFile, XidMarksFile} {
		pending, err := renameio.NewPendingFile(filepath.Join(e.cpDir, name), renameio.WithTempDir(e.cpDir))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := pending.Write([]byte(`{"version":`)); err != nil {
			t.Fatal(err)
		}
		if err := pending.File.Close(); err != nil {
			t.Fatal(err)
		}
		temps = append(temps, pending.Name())
	}

	// A spec write of this driver killed before its rename: half of the
	// stale spec, in the CDI library's temporary file.
	specTemp := filepath.Join(e.cdiDir, "spec.456.tmp")
	staleSpec := mustRead(t, stale)
	if err := os.WriteFile(specTemp, staleSpec[:len(staleSpec)/2], 0o600); err != nil {
		t.Fatal(err)
	}

	p := e.plugin("")
	removed, err := p.RemoveStaleSpecs()
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(append([]string{stale, specTemp}, temps...), removed); diff != "" {
		t.Errorf("RemoveStaleSpecs removed (-want +got):\n%s", diff)
	}
	for _, gone := range append([]string{stale, specTemp}, temps...) {
		if _, err := os.Stat(gone); !os.IsNotExist(err) {
			t.Errorf("%s is still there: %v", gone, err)
		}
	}
	if got := mustRead(t, kept); !bytes.Equal(got, keptSpec) {
		t.Errorf("the spec of prepared claim %s changed:\n%s", uid1, got)
	}
	for path, data := range others {
		if got := mustRead(t, path); !bytes.Equal(got, data) {
			t.Errorf("%s changed:\n%s", path, got)
		}
	}
	if _, ok := p.claims[types.UID(uid1)]; !ok {
		t.Errorf("claim %s lost its preparation", uid1)
	}

	// The kubelet prepares the claim it got no answer for again.
	if r := e.prepare(p, unanswered); r.Err != nil {
		t.Fatal(r.Err)
	}
	mustRead(t, stale)
	if removed, err := e.plugin("").RemoveStaleSpecs(); err != nil || len(removed) > 0 {
		t.Errorf("RemoveStaleSpecs after the claim is prepared = %v, %v; want nothing removed", removed, err)
	}
}
