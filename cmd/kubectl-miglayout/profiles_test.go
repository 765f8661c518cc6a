package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/miglayout/miglayout/pkg/mig"
)

var update = flag.Bool("update", false, "rewrite golden files")

func run(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := newRootCommand()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(args)
	err := cmd.Execute()
	return out.String(), err
}

func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("reading golden file (run go test -update): %v", err)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("%s (-want +got):\n%s", name, diff)
	}
}

func TestProfilesGolden(t *testing.T) {
	for name, args := range map[string][]string{
		"profiles-a100-80gb.txt":  {"profiles", "--gpu", "A100-SXM4-80GB"},
		"profiles-a30.json":       {"profiles", "--gpu", "NVIDIA A30", "-o", "json"},
		"profiles-h100-sxm5.json": {"profiles", "--gpu", "H100-SXM5-80GB", "-o", "json"},
	} {
		t.Run(name, func(t *testing.T) {
			out, err := run(t, args...)
			if err != nil {
				t.Fatal(err)
			}
			golden(t, name, out)
		})
	}
}

func TestProfilesJSONAllModels(t *testing.T) {
	out, err := run(t, "profiles", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var got []struct {
		Product  string `json:"product"`
		Profiles []struct {
			Name       string `json:"name"`
			ID         *int   `json:"id"`
			Placements []struct{ Start, Size *int }
		} `json:"profiles"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatal(err)
	}
	if want := len(mig.DefaultCatalog().Models()); len(got) != want || want < 12 {
		t.Errorf("%d models, want the catalog's %d (at least 12)", len(got), want)
	}
	for _, m := range got {
		if !strings.HasPrefix(m.Product, "NVIDIA ") || len(m.Profiles) == 0 {
			t.Errorf("model %+v", m)
		}
		for _, p := range m.Profiles {
			if p.ID == nil || len(p.Placements) == 0 || p.Placements[0].Start == nil || p.Placements[0].Size == nil {
				t.Errorf("%s %s: missing id or placements", m.Product, p.Name)
			}
		}
	}
}

func TestProfilesErrors(t *testing.T) {
	if _, err := run(t, "profiles", "--gpu", "T4"); err == nil || !strings.Contains(err.Error(), `unknown GPU model "T4"`) {
		t.Errorf("unknown model: %v", err)
	}
	if _, err := run(t, "profiles", "-o", "yaml"); err == nil || !strings.Contains(err.Error(), `unknown output format "yaml"`) {
		t.Errorf("bad format: %v", err)
	}
}
