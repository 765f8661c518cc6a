package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// TestConvertMediaExtensionResource: under the "mixed" strategy NVIDIA's
// device plugin advertises a media-extension profile with its "+" turned
// into "." (resource names cannot hold "+"): 1g.10gb+me is
// nvidia.com/mig-1g.10gb.me. convert must take it and ask for 1g.10gb+me.
func TestConvertMediaExtensionResource(t *testing.T) {
	f := filepath.Join(t.TempDir(), "video.yaml")
	if err := os.WriteFile(f, []byte(`apiVersion: v1
kind: Pod
metadata: {name: video, namespace: ml}
spec:
  containers:
  - {name: c, image: x, resources: {limits: {nvidia.com/mig-1g.10gb.me: 1}}}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	out, _, err := runWith(t, nil, "convert", "-f", f)
	if err != nil {
		t.Fatalf("convert refuses the device plugin's resource for 1g.10gb+me: %v", err)
	}
	if !strings.Contains(out, "profile == '1g.10gb+me'") {
		t.Errorf("the claim does not ask for a 1g.10gb+me device:\n%s", out)
	}
}

// TestConvertInitContainersNeedTheMost: init containers run one after the
// other, and under the device plugin a pod whose two init containers each
// ask nvidia.com/gpu: 1 needs one GPU (the most any of them asks, not the
// sum). The converted pod must not need two.
func TestConvertInitContainersNeedTheMost(t *testing.T) {
	f := filepath.Join(t.TempDir(), "job.yaml")
	if err := os.WriteFile(f, []byte(`apiVersion: batch/v1
kind: Job
metadata: {name: prep, namespace: ml}
spec:
  template:
    spec:
      restartPolicy: Never
      initContainers:
      - {name: compile, image: x, resources: {limits: {nvidia.com/gpu: 1}}}
      - {name: warmup, image: x, resources: {limits: {nvidia.com/gpu: 1}}}
      containers:
      - {name: main, image: x}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	out, _, err := runWith(t, nil, "convert", "-f", f)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(out, "kind: ResourceClaimTemplate"); n != 1 {
		t.Errorf("%d ResourceClaimTemplates (the pod needs %d GPUs), want 1:\n%s", n, n, out)
	}
}

// TestConvertInitContainersInterleaved: init containers of one resource
// share the largest one's claim also where an init container of another
// resource comes between them (the pod needs 2 GPUs, not 3).
func TestConvertInitContainersInterleaved(t *testing.T) {
	out := convertStdin(t, `
apiVersion: v1
kind: Pod
metadata: {name: app, namespace: ml}
spec:
  initContainers:
  - {name: a, image: x, resources: {limits: {nvidia.com/gpu: 1}}}
  - {name: b, image: x, resources: {limits: {nvidia.com/mig-1g.10gb: 1}}}
  - {name: c, image: x, resources: {limits: {nvidia.com/gpu: 2}}}
  containers:
  - {name: main, image: x}
`)
	if n := strings.Count(out, "kind: ResourceClaimTemplate"); n != 2 {
		t.Errorf("%d ResourceClaimTemplates, want 2 (one of 2 GPUs for a and c, one MIG device for b):\n%s", n, out)
	}
	if !strings.Contains(out, "count: 2") || strings.Contains(out, "app-a-gpu") {
		t.Errorf("init container a does not share c's claim of 2 GPUs:\n%s", out)
	}
}

func writeMigParted(t *testing.T, entries string) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(f, []byte("version: v1\nmig-configs:\n  c:\n"+entries), 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

// TestImportMigPartedEmptyDeviceFilter: mig-parted matches every GPU when
// device-filter is empty (MatchesDeviceFilter: no filter, all devices); the
// entry must be imported as a rule for every GPU, not left out.
func TestImportMigPartedEmptyDeviceFilter(t *testing.T) {
	f := writeMigParted(t, "  - device-filter: []\n    devices: all\n    mig-enabled: true\n    mig-devices:\n      \"3g.40gb\": 2\n")
	out, notes, err := runWith(t, nil, "import", "mig-parted", "-f", f, "--config", "c")
	if err != nil {
		t.Fatalf("%v (notes: %s)", err, notes)
	}
	var ml v1alpha1.MigLayout
	if err := yaml.UnmarshalStrict([]byte(out), &ml); err != nil {
		t.Fatal(err)
	}
	if len(ml.Spec.Rules) != 1 || ml.Spec.Rules[0].ProductName != "" || ml.Spec.Rules[0].Profiles["3g.40gb"] != 2 {
		t.Errorf("want one rule for every GPU with 3g.40gb×2:\n%s\nnotes: %s", out, notes)
	}
}

// TestImportMigPartedUnfilteredUnknownProfile: an entry without
// device-filter whose mig-devices no GPU of the catalog can hold (a profile
// no model offers, or more devices than any model holds) is refused or at
// least named, not imported silently into a MigLayout every GPU of the
// nodes then reports InvalidLayout for.
func TestImportMigPartedUnfilteredUnknownProfile(t *testing.T) {
	for _, devices := range []string{`"3g.4gb": 2`, `"3g.40gb": 3`} {
		f := writeMigParted(t, "  - devices: all\n    mig-enabled: true\n    mig-devices:\n      "+devices+"\n")
		out, notes, err := runWith(t, nil, "import", "mig-parted", "-f", f, "--config", "c")
		profile := strings.Trim(strings.SplitN(devices, ":", 2)[0], `"`)
		if err == nil && !strings.Contains(notes, profile) {
			t.Errorf("mig-devices {%s}: imported without a word:\n%s", devices, out)
		}
	}
}

// TestCheckClassicDRATemplate: snippets written for classic DRA
// (resource.k8s.io/v1alpha2, Kubernetes 1.26 to 1.30) ask for a class with
// spec.resourceClassName. No API server since 1.31 serves that version, and
// resource.k8s.io/v1 has no such field: check must name the template, not
// pass it.
func TestCheckClassicDRATemplate(t *testing.T) {
	f := filepath.Join(t.TempDir(), "classic.yaml")
	if err := os.WriteFile(f, []byte(`apiVersion: resource.k8s.io/v1alpha2
kind: ResourceClaimTemplate
metadata:
  name: gpu-template
spec:
  spec:
    resourceClassName: gpu.nvidia.com
`), 0o600); err != nil {
		t.Fatal(err)
	}
	out, _, err := runWith(t, nil, "check", "--offline", "-f", f)
	if err == nil || !strings.Contains(out, "ResourceClaimTemplate gpu-template") {
		t.Errorf("check passes a resource.k8s.io/v1alpha2 template (err %v):\n%s", err, out)
	}
}

// TestImportMigPartedConfigChoice: --config may be left out where the file
// holds a single mig-config, which is then imported; with several, its
// absence is an error naming them.
func TestImportMigPartedConfigChoice(t *testing.T) {
	one := writeMigParted(t, "  - devices: all\n    mig-enabled: true\n    mig-devices:\n      \"3g.40gb\": 2\n")
	out, notes, err := runWith(t, nil, "import", "mig-parted", "-f", one)
	if err != nil {
		t.Fatalf("one mig-config, no --config: %v (notes: %s)", err, notes)
	}
	var ml v1alpha1.MigLayout
	if err := yaml.UnmarshalStrict([]byte(out), &ml); err != nil {
		t.Fatal(err)
	}
	if ml.Name != "c" || len(ml.Spec.Rules) != 1 {
		t.Errorf("want MigLayout c with one rule:\n%s", out)
	}
	two := filepath.Join(t.TempDir(), "two.yaml")
	doc := "version: v1\nmig-configs:\n  a:\n  - devices: all\n    mig-enabled: false\n  b:\n  - devices: all\n    mig-enabled: false\n"
	if err := os.WriteFile(two, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := runWith(t, nil, "import", "mig-parted", "-f", two); err == nil || !strings.Contains(err.Error(), "a, b") {
		t.Errorf("two mig-configs, no --config: err = %v, want one naming a, b", err)
	}
}

// TestPlanStoredMigLayoutOfNewerRelease: `kubectl get miglayout NAME -o
// yaml | kubectl miglayout plan -f -` plans a MigLayout whose status
// carries a field this plugin does not know (a newer controller's), since
// plan reads only its spec; an unknown spec field is still refused.
func TestPlanStoredMigLayoutOfNewerRelease(t *testing.T) {
	stored := func(extra string) string {
		f := filepath.Join(t.TempDir(), "got.yaml")
		doc := `apiVersion: miglayout.io/v1alpha1
kind: MigLayout
metadata: {name: halves, uid: 0b5a7c1e-aaaa-bbbb-cccc-000000000001, resourceVersion: "7", generation: 3}
spec:
  nodeSelector: {matchLabels: {pool: gpu}}
  rules:
  - {name: halves, productName: A100-SXM4-80GB, profiles: {3g.40gb: 2}}
` + extra
		if err := os.WriteFile(f, []byte(doc), 0o600); err != nil {
			t.Fatal(err)
		}
		return f
	}
	out, _, err := runWith(t, cluster(t), "plan", "-f", stored("status:\n  someFieldOfANewerRelease: 1\n"))
	if err != nil {
		t.Errorf("plan refuses a stored MigLayout for a status field it never reads: %v\n%s", err, out)
	}
	if !strings.Contains(out, "3g.40gb@0,3g.40gb@4") {
		t.Errorf("plan of the stored MigLayout lacks the rule's layout:\n%s", out)
	}
	if _, _, err := runWith(t, cluster(t), "plan", "-f", stored("  someSpecFieldOfANewerRelease: 1\n")); err == nil || !strings.Contains(err.Error(), "someSpecFieldOfANewerRelease") {
		t.Errorf("plan of a MigLayout with an unknown spec field: %v, want it refused naming the field", err)
	}
}
