package e2e

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	nodev1 "k8s.io/api/node/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/utils/ptr"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/miglayout/miglayout/api/v1alpha1"
	"github.com/miglayout/miglayout/pkg/mig"
	migslices "github.com/miglayout/miglayout/pkg/slices"
	"github.com/miglayout/miglayout/test/harness"
)

// kubectl-miglayout runs as kubectl runs a plugin: the built binary, with
// the cluster's kubeconfig. Its output must be what the real API server
// accepts (convert, import, check --fix) and refuses (the mistakes check
// explains), and status/plan read the real objects without writing any.

// pluginDir is where the plugin runs, so that file names in its output are
// those of its golden files (testdata/...).
const pluginDir = "../../cmd/kubectl-miglayout"

var (
	pluginOnce sync.Once
	pluginBin  string
	pluginErr  error
)

// runPlugin runs the plugin binary (built once per package run) with the admin
// kubeconfig and returns standard output, standard error and the error.
func runPlugin(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	pluginOnce.Do(func() {
		dir, err := os.MkdirTemp("", "miglayout-plugin-")
		if err != nil {
			pluginErr = err
			return
		}
		pluginBin = filepath.Join(dir, "kubectl-miglayout")
		cmd := exec.Command("go", "build", "-o", pluginBin, "./cmd/kubectl-miglayout")
		cmd.Dir = "../.."
		cmd.Env = append(os.Environ(), "CGO_CFLAGS=-Wno-deprecated-declarations")
		if out, err := cmd.CombinedOutput(); err != nil {
			pluginErr = err
			t.Logf("go build:\n%s", out)
		}
	})
	if pluginErr != nil {
		t.Fatalf("building kubectl-miglayout: %v", pluginErr)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, pluginBin, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+cp.Kubeconfig())
	cmd.Dir = pluginDir
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	return out.String(), errOut.String(), err
}

func decodeAll(t *testing.T, s string) []*unstructured.Unstructured {
	t.Helper()
	var out []*unstructured.Unstructured
	d := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(s), 4096)
	for {
		var m map[string]any
		if err := d.Decode(&m); err != nil {
			break
		}
		if len(m) > 0 {
			out = append(out, &unstructured.Unstructured{Object: m})
		}
	}
	if len(out) == 0 {
		t.Fatalf("no objects in:\n%s", s)
	}
	return out
}

// dryRunStrict creates o with dryRun=All and strict field validation (as
// kubectl apply --validate=strict does): unknown fields are errors.
func dryRunStrict(ctx context.Context, a *applier, o *unstructured.Unstructured) error {
	ri, err := a.resource(o)
	if err != nil {
		return err
	}
	_, err = ri.Create(ctx, o, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}, FieldValidation: "Strict"})
	return err
}

func pluginNamespace(t *testing.T, ctx context.Context) string {
	t.Helper()
	ns := "plugin-" + rand.String(5)
	if _, err := harness.CreateNamespace(ctx, client, ns); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })
	return ns
}

// TestPluginConvertAcceptedByAPIServer: a Deployment asking for
// nvidia.com/mig-3g.40gb: 1, converted, is accepted by the API server, and
// its pods would reference a claim of one 3g.40gb MIG device.
func TestPluginConvertAcceptedByAPIServer(t *testing.T) {
	ctx := testContext(t, 3*time.Minute)
	out, _, err := runPlugin(t, "convert", "-f", "testdata/convert-deployment.yaml")
	if err != nil {
		t.Fatal(err)
	}
	golden, err := os.ReadFile(filepath.Join(pluginDir, "testdata", "convert-deployment.out.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if out != string(golden) {
		t.Errorf("the binary's output differs from the golden file:\n%s", out)
	}
	ns := pluginNamespace(t, ctx)
	a := newApplier(t, cp.Config())
	objs := decodeAll(t, out)
	for _, o := range objs {
		o.SetNamespace(ns)
		if err := dryRunStrict(ctx, a, o); err != nil {
			t.Errorf("%s %s refused: %v", o.GetKind(), o.GetName(), err)
		}
	}
	// The original, for contrast, asks for an extended resource no node has:
	// accepted too, but it is the device plugin's way.
	if len(objs) != 2 || objs[0].GetKind() != "ResourceClaimTemplate" || objs[1].GetKind() != "Deployment" {
		t.Fatalf("converted objects: %v", objs)
	}
	tmpl := &resourceapi.ResourceClaimTemplate{}
	if err := convertUnstructured(objs[0], tmpl); err != nil {
		t.Fatal(err)
	}
	req := tmpl.Spec.Spec.Devices.Requests
	if len(req) != 1 || req[0].Exactly == nil || req[0].Exactly.DeviceClassName != "mig.miglayout.io" ||
		len(req[0].Exactly.Selectors) != 1 || !strings.Contains(req[0].Exactly.Selectors[0].CEL.Expression, "'3g.40gb'") {
		t.Errorf("template requests %+v", req)
	}
	// The template, created for real, and a pod of the Deployment's
	// template: the API server generates the pod's claim from it.
	if err := a.apply(ctx, objs[0], false); err != nil {
		t.Fatal(err)
	}
	podSpec, _, _ := unstructured.NestedMap(objs[1].Object, "spec", "template", "spec")
	pod := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Pod",
		"metadata": map[string]any{"name": "llm-inference-0", "namespace": ns}, "spec": podSpec}}
	if err := a.apply(ctx, pod, false); err != nil {
		t.Fatalf("a pod of the converted Deployment: %v", err)
	}
	t.Cleanup(func() { _ = harness.ForceDeletePod(context.Background(), client, ns, "llm-inference-0") })
	err = waitFor(ctx, func() (bool, error) {
		p, err := client.CoreV1().Pods(ns).Get(ctx, "llm-inference-0", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return len(p.Status.ResourceClaimStatuses) == 1 && p.Status.ResourceClaimStatuses[0].ResourceClaimName != nil, nil
	})
	if err != nil {
		t.Errorf("no claim generated for the pod: %v", err)
	}
}

func convertUnstructured(u *unstructured.Unstructured, into any) error {
	return runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, into)
}

func waitFor(ctx context.Context, cond func() (bool, error)) error {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		ok, err := cond()
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			if err != nil {
				return err
			}
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// TestPluginCheckSeedArticle: the seed article's manifests are refused by
// the API server for the reasons check gives; check --fix makes them
// acceptable.
func TestPluginCheckSeedArticle(t *testing.T) {
	ctx := testContext(t, 2*time.Minute)
	ns := pluginNamespace(t, ctx)
	a := newApplier(t, cp.Config())
	// The article's pod runs with runtimeClassName nvidia.
	rc := &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: "nvidia"}, Handler: "nvidia"}
	if _, err := client.NodeV1().RuntimeClasses().Create(ctx, rc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	article := "testdata/seed-article.yaml"
	b, err := os.ReadFile(filepath.Join(pluginDir, article))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{
		"ResourceClaim":         {`Unsupported value: "Count"`},
		"ResourceClaimTemplate": {`Unsupported value: "Count"`},
		"Pod":                   {`unknown field "spec.resourceClaims[0].source"`},
	}
	for _, o := range decodeAll(t, string(b)) {
		o.SetNamespace(ns)
		err := dryRunStrict(ctx, a, o)
		if err == nil {
			t.Errorf("the article's %s %s was accepted", o.GetKind(), o.GetName())
			continue
		}
		t.Logf("the API server refuses the article's %s: %v", o.GetKind(), err)
		for _, w := range want[o.GetKind()] {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s refused with %q, want %q", o.GetKind(), err, w)
			}
		}
	}
	// Without strict validation the source field is dropped, and the pod is
	// refused for what remains: no claim named, and claims at pod level.
	for _, o := range decodeAll(t, string(b)) {
		if o.GetKind() != "Pod" {
			continue
		}
		o.SetNamespace(ns)
		ri, _ := a.resource(o)
		_, err := ri.Create(ctx, o, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}, FieldValidation: "Ignore"})
		for _, w := range []string{"must specify one of: `resourceClaimName`, `resourceClaimTemplateName`", "claims may not be set for Resources at pod-level"} {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("pod without strict validation: %v, want %q", err, w)
			}
		}
	}

	out, _, err := runPlugin(t, "check", "--offline", "-f", article)
	if err == nil {
		t.Error("check found nothing")
	}
	golden, _ := os.ReadFile(filepath.Join(pluginDir, "testdata", "check-seed-article.txt"))
	if out != string(golden) {
		t.Errorf("check output differs from the golden file:\n%s", out)
	}
	fixed, _, err := runPlugin(t, "check", "--offline", "--fix", "-f", article)
	if err == nil {
		t.Error("check --fix: no error, want the findings it fixed reported")
	}
	objs := decodeAll(t, fixed)
	if n := len(decodeAll(t, string(b))); len(objs) != n {
		t.Errorf("check --fix gave %d objects, the article has %d", len(objs), n)
	}
	for _, o := range objs {
		o.SetNamespace(ns)
		if err := dryRunStrict(ctx, a, o); err != nil {
			t.Errorf("the fixed %s %s is refused: %v", o.GetKind(), o.GetName(), err)
		}
	}

	// Against this cluster: gpu.nvidia.com is no DeviceClass here, and no
	// device publishes attributes in its domain.
	live, _, err := runPlugin(t, "check", "-f", article)
	if err == nil {
		t.Error("check against the cluster found nothing")
	}
	for _, w := range []string{`no DeviceClass "gpu.nvidia.com" exists (in the cluster)`, `no device has attributes in domain "gpu.nvidia.com"`} {
		if !strings.Contains(live, w) {
			t.Errorf("check against the cluster does not say %q:\n%s", w, live)
		}
	}
}

// TestPluginImportMigParted: an imported mig-parted configuration is a
// MigLayout the CRD's validation accepts.
func TestPluginImportMigParted(t *testing.T) {
	ctx := testContext(t, time.Minute)
	installChartCRDs(t, ctx)
	a := newApplier(t, cp.Config())
	for _, config := range []string{"all-disabled", "all-3g.40gb", "all-balanced", "custom-config"} {
		out, _, err := runPlugin(t, "import", "mig-parted", "-f", "testdata/mig-parted-config.yaml", "--config", config)
		if err != nil {
			t.Fatalf("%s: %v", config, err)
		}
		for _, o := range decodeAll(t, out) {
			if err := dryRunStrict(ctx, a, o); err != nil {
				t.Errorf("%s: MigLayout refused: %v", config, err)
			}
		}
	}
}

// TestPluginStatusAndPlan: status draws a node's GPUs from the real objects,
// and plan reports a blocked change without writing anything.
func TestPluginStatusAndPlan(t *testing.T) {
	ctx := testContext(t, 2*time.Minute)
	c := miglayoutClient(t)
	sfx := rand.String(5)
	nodeName, pool := "plugin-"+sfx, "plugin-"+sfx
	if _, err := harness.CreateNode(ctx, client, nodeName, map[string]string{"miglayout.test/pool": pool}); err != nil {
		t.Fatal(err)
	}
	ns := pluginNamespace(t, ctx)
	nml := &v1alpha1.NodeMigLayout{ObjectMeta: metav1.ObjectMeta{Name: nodeName}}
	if err := c.Create(ctx, nml); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.Delete(context.Background(), nml)
		_ = client.CoreV1().Nodes().Delete(context.Background(), nodeName, metav1.DeleteOptions{})
	})
	nml.Status.GPUs = []v1alpha1.GPUStatus{{Index: 0, Product: "NVIDIA A100-SXM4-80GB", Model: "A100-SXM4-80GB",
		MIGEnabled: true, MIGPending: true, Layout: "7g.80gb@0", Phase: v1alpha1.PhaseReady}}
	if err := c.Status().Update(ctx, nml); err != nil {
		t.Fatal(err)
	}
	// The agent's pool: the 7g.80gb device as package slices publishes it.
	model, err := mig.DefaultCatalog().Model("A100-SXM4-80GB")
	if err != nil {
		t.Fatal(err)
	}
	g := migslices.PlannedGPU(model, 0)
	g.UUID = "GPU-" + sfx
	dev, err := migslices.PlannedMIGDevice(g, mig.Device{Profile: "7g.80gb", Start: 0})
	if err != nil {
		t.Fatal(err)
	}
	slice := &resourceapi.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: nodeName + "-pool"},
		Spec: resourceapi.ResourceSliceSpec{Driver: migslices.DefaultDriverName, NodeName: ptr.To(nodeName),
			Pool: resourceapi.ResourcePool{Name: nodeName, Generation: 1, ResourceSliceCount: 1}, Devices: []resourceapi.Device{dev}},
	}
	if _, err := client.ResourceV1().ResourceSlices().Create(ctx, slice, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = client.ResourceV1().ResourceSlices().Delete(context.Background(), slice.Name, metav1.DeleteOptions{})
	})
	// A claim allocated to it.
	claim := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "whole"},
		Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{Name: "gpu",
			Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "mig.miglayout.io"}}}}}}
	claim, err = client.ResourceV1().ResourceClaims(ns).Create(ctx, claim, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	claim.Status.Allocation = &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{{
		Request: "gpu", Driver: migslices.DefaultDriverName, Pool: nodeName, Device: dev.Name}}}}
	if _, err := client.ResourceV1().ResourceClaims(ns).UpdateStatus(ctx, claim, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	out, _, err := runPlugin(t, "status", nodeName)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("status:\n%s", out)
	if !strings.Contains(out, "gpu-0  A100-SXM4-80GB  Ready") || !strings.Contains(out, "[7g.80gb*") {
		t.Errorf("status does not show the allocated 7g.80gb:\n%s", out)
	}

	planFile := migLayoutFile(t, "plugin-halves-"+sfx, pool, "  - profiles:\n      3g.40gb: 2\n")
	before := nml.DeepCopy()
	if err := c.Get(ctx, crclient.ObjectKey{Name: nodeName}, before); err != nil {
		t.Fatal(err)
	}
	out, _, err = runPlugin(t, "plan", "-f", planFile)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("plan:\n%s", out)
	for _, w := range []string{
		"selects 1 node: " + nodeName,
		"7g.80gb@0 -> 3g.40gb@0,3g.40gb@4",
		"destroy:  7g.80gb@0 (" + dev.Name + ")",
		"blocked until released: 7g.80gb@0: allocated to ResourceClaim " + ns + "/whole",
		"Nothing was written.",
	} {
		if !strings.Contains(out, w) {
			t.Errorf("plan does not say %q", w)
		}
	}
	// With --exit-code the blocked change is exit status 3, with nothing on
	// standard error (not an error).
	_, errOut, err := runPlugin(t, "plan", "--exit-code", "-f", planFile)
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 3 || errOut != "" {
		t.Errorf("plan --exit-code of a blocked change: %v, stderr %q; want exit status 3", err, errOut)
	}
	after := &v1alpha1.NodeMigLayout{}
	if err := c.Get(ctx, crclient.ObjectKey{Name: nodeName}, after); err != nil {
		t.Fatal(err)
	}
	if after.ResourceVersion != before.ResourceVersion {
		t.Errorf("plan wrote the NodeMigLayout (resourceVersion %s -> %s)", before.ResourceVersion, after.ResourceVersion)
	}
	if err := c.Get(ctx, crclient.ObjectKey{Name: "plugin-halves-" + sfx}, &v1alpha1.MigLayout{}); !apierrors.IsNotFound(err) {
		t.Errorf("plan created the MigLayout: %v", err)
	}

	// A MigLayout the API server refuses (its CEL rules) is not planned:
	// plan says what kubectl apply would say.
	badFile := migLayoutFile(t, "plugin-bad-"+sfx, pool, "  - profiles:\n      3g.40gb: 2\n    layout: 3g.40gb@0\n")
	out, errOut, err = runPlugin(t, "plan", "-f", badFile)
	if err == nil || !strings.Contains(errOut, "would be refused by the API server") || !strings.Contains(errOut, "give either profiles (counts) or layout") {
		t.Errorf("plan of a MigLayout the API server refuses: %v\nstdout:\n%s\nstderr:\n%s", err, out, errOut)
	}
	if err := c.Get(ctx, crclient.ObjectKey{Name: "plugin-bad-" + sfx}, &v1alpha1.MigLayout{}); !apierrors.IsNotFound(err) {
		t.Errorf("plan created the refused MigLayout: %v", err)
	}

	// A count left empty (null) would be dropped by the API server and the
	// profile's free devices destroyed: plan refuses the file, and never
	// plans the rule as the local decoding reads it (a count of 0).
	nullFile := migLayoutFile(t, "plugin-null-"+sfx, pool, "  - profiles:\n      3g.40gb:\n      1g.10gb: 1\n")
	out, errOut, err = runPlugin(t, "plan", "-f", nullFile)
	if err == nil || !strings.Contains(errOut, "spec.rules[0].profiles[3g.40gb] left without a value") {
		t.Errorf("plan of a MigLayout with a count left empty: %v\nstdout:\n%s\nstderr:\n%s", err, out, errOut)
	}

	// "MIG on, no device" (an empty profiles map) is a rule the API server
	// admits: plan asks it about the MigLayout as written, not as the typed
	// object would serialize it (without the empty map).
	emptyFile := migLayoutFile(t, "plugin-empty-"+sfx, pool, "  - profiles: {}\n")
	if out, errOut, err = runPlugin(t, "plan", "-f", emptyFile); err != nil || strings.Contains(errOut, "would be refused") {
		t.Errorf("plan of a rule with MIG on and no device: %v\nstdout:\n%s\nstderr:\n%s", err, out, errOut)
	}

	// One a ValidatingAdmissionPolicy of the site forbids (a 403 that RBAC
	// would have allowed) is refused too, not planned with a warning.
	deniedName := "plugin-denied-" + sfx
	denyMigLayout(t, ctx, deniedName)
	deniedFile := migLayoutFile(t, deniedName, pool, "  - profiles:\n      3g.40gb: 2\n")
	out, errOut, err = runPlugin(t, "plan", "-f", deniedFile)
	if err == nil || !strings.Contains(errOut, "would be refused by the API server") || !strings.Contains(errOut, "site forbids "+deniedName) {
		t.Errorf("plan of a MigLayout an admission policy forbids: %v\nstdout:\n%s\nstderr:\n%s", err, out, errOut)
	}
}

// denyMigLayout installs a ValidatingAdmissionPolicy that forbids writing
// the MigLayout name (403, "site forbids <name>"), and waits until it does.
func denyMigLayout(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionregistrationv1.Fail),
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{"miglayout.io"}, APIVersions: []string{"*"}, Resources: []string{"miglayouts"}},
				},
			}}},
			// Reason Forbidden: a 403 (the default, Invalid, is a 422).
			Validations: []admissionregistrationv1.Validation{{Expression: "object.metadata.name != '" + name + "'", Message: "site forbids " + name,
				Reason: ptr.To(metav1.StatusReasonForbidden)}},
		},
	}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: name,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny}},
	}
	if _, err := client.AdmissionregistrationV1().ValidatingAdmissionPolicies().Create(ctx, policy, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = client.AdmissionregistrationV1().ValidatingAdmissionPolicies().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	if _, err := client.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = client.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	c := miglayoutClient(t)
	probe := &v1alpha1.MigLayout{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1alpha1.MigLayoutSpec{
		NodeSelector: metav1.LabelSelector{MatchLabels: map[string]string{"probe": name}},
		Rules:        []v1alpha1.LayoutRule{{Profiles: map[string]int32{"3g.40gb": 2}}}}}
	var last error
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		last = c.Create(ctx, probe.DeepCopy(), crclient.DryRunAll)
		return apierrors.IsForbidden(last) && strings.Contains(last.Error(), "site forbids"), nil
	})
	if err != nil {
		t.Fatalf("the policy never took effect: %v (a dry-run create: %v)", err, last)
	}
}

// migLayoutFile writes a Static MigLayout of the given name, selecting the
// nodes of pool, with rules (YAML list items, indented under spec.rules),
// and returns its path.
func migLayoutFile(t *testing.T, name, pool, rules string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name+".yaml")
	doc := "apiVersion: miglayout.io/v1alpha1\nkind: MigLayout\nmetadata:\n  name: " + name +
		"\nspec:\n  nodeSelector:\n    matchLabels:\n      miglayout.test/pool: " + pool + "\n  rules:\n" + rules
	if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}
