package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/utils/ptr"

	"github.com/miglayout/miglayout/pkg/mig"
	"github.com/miglayout/miglayout/pkg/mig/nvmlsim"
)

// simGPU is a simulated GPU holding the given GPU instances.
func simGPU(index int, gis ...nvmlsim.GPUInstance) nvmlsim.GPU {
	return nvmlsim.GPU{Index: index, GPUInstances: gis}
}

// simGI is a GPU instance of profile at start, with a compute instance of
// uuid.
func simGI(profile string, start int, uuid string) nvmlsim.GPUInstance {
	return nvmlsim.GPUInstance{Profile: profile, Placement: mig.Placement{Start: start, Size: 4},
		ComputeInstances: []nvmlsim.ComputeInstance{{UUID: uuid}}}
}

// TestPrintLayoutsCountsChangedGPUs: the count the Auto and layout-change
// steps judge is the number of GPUs whose layout differs, over both nodes;
// with changedOnly the unchanged GPUs are not printed, and the note is
// given each printed GPU.
func TestPrintLayoutsCountsChangedGPUs(t *testing.T) {
	before := map[string]nvmlsim.State{
		nodeA100: {GPUs: []nvmlsim.GPU{simGPU(0, simGI("3g.40gb", 0, "MIG-a")), simGPU(1)}},
		nodeH100: {GPUs: []nvmlsim.GPU{simGPU(0, simGI("7g.80gb", 0, "MIG-h"))}},
	}
	after := map[string]nvmlsim.State{
		nodeA100: {GPUs: []nvmlsim.GPU{simGPU(0, simGI("3g.40gb", 0, "MIG-a")), simGPU(1, simGI("4g.40gb", 0, "MIG-b"))}},
		nodeH100: {GPUs: []nvmlsim.GPU{simGPU(0, simGI("7g.80gb", 0, "MIG-h"))}},
	}
	tests := map[string]struct {
		changedOnly bool
		wantRows    []string
	}{
		"all GPUs":     {false, []string{"node-a100 0 3g.40gb@0 3g.40gb@0 same", "node-a100 1  4g.40gb@0 changed", "node-h100 0 7g.80gb@0 7g.80gb@0 same"}},
		"changed only": {true, []string{"node-a100 1  4g.40gb@0 changed"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var out bytes.Buffer
			d := &demo{out: &out}
			changed := d.printLayouts(before, after, tc.changedOnly, func(_ string, _ int, b, a string) string {
				if a == b {
					return "same"
				}
				return "changed"
			})
			if changed != 1 {
				t.Errorf("printLayouts: %d GPUs changed, want 1", changed)
			}
			var rows []string
			for _, l := range strings.Split(strings.TrimRight(out.String(), "\n"), "\n")[1:] {
				f := strings.Fields(l)
				if len(f) == 4 { // a GPU without MIG devices before
					f = append(f[:2], append([]string{""}, f[2:]...)...)
				}
				rows = append(rows, strings.Join(f, " "))
			}
			if diff := cmp.Diff(tc.wantRows, rows); diff != "" {
				t.Errorf("printed rows (-want +got):\n%s\n%s", diff, out.String())
			}
		})
	}
}

// TestFindDevice: a MIG device is found by its UUID, as the profile and
// memory-slice start of its GPU instance; a UUID no compute instance has is
// not found, which fails the check that trainer's device survived.
func TestFindDevice(t *testing.T) {
	st := nvmlsim.State{GPUs: []nvmlsim.GPU{
		simGPU(0, simGI("3g.40gb", 0, "MIG-a"), simGI("3g.40gb", 4, "MIG-b")),
		simGPU(1, simGI("1g.10gb", 6, "MIG-c")),
	}}
	type found struct {
		Device mig.Device
		OK     bool
	}
	tests := map[string]struct {
		uuid string
		want found
	}{
		"second GI of GPU 0": {"MIG-b", found{mig.Device{Profile: "3g.40gb", Start: 4}, true}},
		"GI of GPU 1":        {"MIG-c", found{mig.Device{Profile: "1g.10gb", Start: 6}, true}},
		"gone":               {"MIG-gone", found{}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			d, ok := findDevice(st, tc.uuid)
			if diff := cmp.Diff(tc.want, found{d, ok}); diff != "" {
				t.Errorf("findDevice(%s) (-want +got):\n%s", tc.uuid, diff)
			}
		})
	}
}

// TestDeviceAttributes: an attribute the device lacks, or holds as another
// type, prints empty.
func TestDeviceAttributes(t *testing.T) {
	a := map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
		"profile": {StringValue: ptr.To("3g.40gb")},
		"memory":  {IntValue: ptr.To[int64](40192)},
	}
	got := []string{strAttr(a, "profile"), strAttr(a, "memory"), strAttr(a, "uuid"), intAttr(a, "memory"), intAttr(a, "profile"), intAttr(a, "uuid")}
	want := []string{"3g.40gb", "", "", "40192", "", ""}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("attributes (-want +got):\n%s", diff)
	}
}

// TestExecutable: the control-plane binaries count as built only where
// kubectl is an executable file.
func TestExecutable(t *testing.T) {
	dir := t.TempDir()
	for name, mode := range map[string]os.FileMode{"exec": 0o755, "plain": 0o644} {
		if err := os.WriteFile(filepath.Join(dir, name), nil, mode); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "dir"), 0o755); err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{"exec": true, "plain": false, "dir": false, "missing": false}
	got := map[string]bool{}
	for name := range want {
		got[name] = executable(filepath.Join(dir, name))
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("executable (-want +got):\n%s", diff)
	}
}

// TestJoinPIDs: process IDs print comma-separated.
func TestJoinPIDs(t *testing.T) {
	if got := joinPIDs([]uint32{4242, 4243}); got != "4242, 4243" {
		t.Errorf("joinPIDs: %q, want %q", got, "4242, 4243")
	}
}

// TestIndent: every line written through the indenter starts with the
// prefix, also where a line is written in parts.
func TestIndent(t *testing.T) {
	var out bytes.Buffer
	w := indent(&out, "  ")
	for _, s := range []string{"first\nsec", "ond\n", "third\n"} {
		if n, err := w.Write([]byte(s)); err != nil || n != len(s) {
			t.Fatalf("Write(%q): %d, %v", s, n, err)
		}
	}
	if want := "  first\n  second\n  third\n"; out.String() != want {
		t.Errorf("indented: %q, want %q", out.String(), want)
	}
}

func TestMemorySlices(t *testing.T) {
	tests := map[string]struct{ start, size, want string }{
		"four slices": {"4", "4", "4-7"},
		"one slice":   {"6", "1", "6"},
		"whole GPU":   {"0", "8", "0-7"},
		"not numbers": {"", "x", "+x"},
	}
	for name, tc := range tests {
		if got := memorySlices(tc.start, tc.size); got != tc.want {
			t.Errorf("%s: memorySlices(%q, %q) = %q, want %q", name, tc.start, tc.size, got, tc.want)
		}
	}
}
