package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/yaml"

	"github.com/miglayout/miglayout/api/v1alpha1"
	"github.com/miglayout/miglayout/pkg/controller"
	"github.com/miglayout/miglayout/pkg/mig"
	"github.com/miglayout/miglayout/pkg/planner"
	migslices "github.com/miglayout/miglayout/pkg/slices"
)

// runWith runs the plugin with a client of objs (nil: no cluster) and
// returns standard output, standard error and the error.
func runWith(t *testing.T, objs []client.Object, args ...string) (string, string, error) {
	t.Helper()
	return runIntercepted(t, objs, interceptor.Funcs{}, args...)
}

// runIntercepted is runWith with the client's calls passed through funcs
// (an API server that refuses some).
func runIntercepted(t *testing.T, objs []client.Object, funcs interceptor.Funcs, args ...string) (string, string, error) {
	t.Helper()
	// A minute after the pending pods the tests make were created: none
	// has waited long enough to be planned by age.
	e := &env{now: func() time.Time { return time.Unix(1060, 0) }}
	if objs != nil {
		c := fake.NewClientBuilder().WithScheme(scheme()).WithObjects(objs...).
			// plan lists the controller's events by reason.
			WithIndex(&eventsv1.Event{}, "reason", func(o client.Object) []string { return []string{o.(*eventsv1.Event).Reason} }).
			WithInterceptorFuncs(funcs).Build()
		e.newClient = func() (client.Client, error) { return c, nil }
	}
	cmd := newRootCommandEnv(e)
	var out, errOut bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	cmd.SetArgs(args)
	err := cmd.Execute()
	return out.String(), errOut.String(), err
}

// The seed article's claim, pod and template carry exactly its three
// mistakes; check names each with its fix, and --fix corrects them.
func TestCheckSeedArticle(t *testing.T) {
	out, _, err := runWith(t, nil, "check", "--offline", "-f", "testdata/seed-article.yaml")
	if err == nil || err.Error() != "4 problems found" {
		t.Errorf("error %v, want 4 problems found", err)
	}
	golden(t, "check-seed-article.txt", out)
	for _, want := range []string{
		"spec.devices.requests[0].exactly.allocationMode",
		"spec.resourceClaims[0].source",
		"spec.resources.claims",
		"spec.spec.devices.requests[0].exactly.allocationMode",
	} {
		if !strings.Contains(out, "  "+want+"\n") {
			t.Errorf("no finding at %s", want)
		}
	}
	if strings.Contains(out, "DeviceClass") || strings.Contains(out, "no device has") {
		t.Errorf("the article's class and selector are valid for miglayout under gpu.nvidia.com, yet reported:\n%s", out)
	}

	fixed, report, err := runWith(t, nil, "check", "--offline", "--fix", "-f", "testdata/seed-article.yaml")
	if err == nil {
		t.Error("--fix still fails when it found problems")
	}
	if report != out {
		t.Errorf("--fix report on stderr differs from the report:\n%s", report)
	}
	golden(t, "check-seed-article-fixed.yaml", fixed)
	// The fixed manifests are clean.
	recheck, _, err := runWith(t, nil, "check", "--offline", "-f", "testdata/check-seed-article-fixed.yaml")
	if err != nil {
		t.Errorf("the fixed manifests still have problems: %v\n%s", err, recheck)
	}
}

func TestCheckOtherMistakes(t *testing.T) {
	out, _, err := runWith(t, nil, "check", "--offline", "-f", "testdata/check-other-mistakes.yaml")
	if err == nil {
		t.Error("no error")
	}
	golden(t, "check-other-mistakes.txt", out)
	fixed, _, _ := runWith(t, nil, "check", "--offline", "--fix", "-f", "testdata/check-other-mistakes.yaml")
	golden(t, "check-other-mistakes-fixed.yaml", fixed)
}

func TestCheckClean(t *testing.T) {
	out, _, err := runWith(t, nil, "check", "--offline", "-f", "testdata/check-clean.yaml")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if out != "No problems found in 3 objects.\n" {
		t.Errorf("output %q", out)
	}
}

// With a cluster, check reads its DeviceClasses and published attributes: the
// article's gpu.nvidia.com class does not exist in a miglayout cluster.
func TestCheckAgainstCluster(t *testing.T) {
	objs := []client.Object{
		class("mig.miglayout.io", "mig"),
		class("gpu.miglayout.io", "gpu"),
		slice("node-1", migslices.DefaultDriverName, migDevices()...),
	}
	out, _, err := runWith(t, objs, "check", "-f", "testdata/seed-article.yaml")
	if err == nil {
		t.Error("no error")
	}
	golden(t, "check-seed-article-cluster.txt", out)
}

// TestCheckAgainstClusterOfWholeGPUs: before any layout is applied (GPUs
// published whole) or in Auto mode before a pod asks, no MIG device is
// published; a claim for a MIG profile is then judged on the devices a
// layout can create, not reported as never allocated.
func TestCheckAgainstClusterOfWholeGPUs(t *testing.T) {
	var whole []resourceapi.Device
	for _, d := range migDevices() {
		if _, isMIG, ok := migslices.DeviceGPUIndex(d.Name); ok && !isMIG {
			whole = append(whole, d)
		}
	}
	if len(whole) == 0 {
		t.Fatal("the device model has no whole GPU")
	}
	objs := []client.Object{class("mig.miglayout.io", "mig"), class("gpu.miglayout.io", "gpu"),
		slice("node-1", migslices.DefaultDriverName, whole...)}
	out, _, err := runWith(t, objs, "check", "-f", "testdata/check-clean.yaml")
	if err != nil || !strings.Contains(out, "No problems found") {
		t.Errorf("check of a 3g.40gb claim on a cluster of whole GPUs: %v\n%s", err, out)
	}
}

// TestCheckAgainstClusterAllMIG: with every GPU in MIG mode only MIG
// devices are published; a claim for a whole GPU by its index (an
// attribute only whole GPUs carry) is judged on the devices a layout with
// MIG off publishes, not reported as never allocated.
func TestCheckAgainstClusterAllMIG(t *testing.T) {
	var migOnly []resourceapi.Device
	for _, d := range migDevices() {
		if _, isMIG, ok := migslices.DeviceGPUIndex(d.Name); ok && isMIG {
			migOnly = append(migOnly, d)
		}
	}
	if len(migOnly) == 0 {
		t.Fatal("the device model has no MIG device")
	}
	f := filepath.Join(t.TempDir(), "whole.yaml")
	claim := `apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata:
  name: whole
spec:
  devices:
    requests:
    - name: gpu
      exactly:
        deviceClassName: gpu.miglayout.io
        selectors:
        - cel:
            expression: "device.attributes['mig.miglayout.io'].index == 0"
`
	if err := os.WriteFile(f, []byte(claim), 0o644); err != nil {
		t.Fatal(err)
	}
	objs := []client.Object{class("mig.miglayout.io", "mig"), class("gpu.miglayout.io", "gpu"),
		slice("node-1", migslices.DefaultDriverName, migOnly...)}
	out, _, err := runWith(t, objs, "check", "-f", f)
	if err != nil || !strings.Contains(out, "No problems found") {
		t.Errorf("check of a whole-GPU claim on a cluster of MIG devices only: %v\n%s", err, out)
	}
}

// class is the chart's DeviceClass for devices of type typ.
func class(name, typ string) *resourceapi.DeviceClass {
	return &resourceapi.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: resourceapi.DeviceClassSpec{Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{
			Expression: "device.driver == 'mig.miglayout.io' && device.attributes['mig.miglayout.io'].type == '" + typ + "'"}}}}}
}

func TestConvertDeployment(t *testing.T) {
	out, notes, err := runWith(t, nil, "convert", "-f", "testdata/convert-deployment.yaml")
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "convert-deployment.out.yaml", out)
	if !strings.Contains(notes, "nvidia.com/mig-3g.40gb: 1 -> ResourceClaimTemplate llm-inference-mig-3g-40gb") {
		t.Errorf("notes:\n%s", notes)
	}
	// The result passes check.
	recheck, _, err := runWith(t, nil, "check", "--offline", "-f", "testdata/convert-deployment.out.yaml")
	if err != nil {
		t.Errorf("converted manifests have problems: %v\n%s", err, recheck)
	}
}

func TestConvertMixed(t *testing.T) {
	out, _, err := runWith(t, nil, "convert", "-f", "testdata/convert-mixed.yaml")
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "convert-mixed.out.yaml", out)
	recheck, _, err := runWith(t, nil, "check", "--offline", "-f", "testdata/convert-mixed.out.yaml")
	if err != nil {
		t.Errorf("converted manifests have problems: %v\n%s", err, recheck)
	}
}

// TestConvertTemplateNames: a workload named by the API server (generateName)
// and two workloads of one name get valid, distinct template names.
func TestConvertTemplateNames(t *testing.T) {
	out := convertStdin(t, `
apiVersion: batch/v1
kind: Job
metadata: {generateName: train-, namespace: ml}
spec:
  template:
    spec:
      restartPolicy: Never
      containers:
      - {name: c, image: x, resources: {limits: {nvidia.com/mig-1g.10gb: 1}}}
---
apiVersion: v1
kind: Pod
metadata: {name: app, namespace: ml}
spec:
  containers:
  - {name: c, image: x, resources: {limits: {nvidia.com/gpu: 2}}}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: app, namespace: ml}
spec:
  selector: {matchLabels: {app: app}}
  template:
    metadata: {labels: {app: app}}
    spec:
      containers:
      - {name: c, image: x, resources: {limits: {nvidia.com/gpu: 1}}}
`)
	names := map[string]int{}
	for _, doc := range strings.Split(out, "\n---\n") {
		var obj struct {
			Kind     string `json:"kind"`
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
		}
		if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
			t.Fatal(err)
		}
		if obj.Kind != "ResourceClaimTemplate" {
			continue
		}
		if errs := validation.IsDNS1123Subdomain(obj.Metadata.Name); len(errs) > 0 {
			t.Errorf("template name %q: %v", obj.Metadata.Name, errs)
		}
		names[obj.Metadata.Name]++
	}
	if len(names) != 3 {
		t.Errorf("templates %v, want 3 distinct", names)
	}
	for n, c := range names {
		if c > 1 {
			t.Errorf("template %s made %d times", n, c)
		}
	}
}

func TestConvertRefusesBadProfile(t *testing.T) {
	_, _, err := runWith(t, nil, "convert", "-f", "-")
	if err == nil {
		t.Error("no error without input")
	}
	e := &env{stdin: strings.NewReader(`
apiVersion: v1
kind: Pod
metadata: {name: p}
spec:
  containers:
  - name: c
    image: x
    resources: {limits: {nvidia.com/mig-3x.40gb: 1}}
`)}
	cmd := newRootCommandEnv(e)
	cmd.SetOut(&bytes.Buffer{})
	cmd.SetErr(&bytes.Buffer{})
	cmd.SetArgs([]string{"convert", "-f", "-"})
	if err := cmd.Execute(); err == nil || !strings.Contains(err.Error(), "nvidia.com/mig-3x.40gb") {
		t.Errorf("error %v", err)
	}
}

func TestImportMigParted(t *testing.T) {
	for _, config := range []string{"all-disabled", "all-enabled", "all-zero", "all-3g.40gb", "all-balanced", "custom-config"} {
		t.Run(config, func(t *testing.T) {
			out, notes, err := runWith(t, nil, "import", "mig-parted", "-f", "testdata/mig-parted-config.yaml", "--config", config)
			if err != nil {
				t.Fatal(err)
			}
			golden(t, "import-"+config+".yaml", out+notesComment(notes))
			var ml v1alpha1.MigLayout
			if err := yaml.UnmarshalStrict([]byte(out), &ml); err != nil {
				t.Errorf("output is not a MigLayout: %v", err)
			}
		})
	}
	for config, want := range map[string]string{
		"too-many": "3 instances of 3g.40gb, at most 2 fit",
		"nope":     `has no mig-config "nope"`,
	} {
		_, _, err := runWith(t, nil, "import", "mig-parted", "-f", "testdata/mig-parted-config.yaml", "--config", config)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want %q", config, err, want)
		}
	}
	out, _, err := runWith(t, nil, "import", "mig-parted", "-f", "testdata/mig-parted-config.yaml", "--config", "all-3g.40gb",
		"--name", "halves", "--selector", "miglayout.io/pool=a100")
	if err != nil || !strings.Contains(out, "name: halves") || !strings.Contains(out, "miglayout.io/pool: a100") {
		t.Errorf("--name/--selector: %v\n%s", err, out)
	}
	// A key with two values selects no node as written; one of its
	// values kept would select nodes. The same value twice is the value.
	out, _, err = runWith(t, nil, "import", "mig-parted", "-f", "testdata/mig-parted-config.yaml", "--config", "all-3g.40gb",
		"--selector", "pool=a,pool=b")
	if err == nil || !strings.Contains(err.Error(), "gives label pool two values") {
		t.Errorf("--selector with a key of two values: %v, want it refused\n%s", err, out)
	}
	out, _, err = runWith(t, nil, "import", "mig-parted", "-f", "testdata/mig-parted-config.yaml", "--config", "all-3g.40gb",
		"--selector", "pool=a, pool=a")
	if err != nil || !strings.Contains(out, "pool: a") {
		t.Errorf("--selector with a key given twice alike: %v\n%s", err, out)
	}
}

func notesComment(notes string) string {
	if notes == "" {
		return ""
	}
	var b strings.Builder
	b.WriteString("# standard error:\n")
	for _, l := range strings.Split(strings.TrimSpace(notes), "\n") {
		b.WriteString("#   " + l + "\n")
	}
	return b.String()
}

// Cluster fixtures for status and plan.

func deviceName(t *testing.T, model string, gpuIndex int, d string) string {
	t.Helper()
	m, err := mig.DefaultCatalog().Model(model)
	if err != nil {
		t.Fatal(err)
	}
	dev := mig.MustParseLayout(d)[0]
	p, err := m.Profile(dev.Profile)
	if err != nil {
		t.Fatal(err)
	}
	return migslices.MIGDeviceName(gpuIndex, dev.Profile, p.ID, dev.Start)
}

func slice(node, driver string, devices ...resourceapi.Device) *resourceapi.ResourceSlice {
	return &resourceapi.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: node + "-" + driver},
		Spec: resourceapi.ResourceSliceSpec{Driver: driver, NodeName: ptr.To(node),
			Pool: resourceapi.ResourcePool{Name: node, Generation: 1, ResourceSliceCount: 1}, Devices: devices},
	}
}

func named(names ...string) []resourceapi.Device {
	var out []resourceapi.Device
	for _, n := range names {
		d := resourceapi.Device{Name: n}
		if strings.HasSuffix(n, "~") {
			d.Name = strings.TrimSuffix(n, "~")
			d.Taints = []resourceapi.DeviceTaint{migslices.DrainTaint()}
		}
		if strings.HasSuffix(n, "!") {
			d.Name = strings.TrimSuffix(n, "!")
			d.Taints = []resourceapi.DeviceTaint{migslices.XidTaint(48)}
		}
		out = append(out, d)
	}
	return out
}

func allocated(ns, name, node string, devices ...string) *resourceapi.ResourceClaim {
	c := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{Name: "gpu",
			Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "mig.miglayout.io"}}}}}}
	c.Status.Allocation = &resourceapi.AllocationResult{}
	for _, d := range devices {
		c.Status.Allocation.Devices.Results = append(c.Status.Allocation.Devices.Results,
			resourceapi.DeviceRequestAllocationResult{Request: "gpu", Driver: migslices.DefaultDriverName, Pool: node, Device: d})
	}
	return c
}

// reportedA100 is the NodeMigLayout of node name whose agent reports one
// A100-SXM4-80GB, GPU 0, MIG on and Ready with layout (empty: no device).
func reportedA100(name, layout string) *v1alpha1.NodeMigLayout {
	return &v1alpha1.NodeMigLayout{ObjectMeta: metav1.ObjectMeta{Name: name},
		Status: v1alpha1.NodeMigLayoutStatus{GPUs: []v1alpha1.GPUStatus{{Index: 0, Product: "NVIDIA A100-SXM4-80GB", Model: "A100-SXM4-80GB",
			MIGEnabled: true, MIGPending: true, Layout: layout, Phase: v1alpha1.PhaseReady}}}}
}

func node(name string, labels map[string]string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
}

// cluster is two A100 and H100 nodes in the middle of things:
//   - gpu-node-1 (MigLayout halves): gpu-0 at 3g.40gb×2, one allocated;
//     gpu-1 draining three small devices (one still allocated) towards 3g.40gb×2.
//   - gpu-node-2 (no MigLayout yet): gpu-0 with MIG off, allocated whole;
//     gpu-1 one free 7g.80gb.
func cluster(t *testing.T) []client.Object {
	a100, h100 := "A100-SXM4-80GB", "H100-SXM5-80GB"
	ready := []metav1.Condition{{Type: "Ready", Status: metav1.ConditionFalse, Reason: "Progressing", Message: "gpu 1 draining"}}
	nml1 := &v1alpha1.NodeMigLayout{
		ObjectMeta: metav1.ObjectMeta{Name: "gpu-node-1"},
		Spec: v1alpha1.NodeMigLayoutSpec{MigLayout: "halves", GPUs: []v1alpha1.GPUSpec{
			{Index: 0, MIGEnabled: true, Layout: "3g.40gb@0,3g.40gb@4", Reason: `rule "halves": profiles 3g.40gb×2`},
			{Index: 1, MIGEnabled: true, Layout: "3g.40gb@0,3g.40gb@4", Reason: `rule "halves": profiles 3g.40gb×2`},
		}},
		Status: v1alpha1.NodeMigLayoutStatus{Conditions: ready, GPUs: []v1alpha1.GPUStatus{
			{Index: 0, Product: "NVIDIA A100-SXM4-80GB", Model: a100, MIGEnabled: true, MIGPending: true,
				Layout: "3g.40gb@0,3g.40gb@4", InUse: "3g.40gb@0", Phase: v1alpha1.PhaseReady},
			{Index: 1, Product: "NVIDIA A100-SXM4-80GB", Model: a100, MIGEnabled: true, MIGPending: true,
				Layout: "1g.10gb@0,1g.10gb@1,2g.20gb@2,3g.40gb@4", InUse: "1g.10gb@1", Phase: v1alpha1.PhaseBlocked,
				Reason: "DeviceInUse", Message: "1g.10gb@1 is allocated to team-a/notebook-0; waiting"},
		}},
	}
	nml2 := &v1alpha1.NodeMigLayout{
		ObjectMeta: metav1.ObjectMeta{Name: "gpu-node-2"},
		Status: v1alpha1.NodeMigLayoutStatus{GPUs: []v1alpha1.GPUStatus{
			{Index: 0, Product: "NVIDIA H100 80GB HBM3", Model: h100, MIGEnabled: false, MIGPending: false},
			{Index: 1, Product: "NVIDIA H100 80GB HBM3", Model: h100, MIGEnabled: true, MIGPending: true, Layout: "7g.80gb@0", Phase: v1alpha1.PhaseReady},
		}},
	}
	n1 := []string{
		deviceName(t, a100, 0, "3g.40gb@0"), deviceName(t, a100, 0, "3g.40gb@4"),
		deviceName(t, a100, 1, "1g.10gb@0") + "~", deviceName(t, a100, 1, "1g.10gb@1") + "~", deviceName(t, a100, 1, "2g.20gb@2") + "~",
		deviceName(t, a100, 1, "3g.40gb@4"),
	}
	return []client.Object{
		node("gpu-node-1", map[string]string{"pool": "gpu"}),
		node("gpu-node-2", map[string]string{"pool": "gpu"}),
		node("cpu-node", nil),
		nml1, nml2,
		slice("gpu-node-1", migslices.DefaultDriverName, named(n1...)...),
		slice("gpu-node-2", migslices.DefaultDriverName, named("gpu-0", deviceName(t, h100, 1, "7g.80gb@0")+"!")...),
		slice("gpu-node-2", "other.example.com", named("nic-0")...),
		allocated("team-a", "train-0", "gpu-node-1", deviceName(t, a100, 0, "3g.40gb@0")),
		allocated("team-a", "notebook-0", "gpu-node-1", deviceName(t, a100, 1, "1g.10gb@1")),
		allocated("team-b", "sim-0", "gpu-node-2", "gpu-0"),
	}
}

// TestStatusForbiddenLists: a user who may not list ResourceSlices or
// ResourceClaims still gets the map, warned about the marks left out; plan,
// whose plan they decide, fails.
func TestStatusForbiddenLists(t *testing.T) {
	forbid := func(what client.ObjectList, resource string) interceptor.Funcs {
		return interceptor.Funcs{List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			if reflect.TypeOf(list) == reflect.TypeOf(what) {
				return apierrors.NewForbidden(schema.GroupResource{Group: resourceapi.GroupName, Resource: resource}, "", errors.New("cannot list at the cluster scope"))
			}
			return c.List(ctx, list, opts...)
		}}
	}
	tests := map[string]struct {
		funcs interceptor.Funcs
		// warning is in standard error; marks are those no GPU line may
		// carry.
		warning, marks string
	}{
		"ResourceSlices": {forbid(&resourceapi.ResourceSliceList{}, "resourceslices"), "ResourceSlices cannot be listed", "~?!"},
		"ResourceClaims": {forbid(&resourceapi.ResourceClaimList{}, "resourceclaims"), "ResourceClaims cannot be listed", ""},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			out, errOut, err := runIntercepted(t, cluster(t), tc.funcs, "status")
			if err != nil {
				t.Fatalf("status: %v", err)
			}
			if !strings.Contains(errOut, tc.warning) {
				t.Errorf("standard error %q does not warn %q", errOut, tc.warning)
			}
			if !strings.Contains(out, "gpu-node-1") || !strings.Contains(out, "gpu-node-2") {
				t.Errorf("the map lacks a node:\n%s", out)
			}
			for _, line := range strings.Split(out, "\n") {
				if strings.Contains(line, "  gpu-") && strings.ContainsAny(line, tc.marks) && tc.marks != "" {
					t.Errorf("marked from a list that could not be read: %q", line)
				}
			}
			if _, _, err := runIntercepted(t, cluster(t), tc.funcs, "plan", "-f", "testdata/plan-static.yaml"); err == nil || !apierrors.IsForbidden(errors.Unwrap(err)) && !strings.Contains(err.Error(), "forbidden") {
				t.Errorf("plan: %v, want the forbidden list's error", err)
			}
		})
	}
}

func TestStatus(t *testing.T) {
	objs := cluster(t)
	out, _, err := runWith(t, objs, "status")
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "status.txt", out)
	one, _, err := runWith(t, objs, "status", "gpu-node-2")
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "status-gpu-node-2.txt", one)
	_, _, err = runWith(t, objs, "status", "cpu-node")
	if err == nil || !strings.Contains(err.Error(), `no NodeMigLayout "cpu-node"`) {
		t.Errorf("status of a node without agent: %v", err)
	}
}

// TestStatusCatalogDiffers: a GPU whose NVML differs from the catalog
// (the agent's catalogMismatches) says so under its row, with where to
// read the rest.
func TestStatusCatalogDiffers(t *testing.T) {
	objs := cluster(t)
	for _, o := range objs {
		if nml, ok := o.(*v1alpha1.NodeMigLayout); ok && nml.Name == "gpu-node-2" {
			nml.Status.GPUs[1].CatalogMismatches = []string{"3g.40gb placements: NVML offers 4+4, the catalog 0+4,4+4", "1g.20gb (NVML profile index 9): NVML does not offer it on this GPU (ERROR_NOT_SUPPORTED)"}
		}
	}
	out, _, err := runWith(t, objs, "status", "gpu-node-2")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(out, "\n")
	i := slices.IndexFunc(lines, func(l string) bool { return strings.HasPrefix(strings.TrimSpace(l), "gpu-1 ") })
	if i < 0 || i+1 >= len(lines) {
		t.Fatalf("no gpu-1 row:\n%s", out)
	}
	// Under the row, after its Xid line.
	want := "NVML differs from the catalog: 3g.40gb placements: NVML offers 4+4, the catalog 0+4,4+4 (+1 more); kubectl get nodemiglayout gpu-node-2 -o yaml"
	if i+2 >= len(lines) || !strings.HasPrefix(strings.TrimSpace(lines[i+1]), "Xid 48 hit") {
		t.Fatalf("no Xid line under gpu-1:\n%s", out)
	}
	if got := strings.TrimSpace(lines[i+2]); got != want {
		t.Errorf("line under gpu-1's Xid line:\n%q\nwant\n%q\nin:\n%s", got, want, out)
	}
	if strings.Count(out, "NVML differs") != 1 {
		t.Errorf("the other GPU is marked too:\n%s", out)
	}
}

// TestStatusDeviceOfAnotherProfileID: a MIG device whose published name
// carries another GI profile ID than the catalog's (made outside
// miglayout) is found by its attributes: shown allocated, not as missing.
func TestStatusDeviceOfAnotherProfileID(t *testing.T) {
	const name = "gpu-1-mig-7g80gb-99-0" // the catalog's 7g.80gb ID is 0
	objs := cluster(t)
	for i, o := range objs {
		if s, ok := o.(*resourceapi.ResourceSlice); ok && s.Spec.NodeName != nil && *s.Spec.NodeName == "gpu-node-2" && s.Spec.Driver == migslices.DefaultDriverName {
			s.Spec.Devices[1] = resourceapi.Device{Name: name, Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
				migslices.AttrParentIndex:    {IntValue: ptr.To[int64](1)},
				migslices.AttrProfile:        {StringValue: ptr.To("7g.80gb")},
				migslices.AttrPlacementStart: {IntValue: ptr.To[int64](0)},
			}}
			objs[i] = s
		}
	}
	objs = append(objs, allocated("team-b", "big-0", "gpu-node-2", name))
	out, _, err := runWith(t, objs, "status", "gpu-node-2")
	if err != nil {
		t.Fatal(err)
	}
	row := ""
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "gpu-1 ") {
			row = l
		}
	}
	if !strings.Contains(row, "[7g.80gb*") {
		t.Errorf("gpu-1 row %q, want its 7g.80gb marked allocated (*):\n%s", row, out)
	}
}

// TestStatusAgentLost: a node its MigLayout reports lost (row phase
// Unknown) is marked, with the controller's message; the others are not.
func TestStatusAgentLost(t *testing.T) {
	ml := &v1alpha1.MigLayout{ObjectMeta: metav1.ObjectMeta{Name: "halves"},
		Status: v1alpha1.MigLayoutStatus{Nodes: []v1alpha1.NodeRow{{Node: "gpu-node-1", Phase: v1alpha1.PhaseUnknown,
			Message: "the node's agent has not renewed its heartbeat Lease miglayout/miglayout-agent-gpu-node-1 since 2026-11-30T10:00:00Z"}}}}
	out, _, err := runWith(t, append(cluster(t), ml), "status")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(out, "\n")
	var head1, head2 int
	for i, l := range lines {
		switch {
		case strings.HasPrefix(l, "gpu-node-1 "):
			head1 = i
		case strings.HasPrefix(l, "gpu-node-2 "):
			head2 = i
		}
	}
	if !strings.HasSuffix(lines[head1], "AGENT LOST") || !strings.Contains(lines[head1+1], "has not renewed its heartbeat Lease") {
		t.Errorf("gpu-node-1 not marked lost:\n%s", out)
	}
	if strings.Contains(lines[head2], "AGENT LOST") {
		t.Errorf("gpu-node-2 marked lost:\n%s", out)
	}
}

func TestPlanStatic(t *testing.T) {
	objs := cluster(t)
	out, _, err := runWith(t, objs, "plan", "-f", "testdata/plan-static.yaml")
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "plan-static.txt", out)
}

// TestPlanPaused: a paused MigLayout's plan says so first; a Static one's
// is otherwise what resuming it would do (the unpaused plan), an Auto
// one's changes nothing and tells the pod why.
func TestPlanPaused(t *testing.T) {
	paused := func(file string) string {
		b, err := os.ReadFile(filepath.Join("testdata", file))
		if err != nil {
			t.Fatal(err)
		}
		out := filepath.Join(t.TempDir(), file)
		if err := os.WriteFile(out, []byte(strings.Replace(string(b), "spec:\n", "spec:\n  paused: true\n", 1)), 0o600); err != nil {
			t.Fatal(err)
		}
		return out
	}
	objs := cluster(t)
	want, _, err := runWith(t, objs, "plan", "-f", "testdata/plan-static.yaml")
	if err != nil {
		t.Fatal(err)
	}
	out, _, err := runWith(t, objs, "plan", "-f", paused("plan-static.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	const note = "  paused (spec.paused): no change below is started while it is set (a change not started yet is dropped); this is what resuming it would do\n"
	if !strings.Contains(out, note) {
		t.Errorf("paused Static plan lacks the note:\n%s", out)
	}
	if diff := cmp.Diff(want, strings.Replace(out, note, "", 1)); diff != "" {
		t.Errorf("paused Static plan, the note aside (-unpaused +paused):\n%s", diff)
	}

	nml := &v1alpha1.NodeMigLayout{ObjectMeta: metav1.ObjectMeta{Name: "auto-node"},
		Status: v1alpha1.NodeMigLayoutStatus{GPUs: []v1alpha1.GPUStatus{
			{Index: 0, Product: "NVIDIA H100 80GB HBM3", Model: "H100-SXM5-80GB", MIGEnabled: true, MIGPending: true, Phase: v1alpha1.PhaseReady},
		}}}
	claim, pod := pending("small", "small-gpu", "device.attributes['mig.miglayout.io'].profile == '1g.10gb'", 1000)
	auto := []client.Object{node("auto-node", map[string]string{"pool": "auto"}), nml, migClass(), claim, pod}
	out, _, err = runWith(t, auto, "plan", "-f", paused("plan-auto.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"  paused (spec.paused): the planner changes nothing", "their MigLayout is paused", "Summary: 0 GPUs would change"} {
		if !strings.Contains(out, want) {
			t.Errorf("paused Auto plan lacks %q:\n%s", want, out)
		}
	}
}

// pending is an unschedulable pod in namespace ml with one claim of one
// device matching cel, created at the Unix time created.
func pending(name, claimName, cel string, created int64) (*resourceapi.ResourceClaim, *corev1.Pod) {
	claim := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: claimName},
		Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{Name: "mig",
			Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "mig.miglayout.io", AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 1, Selectors: []resourceapi.DeviceSelector{{
				CEL: &resourceapi.CELDeviceSelector{Expression: cel}}}}}}}}}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: name, CreationTimestamp: metav1.Unix(created, 0)},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "x"}},
			ResourceClaims: []corev1.PodResourceClaim{{Name: "mig", ResourceClaimName: ptr.To(claimName)}}},
		Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable}}}}
	return claim, pod
}

// migClass is the chart's DeviceClass of MIG devices.
func migClass() *resourceapi.DeviceClass {
	return &resourceapi.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: "mig.miglayout.io"},
		Spec: resourceapi.DeviceClassSpec{Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{
			Expression: "device.driver == 'mig.miglayout.io' && device.attributes['mig.miglayout.io'].type == 'mig'"}}}}}
}

// TestPlanStaticCancelsInFlight: a GPU whose change in flight the new
// layout does not ask for is shown stopped where it is, whether its
// devices stay (no change) or change otherwise (TestPlanExitCode: a cancel
// alone is a change for --exit-code).
func TestPlanStaticCancelsInFlight(t *testing.T) {
	objs := cluster(t)
	for _, o := range objs {
		if nml, ok := o.(*v1alpha1.NodeMigLayout); ok && nml.Name == "gpu-node-1" {
			nml.Spec.GPUs[0].Layout = "4g.40gb@0"                               // in flight; the rules keep 3g.40gb×2
			nml.Spec.GPUs[1].Layout = "1g.10gb@0,1g.10gb@1,2g.20gb@2,2g.20gb@4" // in flight; the rules ask 3g.40gb×2
		}
	}
	out, _, err := runWith(t, objs, "plan", "-f", "testdata/plan-static.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"gpu-0  A100-SXM4-80GB: no change (3g.40gb@0,3g.40gb@4); cancels the change in flight to 4g.40gb@0\n",
		"           replaces: the change in flight to 1g.10gb@0,1g.10gb@1,2g.20gb@2,2g.20gb@4\n",
		"; cancels 2 changes in flight (the agent stops where it is)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("plan lacks %q:\n%s", want, out)
		}
	}
	if n := strings.Count(out, "in flight to"); n != 2 {
		t.Errorf("%d GPUs shown with a change in flight, want 2 (gpu-node-2 has none):\n%s", n, out)
	}
}

// TestPlanStaticNoRuleCancelsInFlight: new rules that match no rule for
// a GPU whose change is in flight leave it out of the node's spec, and the
// agent stops the change where it is: plan says so and counts the cancel
// (--exit-code 2), as it does where the new rules keep the GPU's layout.
func TestPlanStaticNoRuleCancelsInFlight(t *testing.T) {
	objs := cluster(t)
	for _, o := range objs {
		if nml, ok := o.(*v1alpha1.NodeMigLayout); ok && nml.Name == "gpu-node-1" {
			nml.Spec.GPUs[0].Layout = "4g.40gb@0" // in flight
			nml.Status.GPUs[0].InUse = ""
		}
	}
	f := filepath.Join(t.TempDir(), "only1.yaml")
	doc := "apiVersion: miglayout.io/v1alpha1\nkind: MigLayout\nmetadata: {name: halves}\n" +
		"spec:\n  nodeSelector: {matchLabels: {pool: gpu}}\n  rules:\n  - {name: g1, gpuIndices: [1], productName: A100-SXM4-80GB, profiles: {1g.10gb: 2, 2g.20gb: 1, 3g.40gb: 1}}\n"
	if err := os.WriteFile(f, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	out, _, err := runWith(t, objs, "plan", "--exit-code", "-f", f)
	if want := "gpu-0  A100-SXM4-80GB: no rule matches: left as it is (3g.40gb@0,3g.40gb@4); cancels the change in flight to 4g.40gb@0\n"; !strings.Contains(out, want) {
		t.Errorf("plan lacks %q:\n%s", want, out)
	}
	// GPU 1's change in flight (cluster's) is cancelled too: it keeps its layout.
	if !strings.Contains(out, "; cancels 2 changes in flight") {
		t.Errorf("the summary does not count the cancel:\n%s", out)
	}
	var code exitCode
	if !errors.As(err, &code) || code != 2 {
		t.Errorf("exit %v, want 2 (the node's spec changes):\n%s", err, out)
	}
}

func TestPlanAuto(t *testing.T) {
	h100 := "H100-SXM5-80GB"
	nml := &v1alpha1.NodeMigLayout{
		ObjectMeta: metav1.ObjectMeta{Name: "auto-node"},
		Status: v1alpha1.NodeMigLayoutStatus{GPUs: []v1alpha1.GPUStatus{
			{Index: 0, Product: "NVIDIA H100 80GB HBM3", Model: h100, MIGEnabled: true, MIGPending: true, Layout: "", Phase: v1alpha1.PhaseReady},
			{Index: 1, Product: "NVIDIA H100 80GB HBM3", Model: h100, MIGEnabled: true, MIGPending: true, Layout: "1g.10gb@6", InUse: "1g.10gb@6", Phase: v1alpha1.PhaseReady},
		}},
	}
	objs := []client.Object{node("auto-node", map[string]string{"pool": "auto"}), nml, migClass()}
	// whole, the larger, is planned first and takes the empty GPU 0;
	// trainer's 3g.40gb would fit GPU 1 beside its 1g.10gb in use, but one
	// GPU per node changes at a time, so trainer waits with GPU 1's left
	// half kept for it; notebook's 1g.10gb waits too (no placement is kept
	// for a small profile); no H100 has 200 GB.
	for _, p := range []struct {
		name, claim, cel string
		created          int64
	}{
		{"trainer", "half-gpu", "device.attributes['mig.miglayout.io'].profile == '3g.40gb'", 1000},
		{"whole", "whole-gpu", "device.attributes['mig.miglayout.io'].profile == '7g.80gb'", 1001},
		{"huge", "huge-gpu", "device.attributes['mig.miglayout.io'].memory >= 200000", 1002},
		{"notebook", "small-gpu", "device.attributes['mig.miglayout.io'].profile == '1g.10gb'", 1003},
	} {
		c, pod := pending(p.name, p.claim, p.cel, p.created)
		objs = append(objs, c, pod)
	}
	out, _, err := runWith(t, objs, "plan", "-f", "testdata/plan-auto.yaml")
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "plan-auto.txt", out)
	if !strings.Contains(out, "ml/trainer") {
		t.Errorf("the plan does not serve the pending pod:\n%s", out)
	}
}

// TestPlanAutoSelectingNoNode: an Auto MigLayout whose selector picks no
// node plans nothing and lists none of the cluster's pending pods (another
// MigLayout's to serve, or no one's) as its own.
func TestPlanAutoSelectingNoNode(t *testing.T) {
	c, pod := pending("huge", "huge-gpu", "device.attributes['mig.miglayout.io'].memory >= 200000", 1000)
	objs := []client.Object{node("auto-node", map[string]string{"pool": "auto"}), migClass(), c, pod}
	out, _, err := runWith(t, objs, "plan", "-f", manifestFile(t, autoMigLayoutDoc("none", "nowhere")))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out, "huge") || !strings.Contains(out, "selects no node, so it plans nothing") {
		t.Errorf("want no pod listed and the plan saying it selects no node:\n%s", out)
	}
}

// TestPlanAutoAsTheController: plan decides on what the controller decides
// on: a pod pending longer than --auto-aging-after is planned by age (the
// old 1g.10gb goes before the new 7g.80gb); a pod that waits only for
// another driver's device is not counted; a pod that asks for a MIG device
// and a NIC is planned with the node's NICs from their ResourceSlice.
func TestPlanAutoAsTheController(t *testing.T) {
	h100 := "H100-SXM5-80GB"
	nml := &v1alpha1.NodeMigLayout{
		ObjectMeta: metav1.ObjectMeta{Name: "auto-node"},
		Status: v1alpha1.NodeMigLayoutStatus{GPUs: []v1alpha1.GPUStatus{
			{Index: 0, Product: "NVIDIA H100 80GB HBM3", Model: h100, MIGEnabled: true, MIGPending: true, Layout: "", Phase: v1alpha1.PhaseReady},
		}},
	}
	netClass := &resourceapi.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: "nic.example.com"},
		Spec: resourceapi.DeviceClassSpec{Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{
			Expression: "device.driver == 'net.example.com'"}}}}}
	nics := &resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: "auto-node-nics"},
		Spec: resourceapi.ResourceSliceSpec{Driver: "net.example.com", NodeName: ptr.To("auto-node"),
			Pool: resourceapi.ResourcePool{Name: "auto-node", ResourceSliceCount: 1}, Devices: []resourceapi.Device{{Name: "nic-0"}}}}
	objs := []client.Object{node("auto-node", map[string]string{"pool": "auto"}), nml, migClass(), netClass, nics}
	small, smallPod := pending("notebook", "small-gpu", "device.attributes['mig.miglayout.io'].profile == '1g.10gb'", 0)
	whole, wholePod := pending("whole", "whole-gpu", "device.attributes['mig.miglayout.io'].profile == '7g.80gb'", 7000)
	nicOnly, nicPod := pending("net-only", "nic", "true", 7000)
	nicOnly.Spec.Devices.Requests[0].Exactly.DeviceClassName = netClass.Name
	objs = append(objs, small, smallPod, whole, wholePod, nicOnly, nicPod)

	e := &env{now: func() time.Time { return time.Unix(7060, 0) }}
	c := fake.NewClientBuilder().WithScheme(scheme()).WithObjects(objs...).Build()
	e.newClient = func() (client.Client, error) { return c, nil }
	cmd := newRootCommandEnv(e)
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetArgs([]string{"plan", "-f", "testdata/plan-auto.yaml"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"2 pods pending for MIG devices", "serves:   ml/notebook"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("plan lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "net-only") || strings.Contains(out.String(), "serves:   ml/whole") {
		t.Errorf("plan counts the NIC-only pod or serves the newer 7g.80gb first:\n%s", out.String())
	}
}

// TestPlanAutoLostAgent: a node the controller reports with a lost agent
// (its row in a stored MigLayout's status) is planned as the controller
// plans it: nothing changes there, and a pod only it could serve waits.
func TestPlanAutoLostAgent(t *testing.T) {
	h100 := "H100-SXM5-80GB"
	nml := &v1alpha1.NodeMigLayout{
		ObjectMeta: metav1.ObjectMeta{Name: "auto-node"},
		Status: v1alpha1.NodeMigLayoutStatus{GPUs: []v1alpha1.GPUStatus{
			{Index: 0, Product: "NVIDIA H100 80GB HBM3", Model: h100, MIGEnabled: true, MIGPending: true, Phase: v1alpha1.PhaseReady},
		}},
	}
	stored := &v1alpha1.MigLayout{ObjectMeta: metav1.ObjectMeta{Name: "on-demand"},
		Status: v1alpha1.MigLayoutStatus{Nodes: []v1alpha1.NodeRow{{Node: "auto-node", Phase: v1alpha1.PhaseUnknown, Message: "lost"}}}}
	claim, pod := pending("whole", "whole-gpu", "device.attributes['mig.miglayout.io'].profile == '7g.80gb'", 1000)
	objs := []client.Object{node("auto-node", map[string]string{"pool": "auto"}), nml, migClass(), claim, pod, stored}
	out, _, err := runWith(t, objs, "plan", "-f", "testdata/plan-auto.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "ml/whole: "+planner.WaitsForLostNode) || !strings.Contains(out, "Summary: 0 GPUs would change") {
		t.Errorf("plan with the node's agent lost:\n%s", out)
	}
}

// TestPlanAutoTaintRule: a DeviceTaintRule that takes the node's whole pool
// out of scheduling leaves it as it is in the dry run too, as in the
// controller.
func TestPlanAutoTaintRule(t *testing.T) {
	nml := &v1alpha1.NodeMigLayout{
		ObjectMeta: metav1.ObjectMeta{Name: "auto-node"},
		Status: v1alpha1.NodeMigLayoutStatus{GPUs: []v1alpha1.GPUStatus{
			{Index: 0, Product: "NVIDIA H100 80GB HBM3", Model: "H100-SXM5-80GB", MIGEnabled: true, MIGPending: true, Phase: v1alpha1.PhaseReady},
		}},
	}
	rule := &resourceapi.DeviceTaintRule{ObjectMeta: metav1.ObjectMeta{Name: "maintenance"}, Spec: resourceapi.DeviceTaintRuleSpec{
		DeviceSelector: &resourceapi.DeviceTaintSelector{Pool: ptr.To("auto-node")},
		Taint:          resourceapi.DeviceTaint{Key: "example.com/maintenance", Effect: resourceapi.DeviceTaintEffectNoSchedule}}}
	claim, pod := pending("whole", "whole-gpu", "device.attributes['mig.miglayout.io'].profile == '7g.80gb'", 1000)
	objs := []client.Object{node("auto-node", map[string]string{"pool": "auto"}), nml, migClass(), claim, pod, rule}
	out, _, err := runWith(t, objs, "plan", "-f", "testdata/plan-auto.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "ml/whole: "+planner.WaitsForLostNode) || !strings.Contains(out, "Summary: 0 GPUs would change") {
		t.Errorf("plan with the node's pool tainted by a DeviceTaintRule:\n%s", out)
	}
}

// TestPlanAutoFromSlices: an Auto MigLayout's first plan, on a node no
// MigLayout selected yet (no NodeMigLayout), reads the node's GPUs from its
// ResourceSlices, as the Static plan does: the free 7g.80gb is planned for
// the pending 3g.40gb pod.
func TestPlanAutoFromSlices(t *testing.T) {
	h100 := "H100-SXM5-80GB"
	claim, pod := pending("trainer", "half-gpu", "device.attributes['mig.miglayout.io'].profile == '3g.40gb'", 1000)
	model, err := mig.DefaultCatalog().Model(h100)
	if err != nil {
		t.Fatal(err)
	}
	g := migslices.PlannedGPU(model, 0)
	whole, err := migslices.PlannedMIG(g, mig.Device{Profile: "7g.80gb", Start: 0})
	if err != nil {
		t.Fatal(err)
	}
	whole.UUID = "MIG-whole"
	objs := []client.Object{node("auto-node", map[string]string{"pool": "auto"}), migClass(), claim, pod,
		slice("auto-node", migslices.DefaultDriverName, migslices.MIGDevice(g, whole))}
	out, _, err := runWith(t, objs, "plan", "-f", "testdata/plan-auto.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"GPUs of auto-node as ResourceSlices publish them", "gpu-0  7g.80gb@0 -> 3g.40gb@", "serves:   ml/trainer", "Summary: 1 GPU would change"} {
		if !strings.Contains(out, want) {
			t.Errorf("plan lacks %q:\n%s", want, out)
		}
	}
}

// TestPlanAutoFromSlicesGPUAttributes: a node without a NodeMigLayout is
// read from its ResourceSlices with its GPU's UUID and NVML attributes, so
// a pending pod whose selector reads them is planned as the controller
// will plan it once the agent reports (not "no Auto node can serve").
func TestPlanAutoFromSlicesGPUAttributes(t *testing.T) {
	model, err := mig.DefaultCatalog().Model("H100-SXM5-80GB")
	if err != nil {
		t.Fatal(err)
	}
	g := migslices.PlannedGPU(model, 0)
	g.UUID, g.DriverVersion, g.PCIBusID = "GPU-2f6b4c1e-8d3a-4b7e-9c21-5a0d7e3f9b14", "550.54.15", "0000:07:00.0"
	whole, err := migslices.PlannedMIG(g, mig.Device{Profile: "7g.80gb", Start: 0})
	if err != nil {
		t.Fatal(err)
	}
	whole.UUID = "MIG-whole"
	for name, expr := range map[string]string{
		"parentUUID":    "device.attributes['mig.miglayout.io'].profile == '3g.40gb' && device.attributes['mig.miglayout.io'].parentUUID == '" + g.UUID + "'",
		"driverVersion": "device.attributes['mig.miglayout.io'].profile == '3g.40gb' && device.attributes['mig.miglayout.io'].driverVersion.isGreaterThan(semver('500.0.0'))",
		"pciBusID":      "device.attributes['mig.miglayout.io'].profile == '3g.40gb' && device.attributes['resource.kubernetes.io'].pciBusID == '0000:07:00.0'",
	} {
		t.Run(name, func(t *testing.T) {
			claim, pod := pending("trainer", "half-gpu", expr, 1000)
			objs := []client.Object{node("auto-node", map[string]string{"pool": "auto"}), migClass(), claim, pod,
				slice("auto-node", migslices.DefaultDriverName, migslices.MIGDevice(g, whole))}
			out, _, err := runWith(t, objs, "plan", "-f", "testdata/plan-auto.yaml")
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(out, "serves:   ml/trainer") || strings.Contains(out, "can serve") {
				t.Errorf("plan does not serve the pod whose selector reads the GPU's %s:\n%s", name, out)
			}
		})
	}
}

func TestPlanRefusesOtherKinds(t *testing.T) {
	_, _, err := runWith(t, []client.Object{}, "plan", "-f", "testdata/seed-article.yaml")
	if err == nil || !strings.Contains(err.Error(), "plan reads MigLayouts only") {
		t.Errorf("error %v", err)
	}
}

// TestPlanRefusesWhatApplyRefuses: a MigLayout of another API version, or
// none, or without a name, is refused by plan itself: the fake API server
// here admits anything, and a real one's dry run fails on the client side
// (no such kind), which plan would take for a check it could not make.
func TestPlanRefusesWhatApplyRefuses(t *testing.T) {
	doc, err := os.ReadFile("testdata/plan-static.yaml")
	if err != nil {
		t.Fatal(err)
	}
	const gv = "apiVersion: miglayout.io/v1alpha1\n"
	if !strings.Contains(string(doc), gv) {
		t.Fatalf("testdata/plan-static.yaml lacks %q", gv)
	}
	tests := map[string]struct{ old, new, want string }{
		"another group":    {gv, "apiVersion: example.com/v1alpha1\n", `apiVersion "example.com/v1alpha1": plan reads MigLayouts of miglayout.io/v1alpha1`},
		"another version":  {gv, "apiVersion: miglayout.io/v1beta1\n", `apiVersion "miglayout.io/v1beta1"`},
		"no API version":   {gv, "", `apiVersion "": plan reads MigLayouts of miglayout.io/v1alpha1`},
		"a generated name": {"  name: halves\n", "  generateName: halves-\n", "no metadata.name"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if !strings.Contains(string(doc), tc.old) {
				t.Fatalf("testdata/plan-static.yaml lacks %q", tc.old)
			}
			f := filepath.Join(t.TempDir(), "ml.yaml")
			if err := os.WriteFile(f, []byte(strings.Replace(string(doc), tc.old, tc.new, 1)), 0o600); err != nil {
				t.Fatal(err)
			}
			out, _, err := runWith(t, cluster(t), "plan", "-f", f)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("plan: %v, want an error saying %q; planned:\n%s", err, tc.want, out)
			}
		})
	}
}

// TestPlanRefusesNullValues: a profile count or a selector label left
// without a value is refused by plan itself, before it asks the API server
// (here a fake that admits anything), naming each such entry: decoded, the
// count would read as 0 and the label as "".
func TestPlanRefusesNullValues(t *testing.T) {
	f := filepath.Join(t.TempDir(), "nulls.yaml")
	doc := "apiVersion: miglayout.io/v1alpha1\nkind: MigLayout\nmetadata: {name: nulls}\nspec:\n" +
		"  nodeSelector:\n    matchLabels:\n      pool: a\n      zone:\n" +
		"  rules:\n  - profiles:\n      3g.40gb:\n      1g.10gb: 1\n"
	if err := os.WriteFile(f, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	_, _, err := runWith(t, []client.Object{node("gpu-a", map[string]string{"pool": "a"})}, "plan", "-f", f)
	if err == nil || !strings.Contains(err.Error(), "spec.nodeSelector.matchLabels[zone], spec.rules[0].profiles[3g.40gb] left without a value") {
		t.Errorf("plan of a file with values left empty: %v", err)
	}
}

// TestPlanTakeOver: a MigLayout taking over a node another one wrote is
// planned from the spec the node holds, as the controller computes it.
func TestPlanTakeOver(t *testing.T) {
	a100 := "A100-SXM4-80GB"
	nml := &v1alpha1.NodeMigLayout{
		ObjectMeta: metav1.ObjectMeta{Name: "gpu-a"},
		Spec: v1alpha1.NodeMigLayoutSpec{MigLayout: "old", GPUs: []v1alpha1.GPUSpec{
			{Index: 0, MIGEnabled: true, Layout: "3g.40gb@0,1g.10gb@6"}}},
		Status: v1alpha1.NodeMigLayoutStatus{GPUs: []v1alpha1.GPUStatus{
			{Index: 0, Product: "NVIDIA A100-SXM4-80GB", Model: a100, MIGEnabled: true, MIGPending: true, Layout: "", Phase: v1alpha1.PhasePending}}},
	}
	rules := []v1alpha1.LayoutRule{{Name: "same", Profiles: map[string]int32{"3g.40gb": 1, "1g.10gb": 1}}}
	want, _ := controller.DesiredGPUs(mig.DefaultCatalog(), rules, nml.Status.GPUs, nml.Spec.GPUs)
	if len(want) != 1 {
		t.Fatalf("controller wants %+v", want)
	}
	f := staticMigLayoutFile(t, "new", "[{name: same, profiles: {3g.40gb: 1, 1g.10gb: 1}}]")
	out, _, err := runWith(t, []client.Object{node("gpu-a", map[string]string{"pool": "a"}), nml}, "plan", "-f", f)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, want[0].Layout) {
		t.Errorf("plan does not show the controller's layout %s:\n%s", want[0].Layout, out)
	}
}

// TestPlanFirstMigLayout: before any MigLayout selects a node it has no
// NodeMigLayout; plan reads its GPUs from the ResourceSlices its agent
// publishes and shows the change.
func TestPlanFirstMigLayout(t *testing.T) {
	model, err := mig.DefaultCatalog().Model("A100-SXM4-80GB")
	if err != nil {
		t.Fatal(err)
	}
	g0, g1 := migslices.PlannedGPU(model, 0), migslices.PlannedGPU(model, 1)
	mig0, err := migslices.PlannedMIGDevice(g0, mig.Device{Profile: "7g.80gb", Start: 0})
	if err != nil {
		t.Fatal(err)
	}
	slice := &resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: "gpu-a-mig"},
		Spec: resourceapi.ResourceSliceSpec{Driver: migslices.DefaultDriverName, NodeName: ptr.To("gpu-a"),
			Pool:    resourceapi.ResourcePool{Name: "gpu-a", ResourceSliceCount: 1},
			Devices: []resourceapi.Device{mig0, migslices.GPUDevice(g1)}}}
	f := staticMigLayoutFile(t, "first", "[{name: halves, profiles: {3g.40gb: 2}}]")
	out, _, err := runWith(t, []client.Object{node("gpu-a", map[string]string{"pool": "a"}), slice}, "plan", "-f", f)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"GPUs as its ResourceSlices publish them",
		"7g.80gb@0 -> 3g.40gb@0,3g.40gb@4",
		"MIG off -> 3g.40gb@0,3g.40gb@4",
		"Summary: 2 GPUs would change on 1 node.",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("plan lacks %q:\n%s", want, out)
		}
	}
}

// staticMigLayoutFile writes a Static MigLayout selecting pool=a with the
// given rules (YAML flow form) and returns its path.
// autoMigLayoutDoc is an Auto MigLayout's YAML document: name, selecting
// the nodes labelled pool.
func autoMigLayoutDoc(name, pool string) string {
	return "apiVersion: miglayout.io/v1alpha1\nkind: MigLayout\nmetadata: {name: " + name + "}\n" +
		"spec:\n  mode: Auto\n  nodeSelector: {matchLabels: {pool: " + pool + "}}\n"
}

// manifestFile writes docs as one file of YAML documents and returns its
// path.
func manifestFile(t *testing.T, docs ...string) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "manifest.yaml")
	if err := os.WriteFile(f, []byte(strings.Join(docs, "---\n")), 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

func staticMigLayoutFile(t *testing.T, name, rules string) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), name+".yaml")
	doc := "apiVersion: miglayout.io/v1alpha1\nkind: MigLayout\nmetadata: {name: " + name + "}\n" +
		"spec:\n  nodeSelector: {matchLabels: {pool: a}}\n  rules: " + rules + "\n"
	if err := os.WriteFile(f, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

// TestPlanAsksServerAboutDocumentAsGiven: plan's dry run sends the
// MigLayout as the file gives it, an empty profiles map (MIG on, no device)
// included, which the typed object would drop (and the API server then
// refuse as a rule with neither profiles nor layout).
func TestPlanAsksServerAboutDocumentAsGiven(t *testing.T) {
	var sent *unstructured.Unstructured
	c := fake.NewClientBuilder().WithScheme(scheme()).WithObjects(cluster(t)...).WithInterceptorFuncs(interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			if u, ok := obj.(*unstructured.Unstructured); ok && u.GetKind() == "MigLayout" {
				sent = u.DeepCopy()
				return nil
			}
			return c.Create(ctx, obj, opts...)
		},
	}).Build()
	e := &env{now: func() time.Time { return time.Unix(1060, 0) }, newClient: func() (client.Client, error) { return c, nil }}
	cmd := newRootCommandEnv(e)
	cmd.SetOut(&bytes.Buffer{})
	cmd.SetErr(&bytes.Buffer{})
	cmd.SetArgs([]string{"plan", "-f", staticMigLayoutFile(t, "mig-on", "[{profiles: {}}]")})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	if sent == nil {
		t.Fatal("plan asked the API server nothing")
	}
	rules, _, _ := unstructured.NestedSlice(sent.Object, "spec", "rules")
	if len(rules) != 1 {
		t.Fatalf("rules sent: %v", rules)
	}
	if p, ok := rules[0].(map[string]any)["profiles"]; !ok || p == nil {
		t.Errorf("rule sent %v, want its empty profiles map", rules[0])
	}
}

// TestPlanFromSlicesKeepsAllocated: read from ResourceSlices, a device a
// claim holds stays where it is, as the controller keeps it, and the pool's
// newest generation of miglayout's slices alone counts: another DRA
// driver's slices and allocations in a pool of the same name (the node's)
// neither hide miglayout's devices nor hold one of the same name.
func TestPlanFromSlicesKeepsAllocated(t *testing.T) {
	model, err := mig.DefaultCatalog().Model("A100-SXM4-80GB")
	if err != nil {
		t.Fatal(err)
	}
	g0 := migslices.PlannedGPU(model, 0)
	var devs []resourceapi.Device
	for i := range 7 {
		d, err := migslices.PlannedMIGDevice(g0, mig.Device{Profile: "1g.10gb", Start: i})
		if err != nil {
			t.Fatal(err)
		}
		devs = append(devs, d)
	}
	slice := func(name string, gen int64, devices []resourceapi.Device) *resourceapi.ResourceSlice {
		return &resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: resourceapi.ResourceSliceSpec{Driver: migslices.DefaultDriverName, NodeName: ptr.To("gpu-a"),
				Pool: resourceapi.ResourcePool{Name: "gpu-a", Generation: gen, ResourceSliceCount: 1}, Devices: devices}}
	}
	held := devs[1].Name
	claim := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: "job"}}
	claim.Status.Allocation = &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{
		{Request: "gpu", Driver: migslices.DefaultDriverName, Pool: "gpu-a", Device: held}}}}
	rules := []v1alpha1.LayoutRule{{Name: "mixed", Profiles: map[string]int32{"3g.40gb": 1, "1g.10gb": 1}}}
	inventory := []v1alpha1.GPUStatus{{Index: 0, Product: g0.ProductName, Model: model.Name, MIGEnabled: true, MIGPending: true,
		Layout: "1g.10gb@0,1g.10gb@1,1g.10gb@2,1g.10gb@3,1g.10gb@4,1g.10gb@5,1g.10gb@6", InUse: "1g.10gb@1"}}
	want, _ := controller.DesiredGPUs(mig.DefaultCatalog(), rules, inventory, nil)
	if len(want) != 1 {
		t.Fatalf("controller wants %+v", want)
	}
	f := staticMigLayoutFile(t, "mixed", "[{name: mixed, profiles: {3g.40gb: 1, 1g.10gb: 1}}]")
	// NVIDIA's driver publishes the node's GPUs in a pool of the same
	// name, of a higher generation, and a claim holds one of its devices
	// named as one of miglayout's: neither is miglayout's.
	other := slice("nvidia", 9, []resourceapi.Device{{Name: devs[3].Name}})
	other.Spec.Driver = "gpu.nvidia.com"
	otherClaim := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: "nv"}}
	otherClaim.Status.Allocation = &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{
		{Request: "gpu", Driver: "gpu.nvidia.com", Pool: "gpu-a", Device: devs[3].Name}}}}
	for name, objs := range map[string][]client.Object{
		"a slice of the pool's previous generation beside the current one": {slice("old", 1, devs[:3]), slice("new", 2, devs)},
		"another driver's slice and claim in the pool":                     {slice("new", 2, devs), other, otherClaim},
	} {
		t.Run(name, func(t *testing.T) {
			out, _, err := runWith(t, append([]client.Object{node("gpu-a", map[string]string{"pool": "a"}), claim}, objs...), "plan", "-f", f)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(out, "-> "+want[0].Layout) || strings.Contains(out, "blocked") {
				t.Errorf("plan does not show the controller's layout %s, unblocked:\n%s", want[0].Layout, out)
			}
		})
	}
}

// TestConvertKeepsInputTemplates: a generated template never takes the name
// of a ResourceClaimTemplate of the input.
func TestConvertKeepsInputTemplates(t *testing.T) {
	out := convertStdin(t, `
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: app-gpu, namespace: ml}
spec:
  spec:
    devices:
      requests:
      - name: gpu
        exactly: {deviceClassName: gpu.miglayout.io}
---
apiVersion: v1
kind: Pod
metadata: {name: app, namespace: ml}
spec:
  containers:
  - {name: c, image: x, resources: {limits: {nvidia.com/gpu: 1}}}
`)
	if n := strings.Count(out, "name: app-gpu\n"); n != 1 {
		t.Errorf("ResourceClaimTemplate app-gpu named %d times:\n%s", n, out)
	}
}

// TestConvertTemplateNamesApartInTheDefaultNamespace: a workload without a
// namespace and one in "default" are told apart as if in one namespace: a
// Pod "app" and a Deployment "app" get templates of distinct names, each
// its own count.
func TestConvertTemplateNamesApartInTheDefaultNamespace(t *testing.T) {
	out := convertStdin(t, `
apiVersion: v1
kind: Pod
metadata: {name: app}
spec:
  containers:
  - {name: c, image: x, resources: {limits: {nvidia.com/gpu: 2}}}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: app, namespace: default}
spec:
  selector: {matchLabels: {app: app}}
  template:
    metadata: {labels: {app: app}}
    spec:
      containers:
      - {name: c, image: x, resources: {limits: {nvidia.com/gpu: 3}}}
`)
	got := map[string]int64{}
	for _, doc := range strings.Split(out, "\n---\n") {
		var tmpl resourceapi.ResourceClaimTemplate
		if err := yaml.Unmarshal([]byte(doc), &tmpl); err != nil || tmpl.Kind != "ResourceClaimTemplate" {
			continue
		}
		if _, dup := got[tmpl.Name]; dup {
			t.Errorf("ResourceClaimTemplate %s made twice:\n%s", tmpl.Name, out)
		}
		got[tmpl.Name] = tmpl.Spec.Spec.Devices.Requests[0].Exactly.Count
	}
	if diff := cmp.Diff(map[string]int64{"app-gpu": 2, "app-gpu-2": 3}, got); diff != "" {
		t.Errorf("templates and their counts (-want +got):\n%s\n%s", diff, out)
	}
}

// TestConvertPutsNamespacesFirst: the input's Namespaces come before the
// ResourceClaimTemplates made in them (kubectl applies in order), which
// come before the workloads, each group in input order.
func TestConvertPutsNamespacesFirst(t *testing.T) {
	out := convertStdin(t, `
apiVersion: apps/v1
kind: Deployment
metadata: {name: infer, namespace: ml}
spec:
  selector: {matchLabels: {app: infer}}
  template:
    metadata: {labels: {app: infer}}
    spec:
      containers:
      - {name: c, image: x, resources: {limits: {nvidia.com/mig-3g.40gb: 1}}}
---
apiVersion: v1
kind: Namespace
metadata: {name: ml}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: settings, namespace: ml}
`)
	var kinds []string
	for _, doc := range strings.Split(out, "\n---\n") {
		var m metav1.TypeMeta
		if err := yaml.Unmarshal([]byte(doc), &m); err != nil {
			t.Fatal(err)
		}
		kinds = append(kinds, m.Kind)
	}
	if diff := cmp.Diff([]string{"Namespace", "ResourceClaimTemplate", "Deployment", "ConfigMap"}, kinds); diff != "" {
		t.Errorf("kinds in output order (-want +got):\n%s\n%s", diff, out)
	}
}

// convertStdin runs convert on input given on standard input and returns
// its output.
func convertStdin(t *testing.T, input string) string {
	t.Helper()
	cmd := newRootCommandEnv(&env{stdin: strings.NewReader(input)})
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&bytes.Buffer{})
	cmd.SetArgs([]string{"convert", "-f", "-"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	return out.String()
}

// TestPlanSaysWhenAResetIsNeeded: turning MIG mode off on an A100 (Ampere:
// the change waits for a GPU reset) says so; on an H100 it does not.
func TestPlanSaysWhenAResetIsNeeded(t *testing.T) {
	f := filepath.Join(t.TempDir(), "mig-off.yaml")
	if err := os.WriteFile(f, []byte(`apiVersion: miglayout.io/v1alpha1
kind: MigLayout
metadata:
  name: mig-off
spec:
  nodeSelector:
    matchLabels:
      pool: gpu
  rules:
  - name: mig-off
    migEnabled: false
`), 0o644); err != nil {
		t.Fatal(err)
	}
	out, _, err := runWith(t, cluster(t), "plan", "-f", f)
	if err != nil {
		t.Fatal(err)
	}
	resets := 0
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, "reset:") {
			resets++
			if !strings.Contains(l, "A100-SXM4-80GB changes MIG mode through a GPU reset") || !strings.Contains(l, "ResetRequired") {
				t.Errorf("reset line %q", l)
			}
		}
	}
	// gpu-node-1's two A100s change MIG mode; gpu-node-2's H100 (one with
	// MIG on) does not need a reset.
	if resets != 2 {
		t.Errorf("%d reset lines, want 2 (the A100s):\n%s", resets, out)
	}
}

// TestPlanAndStatusOfOddGPUs: a GPU its agent reports unreadable is left as
// it is (its MIG mode is unknown) and drawn so; a GPU whose change to the
// MIG mode asked for is pending waits for a reset; one whose pending change
// the layout no longer asks for is cancelled, as the agent does.
func TestPlanAndStatusOfOddGPUs(t *testing.T) {
	a100, product := "A100-SXM4-80GB", "NVIDIA A100-SXM4-80GB"
	nml := &v1alpha1.NodeMigLayout{
		ObjectMeta: metav1.ObjectMeta{Name: "odd-node"},
		Status: v1alpha1.NodeMigLayoutStatus{GPUs: []v1alpha1.GPUStatus{
			{Index: 0, Product: product, Model: a100, Phase: v1alpha1.PhaseFailed, Reason: v1alpha1.ReasonGPUUnreadable,
				Message: "NVML cannot read the GPU: ERROR_GPU_IS_LOST"},
			{Index: 1, Product: product, Model: a100, MIGEnabled: false, MIGPending: true, Phase: v1alpha1.PhaseBlocked, Reason: v1alpha1.ReasonResetRequired},
			{Index: 2, Product: product, Model: a100, MIGEnabled: false, MIGPending: true, Phase: v1alpha1.PhaseBlocked, Reason: v1alpha1.ReasonResetRequired},
		}},
	}
	f := filepath.Join(t.TempDir(), "odd.yaml")
	if err := os.WriteFile(f, []byte(`apiVersion: miglayout.io/v1alpha1
kind: MigLayout
metadata:
  name: odd
spec:
  nodeSelector:
    matchLabels:
      pool: odd
  rules:
  - name: halves
    gpuIndices: [0, 1]
    profiles: {3g.40gb: 2}
  - name: whole
    gpuIndices: [2]
    migEnabled: false
`), 0o644); err != nil {
		t.Fatal(err)
	}
	objs := []client.Object{node("odd-node", map[string]string{"pool": "odd"}), nml}
	out, _, err := runWith(t, objs, "plan", "-f", f)
	if err != nil {
		t.Fatal(err)
	}
	lines := map[string]string{}
	gpu := ""
	for _, l := range strings.Split(out, "\n") {
		if f := strings.Fields(l); len(f) > 0 && strings.HasPrefix(f[0], "gpu-") {
			gpu = f[0]
		}
		if gpu != "" {
			lines[gpu] += l + "\n"
		}
	}
	for gpu, want := range map[string]string{
		"gpu-0": "unreadable, left as it is",
		"gpu-1": "the MIG mode change to on is pending: the GPU stays ResetRequired",
		"gpu-2": "cancels the pending MIG mode change to on",
	} {
		if !strings.Contains(lines[gpu], want) {
			t.Errorf("%s: want %q in\n%s", gpu, want, lines[gpu])
		}
	}
	if strings.Contains(lines["gpu-0"], "destroy") || strings.Contains(lines["gpu-2"], "no change") {
		t.Errorf("plan:\n%s", out)
	}
	if !strings.Contains(out, "Summary: 2 GPUs would change") {
		t.Errorf("summary: want 2 GPUs (the unreadable one left out):\n%s", out)
	}

	status, _, err := runWith(t, objs, "status")
	if err != nil {
		t.Fatal(err)
	}
	gpu0, _, _ := strings.Cut(status, "gpu-1")
	if !strings.Contains(gpu0, "[GPU unreadable") || strings.Contains(gpu0, "MIG off") {
		t.Errorf("status does not draw GPU 0 as unreadable (or draws it MIG off):\n%s", status)
	}
}

// TestPlanMigLayoutsOfOneFileTogether: two MigLayouts of one file that
// select the same node conflict, as they would once applied: the node is
// left as it is under both; a name given twice is refused.
func TestPlanMigLayoutsOfOneFileTogether(t *testing.T) {
	doc := func(name, profile string) string {
		return fmt.Sprintf(`apiVersion: miglayout.io/v1alpha1
kind: MigLayout
metadata:
  name: %s
spec:
  nodeSelector:
    matchLabels:
      pool: gpu
  rules:
  - name: r
    profiles: {%s}
`, name, profile)
	}
	dir := t.TempDir()
	both := filepath.Join(dir, "both.yaml")
	if err := os.WriteFile(both, []byte(doc("halves", "3g.40gb: 2")+"---\n"+doc("sevenths", "1g.10gb: 7")), 0o644); err != nil {
		t.Fatal(err)
	}
	out, _, err := runWith(t, cluster(t), "plan", "-f", both)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(out, "conflict: "); n != 2 {
		t.Errorf("%d conflict lines, want one per MigLayout:\n%s", n, out)
	}
	if strings.Contains(out, "destroy:") || !strings.Contains(out, "another MigLayout selects it too") {
		t.Errorf("a node both select is planned:\n%s", out)
	}
	twice := filepath.Join(dir, "twice.yaml")
	if err := os.WriteFile(twice, []byte(doc("halves", "3g.40gb: 2")+"---\n"+doc("halves", "1g.10gb: 7")), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := runWith(t, cluster(t), "plan", "-f", twice); err == nil || !strings.Contains(err.Error(), `MigLayout "halves" is given twice`) {
		t.Errorf("a name given twice: %v", err)
	}
}

// TestPlanAsksTheAPIServer: plan has the API server admit each MigLayout in
// a dry run (its CEL rules are the API server's) and stores nothing; one it
// refuses is not planned (schema, CEL, or admission: a 403 RBAC would have
// allowed); one it cannot ask about is planned with a warning.
func TestPlanAsksTheAPIServer(t *testing.T) {
	objs := cluster(t)
	var dryRuns int
	refuse := fmt.Errorf("refusing: %w", apierrors.NewInvalid(schema.GroupKind{Group: "miglayout.io", Kind: "MigLayout"}, "halves",
		field.ErrorList{field.Invalid(field.NewPath("spec", "rules").Index(0), "", "give either profiles (counts) or layout (explicit placements), not both")}))
	denied := fmt.Errorf("refusing: %w", apierrors.NewForbidden(schema.GroupResource{Group: "miglayout.io", Resource: "miglayouts"}, "halves",
		errors.New("ValidatingAdmissionPolicy 'site-rules' denied request: give either profiles (counts) or layout, not both")))
	for name, tc := range map[string]struct {
		answer   error
		rbac     bool // what the SelfSubjectAccessReview says
		wantErr  string
		wantWarn string
	}{
		"admitted":                 {nil, true, "", ""},
		"refused":                  {refuse, true, "would be refused by the API server", ""},
		"forbidden by RBAC":        {apierrors.NewForbidden(schema.GroupResource{Group: "miglayout.io", Resource: "miglayouts"}, "halves", errors.New("no create")), false, "", "was not checked by the API server"},
		"forbidden with RBAC's OK": {denied, true, "would be refused by the API server", ""},
	} {
		t.Run(name, func(t *testing.T) {
			dryRuns = 0
			c := fake.NewClientBuilder().WithScheme(scheme()).WithObjects(objs...).WithInterceptorFuncs(interceptor.Funcs{
				Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
					if review, ok := obj.(*authorizationv1.SelfSubjectAccessReview); ok {
						a := review.Spec.ResourceAttributes
						if a == nil || a.Resource != "miglayouts" || a.Group != "miglayout.io" || a.Verb != "create" || a.Name != "halves" {
							t.Errorf("access review of %+v", a)
						}
						review.Status.Allowed = tc.rbac
						return nil
					}
					o := &client.CreateOptions{}
					o.ApplyOptions(opts)
					if len(o.DryRun) == 0 {
						t.Errorf("plan created %s for real", obj.GetName())
					}
					dryRuns++
					if tc.answer != nil {
						return tc.answer
					}
					return c.Create(ctx, obj, opts...)
				}}).Build()
			_, errOut, err := planWith(c)
			switch {
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), "not both")):
				t.Errorf("error %v, want %q with the API server's reason", err, tc.wantErr)
			case tc.wantErr == "" && err != nil:
				t.Errorf("error %v", err)
			}
			if tc.wantWarn != "" && !strings.Contains(errOut.String(), tc.wantWarn) {
				t.Errorf("stderr %q, want %q", errOut.String(), tc.wantWarn)
			}
			if dryRuns != 1 {
				t.Errorf("%d dry runs, want 1", dryRuns)
			}
			if err := c.Get(context.Background(), client.ObjectKey{Name: "halves"}, &v1alpha1.MigLayout{}); !apierrors.IsNotFound(err) {
				t.Errorf("the MigLayout was stored: %v", err)
			}
		})
	}
}

// TestBox: a label too long for its box is cut and its mark kept; an
// unmarked one is not given its last letter as if it were a mark.
func TestBox(t *testing.T) {
	for _, tc := range []struct {
		label, mark string
		n           int
		want        string
	}{
		{"1g.10gb", "*", 1, "[1g.10gb*]"},
		{"1g.10gb+me", "", 1, "[1g.10gb+]"},
		{"1g.10gb+me", "~", 1, "[1g.10gb~]"},
		{"3g.40gb", "", 4, "[3g.40gb" + strings.Repeat(" ", 31) + "]"},
	} {
		if got := box(tc.label, tc.mark, tc.n); got != tc.want {
			t.Errorf("box(%q, %q, %d) = %q, want %q", tc.label, tc.mark, tc.n, got, tc.want)
		}
	}
}

// TestPlanExitCode: with --exit-code, plan exits 0 when nothing would
// change, 2 when GPUs would, 3 when something needs a look first (a change
// blocked by a device in use; a rule that decides no GPU, e.g. a misspelt
// productName; a node selector that selects no node, e.g. a misspelt
// label); without it, 0.
func TestPlanExitCode(t *testing.T) {
	free := reportedA100("free-node", "7g.80gb@0")
	layout := func(t *testing.T, profiles string) string {
		f := filepath.Join(t.TempDir(), "ml.yaml")
		doc := "apiVersion: miglayout.io/v1alpha1\nkind: MigLayout\nmetadata:\n  name: exit\nspec:\n  nodeSelector:\n    matchLabels:\n      pool: free\n  rules:\n  - profiles: {" + profiles + "}\n"
		if err := os.WriteFile(f, []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
		return f
	}
	code := func(err error) int {
		var c exitCode
		switch {
		case errors.As(err, &c):
			return int(c)
		case err != nil:
			return 1
		}
		return 0
	}
	objs := []client.Object{node("free-node", map[string]string{"pool": "free"}), free}
	// The same node with a change to 3g.40gb×2 in flight.
	flying := free.DeepCopy()
	flying.Spec.GPUs = []v1alpha1.GPUSpec{{Index: 0, MIGEnabled: true, Layout: "3g.40gb@0,3g.40gb@4"}}
	cancel := []client.Object{node("free-node", map[string]string{"pool": "free"}), flying}
	for name, tc := range map[string]struct {
		objs []client.Object
		args []string
		want int
	}{
		"no change":                  {objs, []string{"-f", layout(t, "7g.80gb: 1")}, 0},
		"a rule that matches no GPU": {objs, []string{"-f", layout(t, "7g.80gb: 1}\n    productName: H100-SXM-80GB\n  - profiles: {7g.80gb: 1")}, 3},
		"a change":                   {objs, []string{"-f", layout(t, "3g.40gb: 2")}, 2},
		"a selector of no node":      {[]client.Object{node("free-node", map[string]string{"pool": "other"}), free}, []string{"-f", layout(t, "7g.80gb: 1")}, 3},
		"a cancel only":              {cancel, []string{"-f", layout(t, "7g.80gb: 1")}, 2},
		"a blocked change":           {cluster(t), []string{"-f", "testdata/plan-static.yaml"}, 3},
		"without the option":         {cluster(t), []string{"-f", "testdata/plan-static.yaml"}, -1},
	} {
		t.Run(name, func(t *testing.T) {
			args := append([]string{"plan"}, tc.args...)
			want := tc.want
			if want >= 0 {
				args = append(args, "--exit-code")
			} else {
				want = 0
			}
			if _, _, err := runWith(t, tc.objs, args...); code(err) != want {
				t.Errorf("exit status %d (%v), want %d", code(err), err, want)
			}
		})
	}
}

// TestPlanListsReleasedNodes: a MigLayout whose selector no longer matches
// a node it manages says the node is released (its NodeMigLayout goes, its
// GPUs keep their layout). A NodeMigLayout of its name that it does not
// control (left by an earlier MigLayout deleted with --cascade=orphan) is
// not released, as the controller does not release it.
func TestPlanListsReleasedNodes(t *testing.T) {
	stored := &v1alpha1.MigLayout{ObjectMeta: metav1.ObjectMeta{Name: "exit", UID: "uid-exit"}}
	nml := &v1alpha1.NodeMigLayout{ObjectMeta: metav1.ObjectMeta{Name: "old-node", OwnerReferences: []metav1.OwnerReference{{
		APIVersion: v1alpha1.GroupVersion.String(), Kind: "MigLayout", Name: "exit", UID: "uid-exit", Controller: ptr.To(true)}}},
		Spec: v1alpha1.NodeMigLayoutSpec{MigLayout: "exit"}}
	objs := []client.Object{node("old-node", map[string]string{"pool": "old"}), nml, stored}
	f := filepath.Join(t.TempDir(), "ml.yaml")
	doc := "apiVersion: miglayout.io/v1alpha1\nkind: MigLayout\nmetadata:\n  name: exit\nspec:\n  nodeSelector:\n    matchLabels:\n      pool: new\n  rules:\n  - profiles: {7g.80gb: 1}\n"
	if err := os.WriteFile(f, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	out, _, err := runWith(t, objs, "plan", "-f", f)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "no longer selects old-node: released, their GPUs keep the layouts they have") {
		t.Errorf("plan does not list the released node:\n%s", out)
	}
	if strings.Contains(out, "cancels") {
		t.Errorf("plan cancels a change on a node with none in flight:\n%s", out)
	}

	// With a change in flight on its GPU 0, the release stops it: told,
	// and counted as a change (--exit-code 2).
	nml.Spec.GPUs = []v1alpha1.GPUSpec{{Index: 0, MIGEnabled: true, Layout: "3g.40gb@0,3g.40gb@4"}, {Index: 1, MIGEnabled: true, Layout: "7g.80gb@0"}}
	nml.Status.GPUs = []v1alpha1.GPUStatus{
		{Index: 0, Model: "A100-SXM4-80GB", MIGEnabled: true, MIGPending: true, Layout: "7g.80gb@0", Phase: v1alpha1.PhaseDraining},
		{Index: 1, Model: "A100-SXM4-80GB", MIGEnabled: true, MIGPending: true, Layout: "7g.80gb@0", Phase: v1alpha1.PhaseReady}}
	// (A node it selects now, so that the exit status is not NoNodes'.)
	out, _, err = runWith(t, []client.Object{node("old-node", map[string]string{"pool": "old"}), nml, stored,
		node("new-node", map[string]string{"pool": "new"})}, "plan", "--exit-code", "-f", f)
	if want := "cancels the changes in flight (the agent stops where it is) on old-node gpu-0 (to 3g.40gb@0,3g.40gb@4)\n"; !strings.Contains(out, want) {
		t.Errorf("plan lacks %q:\n%s", want, out)
	}
	var code exitCode
	if !errors.As(err, &code) || code != 2 {
		t.Errorf("exit %v, want 2:\n%s", err, out)
	}

	// Orphaned: no owner; its agent goes on with the change.
	orphan := nml.DeepCopy()
	orphan.OwnerReferences = nil
	out, _, err = runWith(t, []client.Object{node("old-node", map[string]string{"pool": "old"}), orphan, stored,
		node("new-node", map[string]string{"pool": "new"})}, "plan", "--exit-code", "-f", f)
	if strings.Contains(out, "old-node") || err != nil {
		t.Errorf("plan releases a NodeMigLayout the MigLayout does not control (exit %v):\n%s", err, out)
	}
}

// TestPlanForbiddenGetIsNotAdmission: the MigLayout exists and the user
// may create MigLayouts but not read this one, so plan cannot ask about
// the update. That 403 is RBAC's, not admission's: plan warns and plans
// as given.
func TestPlanForbiddenGetIsNotAdmission(t *testing.T) {
	objs := cluster(t)
	gr := schema.GroupResource{Group: "miglayout.io", Resource: "miglayouts"}
	c := fake.NewClientBuilder().WithScheme(scheme()).WithObjects(objs...).WithInterceptorFuncs(interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			if review, ok := obj.(*authorizationv1.SelfSubjectAccessReview); ok {
				// RBAC: create allowed, get and update not.
				review.Status.Allowed = review.Spec.ResourceAttributes.Verb == "create"
				return nil
			}
			if u, ok := obj.(*unstructured.Unstructured); ok && u.GetKind() == "MigLayout" {
				return apierrors.NewAlreadyExists(gr, obj.GetName())
			}
			return c.Create(ctx, obj, opts...)
		},
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if _, ok := obj.(*v1alpha1.MigLayout); ok && key.Name == "halves" {
				return apierrors.NewForbidden(gr, key.Name, errors.New(`User "u" cannot get resource "miglayouts"`))
			}
			return c.Get(ctx, key, obj, opts...)
		},
	}).Build()
	_, errOut, err := planWith(c)
	if err != nil {
		t.Errorf("plan refused: %v\nstderr: %s", err, errOut.String())
	}
	if !strings.Contains(errOut.String(), "was not checked by the API server") {
		t.Errorf("stderr %q, want the not-checked warning", errOut.String())
	}
}

// planWith runs plan of testdata/plan-static.yaml against c.
func planWith(c client.Client) (stdout, stderr *bytes.Buffer, err error) {
	e := &env{now: func() time.Time { return time.Unix(1060, 0) }, newClient: func() (client.Client, error) { return c, nil }}
	cmd := newRootCommandEnv(e)
	stdout, stderr = &bytes.Buffer{}, &bytes.Buffer{}
	cmd.SetOut(stdout)
	cmd.SetErr(stderr)
	cmd.SetArgs([]string{"plan", "-f", "testdata/plan-static.yaml"})
	return stdout, stderr, cmd.Execute()
}

// TestPlanMaxNodesChanging: plan tells that a Static change bounded by
// spec.maxNodesChanging reaches the nodes a few at a time, and says nothing
// of it where the bound is not reached.
func TestPlanMaxNodesChanging(t *testing.T) {
	var objs []client.Object
	for _, n := range []string{"gpu-a", "gpu-b", "gpu-c"} {
		objs = append(objs, node(n, map[string]string{"pool": "a"}), &v1alpha1.NodeMigLayout{ObjectMeta: metav1.ObjectMeta{Name: n},
			Status: v1alpha1.NodeMigLayoutStatus{GPUs: []v1alpha1.GPUStatus{{Index: 0, Product: "NVIDIA A100-SXM4-80GB", Model: "A100-SXM4-80GB",
				MIGEnabled: true, MIGPending: true, Layout: "7g.80gb@0", Phase: v1alpha1.PhaseReady}}}})
	}
	const note = "at most 2 node(s) change at once (spec.maxNodesChanging)"
	for rules, want := range map[string]bool{
		"[{profiles: {3g.40gb: 2}}]\n  maxNodesChanging: 2": true,
		"[{profiles: {3g.40gb: 2}}]\n  maxNodesChanging: 3": false,
	} {
		out, _, err := runWith(t, objs, "plan", "-f", staticMigLayoutFile(t, "rollout", rules))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(out, "Summary: 3 GPUs would change on 3 nodes") || strings.Contains(out, note) != want {
			t.Errorf("rules %s: plan says %q: %v, want %v:\n%s", rules, note, strings.Contains(out, note), want, out)
		}
	}
}

// TestStatusShowsGPUsLeftOutForAnInvalidRule: a GPU whose rule is invalid
// is left out of the NodeMigLayout's spec, and its agent reports it Ready
// (not managed): status shows the controller's phase for it and its row's
// message, so the node does not look fine where its MigLayout fails.
func TestStatusShowsGPUsLeftOutForAnInvalidRule(t *testing.T) {
	ml := &v1alpha1.MigLayout{ObjectMeta: metav1.ObjectMeta{Name: "halves"},
		Status: v1alpha1.MigLayoutStatus{Nodes: []v1alpha1.NodeRow{{Node: "gpu-node-1", Phase: v1alpha1.PhaseFailed,
			Message: `gpu-0: rule "halves": 5g.33gb is not a profile of A100-SXM4-80GB`,
			GPUs:    []v1alpha1.GPURow{{Index: 0, Phase: v1alpha1.PhaseFailed}, {Index: 1, Phase: v1alpha1.PhaseBlocked}}}}}}
	out, _, err := runWith(t, append(cluster(t), ml), "status")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(out, "\n")
	var head, gpu0, head2 string
	next := ""
	for i, l := range lines {
		switch {
		case strings.HasPrefix(l, "gpu-node-1 "):
			head, next = l, lines[i+1]
		case strings.HasPrefix(l, "gpu-node-2 "):
			head2 = l
		case strings.HasPrefix(strings.TrimSpace(l), "gpu-0 ") && gpu0 == "":
			gpu0 = l
		}
	}
	if !strings.HasSuffix(head, "MigLayout row: Failed") || !strings.Contains(next, "5g.33gb is not a profile") {
		t.Errorf("gpu-node-1 does not show its MigLayout row failing:\n%s", out)
	}
	if !strings.Contains(gpu0, " Failed ") {
		t.Errorf("gpu-0 of gpu-node-1 shown %q, want the controller's phase Failed:\n%s", gpu0, out)
	}
	if strings.Contains(head2, "MigLayout row") {
		t.Errorf("gpu-node-2 (no failing row) marked:\n%s", out)
	}
}

// TestStatusShowsNodeLeftAsItIs: a node its MigLayout leaves as it is
// (another MigLayout selects it too: the row has a message, no phase) is
// marked, with the row's message.
func TestStatusShowsNodeLeftAsItIs(t *testing.T) {
	ml := &v1alpha1.MigLayout{ObjectMeta: metav1.ObjectMeta{Name: "halves"},
		Status: v1alpha1.MigLayoutStatus{Nodes: []v1alpha1.NodeRow{{Node: "gpu-node-1",
			Message: `MigLayout "other" selects this node too; it is left as it is`}}}}
	out, _, err := runWith(t, append(cluster(t), ml), "status")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(out, "\n")
	i := slices.IndexFunc(lines, func(l string) bool { return strings.HasPrefix(l, "gpu-node-1 ") })
	if i < 0 || !strings.HasSuffix(lines[i], "LEFT AS IT IS") || !strings.Contains(lines[i+1], `MigLayout "other" selects this node too`) {
		t.Errorf("gpu-node-1 not marked as left as it is:\n%s", out)
	}
}

// TestStatusShowsHeldNodeAndSpecProblems: a node whose agent reports it
// Ready while its MigLayout holds its new layout back (maxNodesChanging)
// shows the MigLayout's row, and a MigLayout whose spec has a problem no
// GPU's row shows (a rule that decides no GPU) says so first.
func TestStatusShowsHeldNodeAndSpecProblems(t *testing.T) {
	objs := cluster(t)
	for _, o := range objs {
		if nml, ok := o.(*v1alpha1.NodeMigLayout); ok && nml.Name == "gpu-node-1" {
			nml.Status.Conditions = []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue, Reason: "LayoutApplied"}}
		}
	}
	const waits = "waits its turn: at most 1 node(s) change at once (spec.maxNodesChanging), 1 changing now: gpu-node-3 (gpu 0 Blocked, DeviceInUse)"
	const noGPU = `rule "t4" matches no GPU (2 selected nodes; GPUs: 4× A100-SXM4-80GB)`
	ml := &v1alpha1.MigLayout{ObjectMeta: metav1.ObjectMeta{Name: "halves"},
		Status: v1alpha1.MigLayoutStatus{
			// A GPU problem's reason comes first: the spec problem is
			// still told.
			Conditions: []metav1.Condition{{Type: v1alpha1.ConditionDegraded, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonInvalidLayout,
				Message: "1 GPU problem, 1 spec problem: node gpu-node-2 gpu 1 (NVIDIA H100 80GB HBM3), rule \"x\": does not fit, " + noGPU}},
			Nodes: []v1alpha1.NodeRow{{Node: "gpu-node-1", Phase: v1alpha1.PhasePending, Message: waits}}}}
	out, _, err := runWith(t, append(objs, ml), "status")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(out, "\n")
	if !strings.HasPrefix(lines[0], "MigLayout halves: Degraded (InvalidLayout): ") || !strings.Contains(lines[0], noGPU) {
		t.Errorf("first line %q, want the spec problem", lines[0])
	}
	i := slices.IndexFunc(lines, func(l string) bool { return strings.HasPrefix(l, "gpu-node-1 ") })
	if i < 0 || !strings.HasSuffix(lines[i], "MigLayout row: Pending") || !strings.Contains(lines[i+1], waits) {
		t.Errorf("gpu-node-1 not shown waiting its turn:\n%s", out)
	}

	// Paused, the MigLayout is said to be, first.
	ml.Spec.Paused = true
	out, _, err = runWith(t, append(objs, ml), "status")
	if err != nil {
		t.Fatal(err)
	}
	lines = strings.Split(out, "\n")
	if lines[0] != "MigLayout halves: paused (spec.paused): no change is started on its nodes until it is resumed" || !strings.HasPrefix(lines[1], "MigLayout halves: Degraded") {
		t.Errorf("paused: first lines %q, want the pause, then the spec problem", lines[:2])
	}
}

// TestPlanAutoMissingSpares: spares the policy asks for that the plan does
// not make (here: a GPU split into free 3g.40gb devices gets no 1g.10gb
// spare, which would destroy one) are listed per node and profile.
func TestPlanAutoMissingSpares(t *testing.T) {
	nml := &v1alpha1.NodeMigLayout{
		ObjectMeta: metav1.ObjectMeta{Name: "auto-node"},
		Status: v1alpha1.NodeMigLayoutStatus{GPUs: []v1alpha1.GPUStatus{
			{Index: 0, Product: "NVIDIA H100 80GB HBM3", Model: "H100-SXM5-80GB", MIGEnabled: true, MIGPending: true, Layout: "3g.40gb@0,3g.40gb@4", Phase: v1alpha1.PhaseReady},
		}},
	}
	objs := []client.Object{node("auto-node", map[string]string{"pool": "auto"}), nml, migClass()}
	out, _, err := runWith(t, objs, "plan", "-f", "testdata/plan-auto-spares.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if want := "Spares not made (they would destroy a device, or the limits on GPUs changed at once are reached):\n  auto-node: 2 1g.10gb\n"; !strings.Contains(out, want) {
		t.Errorf("plan lacks %q:\n%s", want, out)
	}
}

// TestStatusXidsFromTheStatusRow: an Xid a GPU's status row lists (a GPU
// with MIG mode on and no device, or taints the API server dropped) is
// named under the GPU though no published device carries its taint.
func TestStatusXidsFromTheStatusRow(t *testing.T) {
	objs := cluster(t)
	for _, o := range objs {
		if nml, ok := o.(*v1alpha1.NodeMigLayout); ok && nml.Name == "gpu-node-1" {
			nml.Status.GPUs[0].Xids = []v1alpha1.GPUXid{{Xid: 79}}
		}
	}
	out, _, err := runWith(t, objs, "status", "gpu-node-1")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(out, "\n")
	i := slices.IndexFunc(lines, func(l string) bool { return strings.HasPrefix(strings.TrimSpace(l), "gpu-0 ") })
	if i < 0 || i+1 >= len(lines) {
		t.Fatalf("no gpu-0 row:\n%s", out)
	}
	want := "Xid 79 hit devices here (reported Unhealthy, kept from new claims); once the GPU was reset: kubectl miglayout clear-xids gpu-node-1 --gpu 0"
	if got := strings.TrimSpace(lines[i+1]); got != want {
		t.Errorf("line under gpu-0:\n%q\nwant\n%q\nin:\n%s", got, want, out)
	}
	if strings.Count(out, "hit devices here") != 1 {
		t.Errorf("another GPU is said to be hit:\n%s", out)
	}
}
