package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// convertPods are the Pods of convert's output, and the number of
// ResourceClaimTemplates in it.
func convertPods(t *testing.T, out string) (pods []corev1.Pod, templates int) {
	t.Helper()
	for _, doc := range strings.Split(out, "\n---\n") {
		var pod corev1.Pod
		if err := yaml.Unmarshal([]byte(doc), &pod); err != nil {
			t.Fatal(err)
		}
		switch pod.Kind {
		case "Pod":
			pods = append(pods, pod)
		case "ResourceClaimTemplate":
			templates++
		}
	}
	return pods, templates
}

// TestConvertClaimNamesFitALabel: a pod claim name is a DNS label (at most
// 63 characters): one of exactly 63 is kept as it is, a longer one is cut
// to 63 with a hash, and the API server takes both.
func TestConvertClaimNamesFitALabel(t *testing.T) {
	c59 := strings.Repeat("a", 58) + "b" // c59-gpu is 63 characters
	c63 := strings.Repeat("z", 63)
	out, _ := convertFile(t, fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: p, namespace: ml}
spec:
  containers:
  - {name: %[1]s, image: x, resources: {limits: {nvidia.com/gpu: 1}}}
  - {name: %[2]s, image: x, resources: {limits: {nvidia.com/gpu: 1}}}
  - {name: %[3]s, image: x, resources: {limits: {nvidia.com/gpu: 1}}}
`, c59, c63, c63[:62]+"y"))
	if got := containerClaims(t, out, c59); !cmp.Equal(got, []string{c59 + "-gpu"}) {
		t.Errorf("container of a 63-character claim name uses %v, want [%s-gpu]", got, c59)
	}
	pods, _ := convertPods(t, out)
	for _, rc := range pods[0].Spec.ResourceClaims {
		if len(rc.Name) > 63 {
			t.Errorf("pod claim %s: %d characters, a DNS label holds 63", rc.Name, len(rc.Name))
		}
	}
}

// TestConvertRefusesBadCounts: a device count that is no whole number, or
// no quantity at all, is an error, not a request silently dropped.
func TestConvertRefusesBadCounts(t *testing.T) {
	for _, n := range []string{`"500m"`, `"0.5"`, `lots`} {
		f := filepath.Join(t.TempDir(), "in.yaml")
		if err := os.WriteFile(f, []byte("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n  - {name: c, image: x, resources: {limits: {nvidia.com/gpu: "+n+"}}}\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		out, _, err := runWith(t, nil, "convert", "-f", f)
		if err == nil {
			t.Errorf("nvidia.com/gpu: %s: converted without an error:\n%s", n, out)
		}
	}
}

// TestConvertLeavesOtherPodsAlone: a pod that asks for no device-plugin
// resource comes out as it went in (no resourceClaims added).
func TestConvertLeavesOtherPodsAlone(t *testing.T) {
	in := "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\nspec:\n  containers:\n  - image: nginx\n    name: c\n"
	out, _ := convertFile(t, in)
	if diff := cmp.Diff(in, out); diff != "" {
		t.Errorf("pod without GPUs changed (-in +out):\n%s", diff)
	}
}

// TestConvertKeepsExistingPodClaims: a pod that already has a claim entry
// named as convert would name its new one gets a new, distinct entry (the
// API server refuses two entries of one name).
func TestConvertKeepsExistingPodClaims(t *testing.T) {
	out, _ := convertFile(t, `apiVersion: v1
kind: Pod
metadata: {name: p, namespace: ml}
spec:
  resourceClaims:
  - {name: gpu, resourceClaimName: shared-nic}
  containers:
  - name: c
    image: x
    resources:
      claims: [{name: gpu}]
      limits: {nvidia.com/gpu: 1}
`)
	pods, _ := convertPods(t, out)
	var names []string
	for _, rc := range pods[0].Spec.ResourceClaims {
		names = append(names, rc.Name)
	}
	if diff := cmp.Diff([]string{"gpu", "gpu-x"}, names); diff != "" {
		t.Errorf("pod claims (-want +got):\n%s", diff)
	}
}

// TestConvertInitContainersAfterAGrownClaim: an app container asks for 1
// GPU, init containers for 3 and 2. The first grows the app claim to 3;
// the second, run after it, fits in that claim: the pod needs 3 GPUs, one
// claim, not a second one of 2.
func TestConvertInitContainersAfterAGrownClaim(t *testing.T) {
	out, _ := convertFile(t, `apiVersion: v1
kind: Pod
metadata: {name: p, namespace: ml}
spec:
  initContainers:
  - {name: big, image: x, resources: {limits: {nvidia.com/gpu: 3}}}
  - {name: small, image: x, resources: {limits: {nvidia.com/gpu: 2}}}
  containers:
  - {name: app, image: x, resources: {limits: {nvidia.com/gpu: 1}}}
`)
	if _, n := convertPods(t, out); n != 1 {
		t.Errorf("%d ResourceClaimTemplates, want 1:\n%s", n, out)
	}
	if got := containerClaims(t, out, "small"); len(got) != 1 {
		t.Errorf("init container small uses claims %v, want the one grown claim", got)
	}
}

// TestConvertInitContainerSharesNoMoreThanItAsks: three app containers of
// one GPU each; an init container asking for 2 uses two of their claims,
// not all three (it would see 3 GPUs).
func TestConvertInitContainerSharesNoMoreThanItAsks(t *testing.T) {
	out, _ := convertFile(t, `apiVersion: v1
kind: Pod
metadata: {name: p, namespace: ml}
spec:
  initContainers:
  - {name: prep, image: x, resources: {limits: {nvidia.com/gpu: 2}}}
  containers:
  - {name: a, image: x, resources: {limits: {nvidia.com/gpu: 1}}}
  - {name: b, image: x, resources: {limits: {nvidia.com/gpu: 1}}}
  - {name: c, image: x, resources: {limits: {nvidia.com/gpu: 1}}}
`)
	if diff := cmp.Diff([]string{"a-gpu", "b-gpu"}, containerClaims(t, out, "prep")); diff != "" {
		t.Errorf("claims of init container prep (-want +got):\n%s", diff)
	}
}

func checkOffline(t *testing.T, manifest string, extra ...string) (string, error) {
	t.Helper()
	f := filepath.Join(t.TempDir(), "in.yaml")
	if err := os.WriteFile(f, []byte(manifest), 0o600); err != nil {
		t.Fatal(err)
	}
	out, _, err := runWith(t, nil, append([]string{"check", "--offline", "-f", f}, extra...)...)
	return out, err
}

// checkFindingPaths checks manifest offline and returns the report, the
// paths of its findings in order, and the command's error.
func checkFindingPaths(t *testing.T, manifest string) (string, []string, error) {
	t.Helper()
	out, err := checkOffline(t, manifest)
	var paths []string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "  ") && !strings.HasPrefix(l, "    ") {
			paths = append(paths, strings.TrimSpace(l))
		}
	}
	return out, paths, err
}

// TestCheckFindings: each manifest is checked offline; the findings'
// paths must be exactly those listed (none for a correct manifest).
func TestCheckFindings(t *testing.T) {
	claim := func(requests string) string {
		return "apiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata: {name: r}\nspec:\n  devices:\n    requests:\n" + requests
	}
	for name, tc := range map[string]struct {
		manifest string
		paths    []string
	}{
		"a DeviceClass of the manifests is known": {
			manifest: "apiVersion: resource.k8s.io/v1\nkind: DeviceClass\nmetadata: {name: my.class}\n---\n" +
				claim("    - name: g\n      exactly: {deviceClassName: my.class}\n"),
		},
		"allocationMode All is right": {
			manifest: claim("    - name: g\n      exactly: {deviceClassName: mig.miglayout.io, allocationMode: All}\n"),
		},
		"capacity is not an attribute": {
			manifest: claim("    - name: g\n      exactly:\n        deviceClassName: mig.miglayout.io\n        selectors:\n        - cel: {expression: \"device.capacity['mig.miglayout.io'].multiprocessors.compareTo(quantity('14')) >= 0\"}\n"),
		},
		"an attribute is no capacity": {
			manifest: claim("    - name: g\n      exactly:\n        deviceClassName: mig.miglayout.io\n        selectors:\n        - cel: {expression: \"device.capacity['mig.miglayout.io'].profile == '1g.10gb'\"}\n"),
			paths:    []string{"spec.devices.requests[0].exactly.selectors[0].cel.expression"},
		},
		"an attribute read twice is one finding": {
			manifest: claim("    - name: g\n      exactly:\n        deviceClassName: mig.miglayout.io\n        selectors:\n        - cel: {expression: \"device.attributes['mig.miglayout.io'].profil == '1g.10gb' || device.attributes['mig.miglayout.io'].profil == '2g.20gb'\"}\n"),
			paths:    []string{"spec.devices.requests[0].exactly.selectors[0].cel.expression"},
		},
		"firstAvailable subrequests": {
			manifest: claim("    - name: g\n      firstAvailable:\n      - {name: a, deviceClassName: mig.miglayout.io}\n      - {name: b, deviceClassName: gpu.example.com}\n"),
			paths:    []string{"spec.devices.requests[0].firstAvailable[1].deviceClassName"},
		},
		"flat tolerations": {
			manifest: claim("    - name: g\n      exactly: {deviceClassName: mig.miglayout.io}\n      tolerations: [{operator: Exists}]\n"),
			paths:    []string{"spec.devices.requests[0]"},
		},
		"flat fields that clash are still checked": {
			manifest: claim("    - name: g\n      deviceClassName: gpu.example.com\n      exactly: {deviceClassName: mig.miglayout.io}\n"),
			paths:    []string{"spec.devices.requests[0]", "spec.devices.requests[0].deviceClassName"},
		},
		"a JobSet's pod template": {
			manifest: "apiVersion: jobset.x-k8s.io/v1alpha2\nkind: JobSet\nmetadata: {name: js}\nspec:\n  replicatedJobs:\n  - name: w\n    template:\n      spec:\n        template:\n          spec:\n" +
				"            resourceClaims:\n            - name: g\n              source: {resourceClaimTemplateName: t}\n            containers:\n            - {name: c, image: x, resources: {claims: [{name: g}]}}\n",
			paths: []string{"spec.replicatedJobs[0].template.spec.template.spec.resourceClaims[0].source"},
		},
		"a LeaderWorkerSet's two templates": {
			manifest: "apiVersion: leaderworkerset.x-k8s.io/v1\nkind: LeaderWorkerSet\nmetadata: {name: lws}\nspec:\n  leaderWorkerTemplate:\n" +
				"    leaderTemplate:\n      spec:\n        resourceClaims: [{name: g, resourceClaimTemplateName: t}]\n        containers: [{name: c, image: x, resources: {claims: [{name: g}]}}]\n" +
				"    workerTemplate:\n      spec:\n        resourceClaims: [{name: g, resourceClaimTemplateName: t}]\n        resources: {claims: [{name: g}]}\n        containers: [{name: c, image: x}]\n",
			paths: []string{"spec.leaderWorkerTemplate.workerTemplate.spec.resources.claims"},
		},
		"a Volcano Job, not batch's": {
			manifest: "apiVersion: batch.volcano.sh/v1alpha1\nkind: Job\nmetadata: {name: vj}\nspec:\n  tasks:\n  - name: t\n    template:\n      spec:\n" +
				"        resourceClaims: [{name: g, resourceClaimTemplateName: t}]\n        containers: [{name: c, image: x, resources: {claims: [{name: h}]}}]\n",
			paths: []string{"spec.tasks[0].template.spec.containers[0].resources.claims[0].name"},
		},
		"a ConfigMap": {
			manifest: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm}\ndata: {containers: x}\n",
		},
		"classic DRA": {
			manifest: "apiVersion: resource.k8s.io/v1alpha2\nkind: ResourceClaimTemplate\nmetadata: {name: t}\nspec:\n  spec:\n    resourceClassName: gpu.nvidia.com\n",
			paths:    []string{"apiVersion", "spec.spec.resourceClassName"},
		},
	} {
		t.Run(name, func(t *testing.T) {
			out, paths, err := checkFindingPaths(t, tc.manifest)
			if diff := cmp.Diff(tc.paths, paths); diff != "" {
				t.Errorf("findings (-want +got):\n%s\n%s", diff, out)
			}
			if (err != nil) != (len(tc.paths) > 0) {
				t.Errorf("check: %v, with %d problems", err, len(tc.paths))
			}
		})
	}
}

// TestCheckFixesNestedPodTemplate: --fix corrects a seed mistake in the pod
// template of a kind check does not know by name (a JobSet), in place.
func TestCheckFixesNestedPodTemplate(t *testing.T) {
	f := filepath.Join(t.TempDir(), "in.yaml")
	if err := os.WriteFile(f, []byte("apiVersion: jobset.x-k8s.io/v1alpha2\nkind: JobSet\nmetadata: {name: js}\nspec:\n  replicatedJobs:\n  - name: w\n    template:\n      spec:\n        template:\n          spec:\n"+
		"            resourceClaims:\n            - name: g\n              source: {resourceClaimTemplateName: t}\n            containers:\n            - {name: c, image: x, resources: {claims: [{name: g}]}}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, report, _ := runWith(t, nil, "check", "--offline", "--fix", "-f", f) // exits non-zero: a problem was found
	if !strings.Contains(report, "spec.replicatedJobs[0].template.spec.template.spec.resourceClaims[0].source") {
		t.Errorf("report does not name the problem's path:\n%s", report)
	}
	var fixed map[string]any
	if err := yaml.Unmarshal([]byte(out), &fixed); err != nil {
		t.Fatal(err)
	}
	rc := mapAt(fixed, "spec", "replicatedJobs[0]", "template", "spec", "template", "spec", "resourceClaims[0]")
	if diff := cmp.Diff(map[string]any{"name": "g", "resourceClaimTemplateName": "t"}, rc); diff != "" {
		t.Errorf("fixed resourceClaims[0] (-want +got):\n%s\n%s", diff, out)
	}
}

// TestCheckFixFlatRequestOfEqualValues: a flat field equal to its value
// under exactly is no clash: the fix is offered and drops it.
func TestCheckFixFlatRequestOfEqualValues(t *testing.T) {
	f := filepath.Join(t.TempDir(), "in.yaml")
	if err := os.WriteFile(f, []byte("apiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata: {name: r}\nspec:\n  devices:\n    requests:\n    - name: g\n      deviceClassName: mig.miglayout.io\n      exactly: {deviceClassName: mig.miglayout.io}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, report, _ := runWith(t, nil, "check", "--offline", "--fix", "-f", f)
	if strings.Contains(report, "no fix is offered") || strings.Contains(out, "\n      deviceClassName") {
		t.Errorf("equal values reported as a clash or left on the request:\n%s\n%s", report, out)
	}
}

func importRules(t *testing.T, entries string) ([]v1alpha1.LayoutRule, string, error) {
	t.Helper()
	out, notes, err := runWith(t, nil, "import", "mig-parted", "-f", writeMigParted(t, entries), "--config", "c")
	if err != nil {
		return nil, notes, err
	}
	var ml v1alpha1.MigLayout
	if err := yaml.UnmarshalStrict([]byte(out), &ml); err != nil {
		t.Fatal(err)
	}
	return ml.Spec.Rules, notes, nil
}

// TestImportMigPartedRefuses: mig-parted entries that no MigLayout can
// mean are refused, not imported into another layout or one the API
// server refuses.
func TestImportMigPartedRefuses(t *testing.T) {
	entry := func(devices, migDevices string) string {
		return "  - device-filter: \"0x20B010DE\"\n    devices: " + devices + "\n    mig-enabled: true\n    mig-devices: {" + migDevices + "}\n"
	}
	for name, entries := range map[string]string{
		"negative count":  entry("all", `"1g.5gb": -1`),
		"eight devices":   entry("all", `"1g.5gb": 8`),
		"GPU index 64":    entry("[64]", `"3g.20gb": 2`),
		"seventeen rules": strings.Repeat(entry("all", `"3g.20gb": 2`), 17),
		// Without device-filter, as the API server's CEL rules refuse.
		"eight compute slices, any model": "  - devices: all\n    mig-enabled: true\n    mig-devices: {\"1g.10gb\": 6, \"2g.20gb\": 1}\n",
		"two +me devices, any model":      "  - devices: all\n    mig-enabled: true\n    mig-devices: {\"1g.10gb+me\": 2}\n",
	} {
		t.Run(name, func(t *testing.T) {
			if rules, notes, err := importRules(t, entries); err == nil {
				t.Errorf("imported %d rules (notes: %s)", len(rules), notes)
			}
		})
	}
}

// TestImportMigPartedDeduplicates: a GPU index or a device ID named twice
// is one GPU, one model: one rule, no index twice.
func TestImportMigPartedDeduplicates(t *testing.T) {
	rules, notes, err := importRules(t, "  - device-filter: [\"0x20B010DE\", \"0x20B010DE\"]\n    devices: [0, 0, 1]\n    mig-enabled: true\n    mig-devices: {\"3g.20gb\": 2}\n")
	if err != nil {
		t.Fatalf("%v (notes: %s)", err, notes)
	}
	if len(rules) != 1 || !cmp.Equal(rules[0].GPUIndices, []int32{0, 1}) {
		t.Errorf("rules %+v, want one for GPUs [0 1]", rules)
	}
}

// TestImportMigPartedUnknownFilterOnly: an entry whose device-filter names
// only GPUs the catalog does not know is left out, not turned into a rule
// for every GPU.
func TestImportMigPartedUnknownFilterOnly(t *testing.T) {
	rules, notes, err := importRules(t, "  - device-filter: \"0x123410DE\"\n    devices: all\n    mig-enabled: true\n    mig-devices: {\"1g.5gb\": 7}\n  - device-filter: \"0x20B010DE\"\n    devices: all\n    mig-enabled: true\n    mig-devices: {\"3g.20gb\": 2}\n")
	if err != nil {
		t.Fatalf("%v (notes: %s)", err, notes)
	}
	for _, r := range rules {
		if r.ProductName == "" {
			t.Errorf("a rule for every GPU: %+v", r)
		}
	}
}

// TestConvertGrowsAClaimAgain: init container a (4 GPUs) runs before
// sidecar s, init container b (4 GPUs) after it, beside it; app container
// x asks for 2. a grows x's claim to 3 (with s's 1); b, which cannot use
// s's, grows x's claim to 4 in the same second request (two requests of
// one name the API server refuses), so the pod holds 5 GPUs, as
// Kubernetes counts it (b with s), not 8.
func TestConvertGrowsAClaimAgain(t *testing.T) {
	out, _ := convertFile(t, `apiVersion: v1
kind: Pod
metadata: {name: p, namespace: ml}
spec:
  initContainers:
  - {name: a, image: x, resources: {limits: {nvidia.com/gpu: 4}}}
  - {name: s, image: x, restartPolicy: Always, resources: {limits: {nvidia.com/gpu: 1}}}
  - {name: b, image: x, resources: {limits: {nvidia.com/gpu: 4}}}
  containers:
  - {name: x, image: x, resources: {limits: {nvidia.com/gpu: 2}}}
`)
	requests := map[string]map[string]int64{}
	for name, tmpl := range parseConverted(t, out).templates {
		requests[name] = map[string]int64{}
		for _, r := range tmpl.Spec.Spec.Devices.Requests {
			requests[name][r.Name] = max(1, r.Exactly.Count)
		}
	}
	want := map[string]map[string]int64{
		"p-x-gpu": {"x-gpu": 2, "x-gpu-more": 2},
		"p-s-gpu": {"s-gpu": 1},
	}
	if diff := cmp.Diff(want, requests); diff != "" {
		t.Errorf("requests of the ResourceClaimTemplates (-want +got):\n%s\n%s", diff, out)
	}
	for container, want := range map[string][]string{"a": {"x-gpu", "s-gpu"}, "b": {"x-gpu"}} {
		if diff := cmp.Diff(want, containerClaims(t, out, container)); diff != "" {
			t.Errorf("claims of init container %s (-want +got):\n%s", container, diff)
		}
	}
}

// TestConvertCountBounds: a container asking for 0 devices gets no claim
// (a claim of count 0 is refused by the API server), one asking for 32
// (AllocationResultsMaxSize) gets one, one asking for 33 is refused.
func TestConvertCountBounds(t *testing.T) {
	pod := func(n int) string {
		return fmt.Sprintf("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n  - {name: c, image: x, resources: {limits: {nvidia.com/gpu: %d}}}\n", n)
	}
	for n, templates := range map[int]int{0: 0, 32: 1, 33: -1} {
		f := filepath.Join(t.TempDir(), "in.yaml")
		if err := os.WriteFile(f, []byte(pod(n)), 0o600); err != nil {
			t.Fatal(err)
		}
		out, _, err := runWith(t, nil, "convert", "-f", f)
		if templates < 0 {
			if err == nil {
				t.Errorf("nvidia.com/gpu: %d: converted, want an error:\n%s", n, out)
			}
			continue
		}
		if err != nil {
			t.Errorf("nvidia.com/gpu: %d: %v", n, err)
			continue
		}
		if _, got := convertPods(t, out); got != templates {
			t.Errorf("nvidia.com/gpu: %d: %d ResourceClaimTemplates, want %d:\n%s", n, got, templates, out)
		}
	}
}
