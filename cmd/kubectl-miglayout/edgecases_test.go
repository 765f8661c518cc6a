package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
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

// TestImportMigPartedUnquotedDeviceID: an unquoted hexadecimal device ID,
// alone or in a list, is a number to YAML; import refuses it saying to
// quote it, and imports nothing.
func TestImportMigPartedUnquotedDeviceID(t *testing.T) {
	for name, filter := range map[string]string{"alone": "0x20B710DE", "in a list": "[0x20B710DE]"} {
		t.Run(name, func(t *testing.T) {
			f := writeMigParted(t, "  - device-filter: "+filter+"\n    devices: all\n    mig-enabled: true\n    mig-devices:\n      \"3g.40gb\": 2\n")
			out, _, err := runWith(t, nil, "import", "mig-parted", "-f", f, "--config", "c")
			if err == nil || !strings.Contains(err.Error(), `quote it, device-filter: "0x20B710DE"`) {
				t.Errorf("import: %v, want an error saying to quote the ID", err)
			}
			if out != "" {
				t.Errorf("imported:\n%s", out)
			}
		})
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

// convertFile converts input written to a file and returns the output and
// the notes.
func convertFile(t *testing.T, input string) (out, notes string) {
	t.Helper()
	f := filepath.Join(t.TempDir(), "in.yaml")
	if err := os.WriteFile(f, []byte(input), 0o600); err != nil {
		t.Fatal(err)
	}
	out, notes, err := runWith(t, nil, "convert", "-f", f)
	if err != nil {
		t.Fatalf("%v (notes: %s)", err, notes)
	}
	return out, notes
}

// containerClaims are the pod claim names container name of the
// converted pod p refers to.
func containerClaims(t *testing.T, out, name string) []string {
	t.Helper()
	for _, doc := range strings.Split(out, "\n---\n") {
		var pod corev1.Pod
		if err := yaml.Unmarshal([]byte(doc), &pod); err != nil || pod.Kind != "Pod" {
			continue
		}
		for _, c := range append(pod.Spec.InitContainers, pod.Spec.Containers...) {
			if c.Name != name {
				continue
			}
			var names []string
			for _, rc := range c.Resources.Claims {
				names = append(names, rc.Name)
			}
			return names
		}
	}
	t.Fatalf("no container %s in:\n%s", name, out)
	return nil
}

// TestConvertInitContainersBesideSidecars: the device plugin hands the
// devices of ended init containers on to the containers started after
// them, and a sidecar (an init container with restartPolicy Always) keeps
// its own while it runs. An init container listed after a sidecar runs
// beside it: it shares the app container's claim, not the sidecar's; one
// listed before the sidecar may share the sidecar's.
func TestConvertInitContainersBesideSidecars(t *testing.T) {
	tests := map[string]struct {
		inits          string
		wantSetupClaim string
	}{
		"after the sidecar": {
			inits: `  - {name: proxy, image: x, restartPolicy: Always, resources: {limits: {nvidia.com/mig-1g.10gb: 1}}}
  - {name: setup, image: x, resources: {limits: {nvidia.com/mig-1g.10gb: 1}}}
`,
			wantSetupClaim: "app-mig-1g-10gb",
		},
		"before the sidecar": {
			inits: `  - {name: setup, image: x, resources: {limits: {nvidia.com/mig-1g.10gb: 1}}}
  - {name: proxy, image: x, restartPolicy: Always, resources: {limits: {nvidia.com/mig-1g.10gb: 1}}}
`,
			wantSetupClaim: "proxy-mig-1g-10gb",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			out, _ := convertFile(t, `apiVersion: v1
kind: Pod
metadata: {name: p, namespace: ml}
spec:
  initContainers:
`+tc.inits+`  containers:
  - {name: app, image: x, resources: {limits: {nvidia.com/mig-1g.10gb: 1}}}
`)
			if diff := cmp.Diff([]string{tc.wantSetupClaim}, containerClaims(t, out, "setup")); diff != "" {
				t.Errorf("init container setup's claims (-want +got):\n%s\n%s", diff, out)
			}
			if n := strings.Count(out, "kind: ResourceClaimTemplate"); n != 2 {
				t.Errorf("%d ResourceClaimTemplates, want 2 (the sidecar's and the app's):\n%s", n, out)
			}
		})
	}
}

// TestConvertReadsOnlyLists: a custom resource whose kind ends in List is
// an object of its own, kept in the output; a List's items are converted.
func TestConvertReadsOnlyLists(t *testing.T) {
	out, _ := convertFile(t, `apiVersion: networking.example.com/v1
kind: IPAllowList
metadata: {name: allow}
spec: {cidrs: [10.0.0.0/8]}
---
apiVersion: v1
kind: PodList
items:
- apiVersion: v1
  kind: Pod
  metadata: {name: p}
  spec:
    containers:
    - {name: c, image: x, resources: {limits: {nvidia.com/gpu: 1}}}
`)
	for _, want := range []string{"kind: IPAllowList", "10.0.0.0/8", "resourceClaimTemplateName: p-gpu"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// TestConvertNotesWorkloadsItLeaves: a workload of a kind convert does not
// rewrite (a Kubeflow PyTorchJob; a Volcano Job, not batch/v1's) that asks
// for device-plugin GPUs is passed through as it is, and a note says so.
func TestConvertNotesWorkloadsItLeaves(t *testing.T) {
	tests := map[string]string{
		"PyTorchJob": `apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata: {name: train}
spec:
  pytorchReplicaSpecs:
    Master:
      template:
        spec:
          containers:
          - {name: pytorch, image: x, resources: {limits: {nvidia.com/gpu: 1}}}
`,
		"Volcano Job": `apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata: {name: train}
spec:
  template:
    spec:
      containers:
      - {name: c, image: x, resources: {limits: {nvidia.com/mig-3g.40gb: 1}}}
`,
	}
	for name, input := range tests {
		t.Run(name, func(t *testing.T) {
			out, notes := convertFile(t, input)
			if strings.Contains(out, "ResourceClaimTemplate") {
				t.Errorf("rewrote a kind it does not know:\n%s", out)
			}
			if !strings.Contains(notes, "train: left as it is, though it asks for nvidia.com/") {
				t.Errorf("no note on the workload left asking for device-plugin GPUs; notes:\n%s", notes)
			}
		})
	}
}

// TestConvertKeepsLargeIntegers: whole numbers above 2^53 come out as
// written, not rounded through a float64.
func TestConvertKeepsLargeIntegers(t *testing.T) {
	out, _ := convertFile(t, `apiVersion: v1
kind: Pod
metadata: {name: p}
spec:
  activeDeadlineSeconds: 9007199254740993
  containers:
  - {name: c, image: x, resources: {limits: {nvidia.com/gpu: 1}}}
`)
	if !strings.Contains(out, "activeDeadlineSeconds: 9007199254740993") {
		t.Errorf("activeDeadlineSeconds changed:\n%s", out)
	}
}

// TestConvertRefusesMoreThanAClaimHolds: a container asking for more
// devices than one ResourceClaim's allocation holds (32) is refused with a
// clear error; the claim would be stored and never allocated.
func TestConvertRefusesMoreThanAClaimHolds(t *testing.T) {
	f := filepath.Join(t.TempDir(), "in.yaml")
	if err := os.WriteFile(f, []byte(`apiVersion: v1
kind: Pod
metadata: {name: p}
spec:
  containers:
  - {name: c, image: x, resources: {limits: {nvidia.com/mig-1g.10gb: 40}}}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	out, _, err := runWith(t, nil, "convert", "-f", f)
	if err == nil || !strings.Contains(err.Error(), "at most 32 devices") {
		t.Errorf("converted a claim of 40 devices (error %v):\n%s", err, out)
	}
}

// TestKubectlConnectionFlags: kubectl's connection flags (--context,
// --as, --server and the like) choose the cluster and identity, as they do
// for kubectl itself.
func TestKubectlConnectionFlags(t *testing.T) {
	kubeconfig := filepath.Join(t.TempDir(), "config")
	if err := os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters:
- {name: a, cluster: {server: "https://a.example.com"}}
- {name: b, cluster: {server: "https://b.example.com"}}
users:
- {name: u, user: {token: t}}
contexts:
- {name: a, context: {cluster: a, user: u}}
- {name: b, context: {cluster: b, user: u}}
current-context: a
`), 0o600); err != nil {
		t.Fatal(err)
	}
	e := &env{}
	cmd := newRootCommandEnv(e)
	if err := cmd.PersistentFlags().Parse([]string{"--kubeconfig", kubeconfig, "--context", "b", "--as", "alice", "--as-group", "ops", "--request-timeout", "5s"}); err != nil {
		t.Fatal(err)
	}
	cfg, err := e.restConfig()
	if err != nil {
		t.Fatal(err)
	}
	got := []any{cfg.Host, cfg.Impersonate.UserName, cfg.Impersonate.Groups, cfg.Timeout}
	want := []any{"https://b.example.com", "alice", []string{"ops"}, 5 * time.Second}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("connection (-want +got):\n%s", diff)
	}
}

// TestConvertInitContainerAsksForMore: an init container asking for more
// devices than the app container (3 MIG devices, then 1) held 3 under the
// device plugin, the app container reusing one of them: the app
// container's claim holds 3 in two requests, the app container uses the
// first (1), the init container the whole claim; the pod asks for 3, not
// 4.
func TestConvertInitContainerAsksForMore(t *testing.T) {
	out, _ := convertFile(t, `apiVersion: v1
kind: Pod
metadata: {name: p, namespace: ml}
spec:
  initContainers:
  - {name: load, image: x, resources: {limits: {nvidia.com/mig-1g.10gb: 3}}}
  containers:
  - {name: app, image: x, resources: {limits: {nvidia.com/mig-1g.10gb: 1}}}
`)
	docs := strings.Split(out, "\n---\n")
	if len(docs) != 2 {
		t.Fatalf("%d documents, want a ResourceClaimTemplate and the Pod:\n%s", len(docs), out)
	}
	var tmpl resourceapi.ResourceClaimTemplate
	var pod corev1.Pod
	if err := yaml.UnmarshalStrict([]byte(docs[0]), &tmpl); err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict([]byte(docs[1]), &pod); err != nil {
		t.Fatal(err)
	}
	var requests []string
	for _, r := range tmpl.Spec.Spec.Devices.Requests {
		count := int64(1)
		if r.Exactly.Count > 0 {
			count = r.Exactly.Count
		}
		requests = append(requests, fmt.Sprintf("%s %d", r.Name, count))
	}
	uses := map[string][]corev1.ResourceClaim{}
	for _, c := range append(pod.Spec.InitContainers, pod.Spec.Containers...) {
		uses[c.Name] = c.Resources.Claims
	}
	want := []any{[]string{"app-mig-1g-10gb 1", "app-mig-1g-10gb-more 2"},
		map[string][]corev1.ResourceClaim{"load": {{Name: "app-mig-1g-10gb"}}, "app": {{Name: "app-mig-1g-10gb", Request: "app-mig-1g-10gb"}}}}
	if diff := cmp.Diff(want, []any{requests, uses}); diff != "" {
		t.Errorf("requests and uses (-want +got):\n%s\n%s", diff, out)
	}
}

// TestConvertInitContainerCoveredByTwoClaims: an init container asking for
// 3 MIG devices before a sidecar and an app container asking for 1 each:
// under the device plugin the pod held 3 (the sidecar and the app container
// reuse two of the init container's). The init container shares both
// claims, the first made 1 larger: the pod's claims hold 3 devices, not 5.
func TestConvertInitContainerCoveredByTwoClaims(t *testing.T) {
	out, _ := convertFile(t, `apiVersion: v1
kind: Pod
metadata: {name: p, namespace: ml}
spec:
  initContainers:
  - {name: load, image: x, resources: {limits: {nvidia.com/mig-1g.10gb: 3}}}
  - {name: proxy, image: x, restartPolicy: Always, resources: {limits: {nvidia.com/mig-1g.10gb: 1}}}
  containers:
  - {name: app, image: x, resources: {limits: {nvidia.com/mig-1g.10gb: 1}}}
`)
	var devices int64
	for _, doc := range strings.Split(out, "\n---\n") {
		var tmpl resourceapi.ResourceClaimTemplate
		if err := yaml.Unmarshal([]byte(doc), &tmpl); err == nil && tmpl.Kind == "ResourceClaimTemplate" {
			for _, r := range tmpl.Spec.Spec.Devices.Requests {
				devices += max(r.Exactly.Count, 1)
			}
		}
	}
	load := containerClaims(t, out, "load")
	if devices != 3 || len(load) != 2 {
		t.Errorf("the pod's claims hold %d devices (want 3), the init container uses %v (want the two claims):\n%s", devices, load, out)
	}
}

// TestCheckFixKeepsClashingExactly: a request with deviceClassName both on
// the request (v1beta1's place) and under exactly:, with other values, is
// reported without a fix: --fix leaves both for the user to choose, rather
// than overwrite exactly's.
func TestCheckFixKeepsClashingExactly(t *testing.T) {
	f := filepath.Join(t.TempDir(), "claim.yaml")
	doc := "apiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata: {name: c, namespace: ns}\nspec:\n  devices:\n    requests:\n" +
		"    - name: gpu\n      deviceClassName: mig.miglayout.io\n      exactly:\n        deviceClassName: gpu.miglayout.io\n"
	if err := os.WriteFile(f, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	fixed, report, err := runWith(t, nil, "check", "--offline", "--fix", "-f", f)
	if err == nil || !strings.Contains(report, "exactly: gives other values for deviceClassName, so no fix is offered") {
		t.Errorf("check --fix: %v, report:\n%s", err, report)
	}
	if !strings.Contains(fixed, "deviceClassName: mig.miglayout.io") || !strings.Contains(fixed, "deviceClassName: gpu.miglayout.io") {
		t.Errorf("--fix dropped one of the two values:\n%s", fixed)
	}
}
