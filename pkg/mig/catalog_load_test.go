package mig

import (
	"regexp"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/google/go-cmp/cmp"
)

// testModelYAML is a model file of one 8-slice GPU (7 compute slices, 7
// instances, 81920 MiB) whose profiles are the given YAML flow mappings,
// one a line; aliases are added to the model's names.
func testModelYAML(aliases string, profiles ...string) string {
	var b strings.Builder
	b.WriteString(`models:
- name: T-GPU
  productName: NVIDIA T-GPU
  aliases: [` + aliases + `]
  architecture: Ampere
  cudaComputeCapability: "8.0"
  memoryMiB: 81920
  multiprocessors: 98
  memorySlices: 8
  computeSlices: 7
  maxInstances: 7
  source: test
  profiles:
`)
	for _, p := range profiles {
		b.WriteString("  - " + p + "\n")
	}
	return b.String()
}

const (
	testProfile1g = `{name: 1g.10gb, id: 19, nvmlProfile: 0, computeSlices: 1, memorySlices: 1, memoryMiB: 9728, maxCount: 2, placements: [{start: 0, size: 1}, {start: 1, size: 1}]}`
	testProfile7g = `{name: 7g.80gb, id: 0, nvmlProfile: 4, computeSlices: 7, memorySlices: 8, memoryMiB: 80896, maxCount: 1, jpegEngines: 1, ofaEngines: 1, placements: [{start: 0, size: 8}]}`
)

// with is profile, a YAML flow mapping, with the fields given ("key: value")
// in place of its own.
func with(profile string, fields ...string) string {
	for _, f := range fields {
		key, _, _ := strings.Cut(f, ":")
		if key == "placements" {
			profile = regexp.MustCompile(`placements: \[.*\]`).ReplaceAllString(profile, f)
			continue
		}
		profile = regexp.MustCompile(key+`: [^,}]*`).ReplaceAllString(profile, f)
	}
	return profile
}

// TestLoadCatalogChecks: LoadCatalog refuses a model file whose names or
// profiles contradict themselves or the GPU (a profile named twice, more
// compute slices or instances than the GPU has, no instance at all,
// placements of another size, outside the memory slices or not in strictly
// ascending order, memory of none or beyond the GPU's, a model name given
// twice), and loads one that does not, a model's alias repeating its own
// name included.
func TestLoadCatalogChecks(t *testing.T) {
	tests := map[string]struct {
		files   map[string]string
		wantErr string // substring; "" loads
	}{
		"valid": {files: map[string]string{"a.yaml": testModelYAML("", testProfile1g, testProfile7g)}},
		"an alias repeating the model's own name": {
			files: map[string]string{"a.yaml": testModelYAML("T-GPU, nvidia t-gpu", testProfile1g, testProfile7g)},
		},
		"a profile defined twice": {
			files:   map[string]string{"a.yaml": testModelYAML("", testProfile1g, with(testProfile1g, "id: 20", "nvmlProfile: 7"))},
			wantErr: "profile 1g.10gb defined twice",
		},
		"more compute slices than the GPU": {
			files:   map[string]string{"a.yaml": testModelYAML("", with(testProfile7g, "name: 8g.80gb", "computeSlices: 8"))},
			wantErr: "computeSlices 8 outside 1..7",
		},
		"no instance allowed": {
			files:   map[string]string{"a.yaml": testModelYAML("", with(testProfile1g, "maxCount: 0"))},
			wantErr: "maxCount 0 outside 1..7",
		},
		"more instances than the GPU": {
			files:   map[string]string{"a.yaml": testModelYAML("", with(testProfile1g, "maxCount: 8"))},
			wantErr: "maxCount 8 outside 1..7",
		},
		"more instances than placements": {
			files:   map[string]string{"a.yaml": testModelYAML("", with(testProfile1g, "maxCount: 3"))},
			wantErr: "profile 1g.10gb: maxCount 3 beyond its 2 placements",
		},
		"a placement of another size": {
			files:   map[string]string{"a.yaml": testModelYAML("", with(testProfile1g, "placements: [{start: 0, size: 2}]"))},
			wantErr: "placement 0:2 has size 2, want memorySlices 1",
		},
		"a placement before slice 0": {
			files:   map[string]string{"a.yaml": testModelYAML("", with(testProfile1g, "placements: [{start: -1, size: 1}]"))},
			wantErr: "placement -1:1 outside memory slices 0..7",
		},
		"a placement one slice past the end": {
			files:   map[string]string{"a.yaml": testModelYAML("", with(testProfile1g, "name: 1g.20gb", "id: 15", "nvmlProfile: 9", "memorySlices: 2", "memoryMiB: 19968", "maxCount: 4", "placements: [{start: 7, size: 2}]"))},
			wantErr: "placement 7:2 outside memory slices 0..7",
		},
		"a placement listed twice": {
			files:   map[string]string{"a.yaml": testModelYAML("", with(testProfile1g, "placements: [{start: 1, size: 1}, {start: 1, size: 1}]"))},
			wantErr: "placements not in ascending order at 1",
		},
		"no memory": {
			files:   map[string]string{"a.yaml": testModelYAML("", with(testProfile1g, "memoryMiB: 0"))},
			wantErr: "memoryMiB 0 outside 1..81920",
		},
		"one MiB more than the GPU": {
			files:   map[string]string{"a.yaml": testModelYAML("", with(testProfile7g, "memoryMiB: 81921"))},
			wantErr: "memoryMiB 81921 outside 1..81920",
		},
		"a model defined in two files": {
			files: map[string]string{
				"a.yaml": testModelYAML("", testProfile1g, testProfile7g),
				"b.yaml": testModelYAML("", testProfile1g, testProfile7g),
			},
			wantErr: `model name "T-GPU" defined twice`,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			fsys := fstest.MapFS{}
			for n, data := range tc.files {
				fsys["models/"+n] = &fstest.MapFile{Data: []byte(data)}
			}
			c, err := LoadCatalog(fsys)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("LoadCatalog: %v", err)
				}
				if _, err := c.Model("T-GPU"); err != nil {
					t.Error(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("LoadCatalog error = %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
}

// TestLoadCatalogEngineTotals: a model's NVJPG and OFA totals are the most
// any of its profiles lists, wherever in the list that profile is.
func TestLoadCatalogEngineTotals(t *testing.T) {
	fsys := fstest.MapFS{"models/a.yaml": &fstest.MapFile{Data: []byte(testModelYAML("", testProfile7g, testProfile1g))}}
	c, err := LoadCatalog(fsys)
	if err != nil {
		t.Fatal(err)
	}
	m, err := c.Model("T-GPU")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([2]int{1, 1}, [2]int{m.JPEGEngines, m.OFAEngines}); diff != "" {
		t.Errorf("JPEG and OFA engine totals (-want +got):\n%s", diff)
	}
}
