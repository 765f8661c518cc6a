package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/miglayout/miglayout/api/v1alpha1"

	"github.com/miglayout/miglayout/pkg/mig"
	migslices "github.com/miglayout/miglayout/pkg/slices"
)

// TestPlanTwoAutoMigLayoutsOfOneFile: two Auto MigLayouts applied together
// on nodes no MigLayout selected yet (a first install) are one snapshot, as
// for the controller: a pod only pool b can serve is served there, and no
// section says no Auto node can serve it.
func TestPlanTwoAutoMigLayoutsOfOneFile(t *testing.T) {
	// 3g.20gb is a profile of the A100-40GB only.
	out := planTwoAutoMigLayouts(t, "3g.20gb")
	if !strings.Contains(out, "serves:   ml/trainer") {
		t.Fatalf("the pod is not served at all:\n%s", out)
	}
	if strings.Contains(out, "Pods no Auto node can serve") {
		t.Errorf("plan says no Auto node can serve a pod the controller serves on pool b (the MigLayouts of the file are planned one by one):\n%s", out)
	}
}

// TestPlanTwoAutoMigLayoutsServeAPodOnce: as above, a pod both pools can
// serve (1g.10gb) is served once, one GPU changing, as the controller does.
func TestPlanTwoAutoMigLayoutsServeAPodOnce(t *testing.T) {
	out := planTwoAutoMigLayouts(t, "1g.10gb")
	if n := strings.Count(out, "serves:   ml/trainer"); n != 1 {
		t.Errorf("the one pending pod is served %d times (one GPU change per MigLayout section):\n%s", n, out)
	}
}

// planTwoAutoMigLayouts plans two Auto MigLayouts of one file, pool-a over
// an H100 node and pool-b over an A100-40GB node, neither selected by a
// MigLayout yet, with one pending pod asking for a device of profile.
func planTwoAutoMigLayouts(t *testing.T, profile string) string {
	t.Helper()
	cat := mig.DefaultCatalog()
	published := func(node, model, profile string) client.Object {
		m, err := cat.Model(model)
		if err != nil {
			t.Fatal(err)
		}
		g := migslices.PlannedGPU(m, 0)
		d, err := migslices.PlannedMIG(g, mig.Device{Profile: profile, Start: 0})
		if err != nil {
			t.Fatal(err)
		}
		d.UUID = "MIG-" + node
		return slice(node, migslices.DefaultDriverName, migslices.MIGDevice(g, d))
	}
	claim, pod := pending("trainer", "claim", "device.attributes['mig.miglayout.io'].profile == '"+profile+"'", 1000)
	objs := []client.Object{
		node("h100-node", map[string]string{"pool": "a"}), node("a100-node", map[string]string{"pool": "b"}),
		published("h100-node", "H100-SXM5-80GB", "7g.80gb"), published("a100-node", "A100-SXM4-40GB", "7g.40gb"),
		migClass(), claim, pod,
	}
	return planAutoPools(t, objs, "")
}

// planAutoPools plans, over objs, one file of two Auto MigLayouts: pool-a
// selecting the nodes labelled pool=a, with policyA (YAML lines under
// spec.policy, each indented by four spaces; none where empty), and pool-b
// selecting pool=b. It returns plan's output.
func planAutoPools(t *testing.T, objs []client.Object, policyA string) string {
	t.Helper()
	a := autoMigLayoutDoc("pool-a", "a")
	if policyA != "" {
		a += "  policy:\n" + policyA
	}
	out, _, err := runWith(t, objs, "plan", "-f", manifestFile(t, a, autoMigLayoutDoc("pool-b", "b")))
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// planOfEachPool is planAutoPools's output cut in two: what is told under
// pool-a, and what under pool-b.
func planOfEachPool(t *testing.T, objs []client.Object, policyA string) (poolA, poolB string) {
	t.Helper()
	out := planAutoPools(t, objs, policyA)
	poolA, poolB, ok := strings.Cut(out, "MigLayout pool-b (Auto)")
	if !ok {
		t.Fatalf("plan lacks MigLayout pool-b:\n%s", out)
	}
	return poolA, poolB
}

// TestCheckFixKeepsV1beta1ClaimsValid: in resource.k8s.io/v1beta1 a
// request's deviceClassName, allocationMode and count sit directly on it
// (v1beta1 has no exactly:). check says so, and --fix makes the claim a
// resource.k8s.io/v1 one with the fields under exactly: (never exactly:
// under v1beta1, which the API server refuses).
func TestCheckFixKeepsV1beta1ClaimsValid(t *testing.T) {
	input := `apiVersion: resource.k8s.io/v1beta1
kind: ResourceClaim
metadata: {name: half, namespace: ml}
spec:
  devices:
    requests:
    - name: half
      deviceClassName: mig.miglayout.io
      allocationMode: ExactCount
      count: 1
`
	cmd := newRootCommandEnv(&env{stdin: strings.NewReader(input)})
	var out, errOut strings.Builder
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	cmd.SetArgs([]string{"check", "--offline", "--fix", "-f", "-"})
	_ = cmd.Execute()
	if strings.Contains(out.String(), "resource.k8s.io/v1beta1") || !strings.Contains(out.String(), "apiVersion: resource.k8s.io/v1\n") || !strings.Contains(out.String(), "exactly:") {
		t.Errorf("check --fix did not make the v1beta1 claim a v1 one with exactly:\nreport:\n%s\noutput:\n%s", errOut.String(), out.String())
	}
	if !strings.Contains(errOut.String(), "resource.k8s.io/v1beta1 object, which is right for that version") {
		t.Errorf("report does not say the fields are right for v1beta1:\n%s", errOut.String())
	}
}

// TestImportMigPartedAllEnabled: mig-parted's stock all-enabled entry
// (mig-enabled: true, mig-devices: {}: MIG on, every device destroyed) is
// what a MigLayout rule says with profiles: {} (the API's "MIG on with no
// device", which the CRD admits).
func TestImportMigPartedAllEnabled(t *testing.T) {
	f := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(f, []byte("version: v1\nmig-configs:\n  all-enabled:\n  - devices: all\n    mig-enabled: true\n    mig-devices: {}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, _, err := runWith(t, nil, "import", "mig-parted", "-f", f, "--config", "all-enabled")
	if err != nil {
		t.Fatalf("import refuses mig-parted's all-enabled: %v", err)
	}
	var ml v1alpha1.MigLayout
	if err := yaml.UnmarshalStrict([]byte(out), &ml); err != nil {
		t.Fatal(err)
	}
	if len(ml.Spec.Rules) != 1 || ml.Spec.Rules[0].Profiles == nil || len(ml.Spec.Rules[0].Profiles) != 0 || ml.Spec.Rules[0].Layout != nil {
		t.Errorf("want one rule with profiles: {} (MIG on, no device):\n%s", out)
	}
}

// TestConvertInitContainers: under the device plugin the kubelet hands an
// init container's devices on to the app containers (a pod whose init and
// app containers each ask nvidia.com/gpu: 1 needs one GPU): the converted
// init container uses the app container's claim, made larger for one that
// asks for more (TestConvertInitContainerAsksForMore). A sidecar
// (restartPolicy Always, running beside them) keeps a claim of its own.
func TestConvertInitContainers(t *testing.T) {
	for name, tc := range map[string]struct {
		init      string
		templates int
	}{
		"reuses the app container's GPU": {"{name: warmup, image: x, resources: {limits: {nvidia.com/gpu: 1}}}", 1},
		"asks for more":                  {"{name: warmup, image: x, resources: {limits: {nvidia.com/gpu: 2}}}", 1},
		"sidecar":                        {"{name: warmup, image: x, restartPolicy: Always, resources: {limits: {nvidia.com/gpu: 1}}}", 2},
	} {
		t.Run(name, func(t *testing.T) {
			out := convertStdin(t, `
apiVersion: v1
kind: Pod
metadata: {name: app, namespace: ml}
spec:
  initContainers:
  - `+tc.init+`
  containers:
  - {name: main, image: x, resources: {limits: {nvidia.com/gpu: 1}}}
`)
			if n := strings.Count(out, "kind: ResourceClaimTemplate"); n != tc.templates {
				t.Errorf("%d ResourceClaimTemplates, want %d:\n%s", n, tc.templates, out)
			}
		})
	}
}

// TestImportMigPartedDevices: an empty devices list names no GPU (not
// every GPU), and more indices than a rule holds are refused with the limit.
func TestImportMigPartedDevices(t *testing.T) {
	for devices, want := range map[string]string{
		"[]": "an empty list names no GPU",
		"[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16]": "at most 16",
	} {
		f := filepath.Join(t.TempDir(), "config.yaml")
		if err := os.WriteFile(f, []byte("version: v1\nmig-configs:\n  c:\n  - devices: "+devices+"\n    mig-enabled: false\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, _, err := runWith(t, nil, "import", "mig-parted", "-f", f, "--config", "c"); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("devices %s: error %v, want %q", devices, err, want)
		}
	}
}
