package helm

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"
)

// TestMain silences Helm's log: in lint mode a template's fail is logged
// (INFO funcMap fail ...), which the tests expect and check otherwise.
func TestMain(m *testing.M) {
	slog.SetDefault(slog.New(slog.NewTextHandler(io.Discard, nil)))
	os.Exit(m.Run())
}

var update = flag.Bool("update", false, "rewrite the chart's copies of generated files (crds/, files/rbac/)")

const repoRoot = "../.."

// TestCRDsInSync: the chart's crds/ are the CRDs that `make generate` writes
// to deploy/crds, byte for byte.
func TestCRDsInSync(t *testing.T) {
	src, err := filepath.Glob(filepath.Join(repoRoot, "deploy/crds/*.yaml"))
	if err != nil || len(src) == 0 {
		t.Fatalf("no CRDs in deploy/crds: %v", err)
	}
	dst := filepath.Join(ChartDir(), "crds")
	want := map[string][]byte{}
	for _, f := range src {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		want[filepath.Base(f)] = b
	}
	if *update {
		old, _ := filepath.Glob(filepath.Join(dst, "*.yaml"))
		for _, f := range old {
			if _, ok := want[filepath.Base(f)]; !ok {
				if err := os.Remove(f); err != nil {
					t.Fatal(err)
				}
			}
		}
		for name, b := range want {
			if err := os.WriteFile(filepath.Join(dst, name), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	got, _ := filepath.Glob(filepath.Join(dst, "*.yaml"))
	gotNames := make([]string, len(got))
	for i, f := range got {
		gotNames[i] = filepath.Base(f)
	}
	if diff := cmp.Diff(slices.Sorted(maps.Keys(want)), gotNames); diff != "" {
		t.Errorf("deploy/helm/miglayout/crds differs from deploy/crds (-deploy/crds +chart); run go test ./deploy/helm -update:\n%s", diff)
	}
	for name, b := range want {
		g, err := os.ReadFile(filepath.Join(dst, name))
		if err == nil && !bytes.Equal(g, b) {
			t.Errorf("chart crds/%s differs from deploy/crds/%s; run go test ./deploy/helm -update", name, name)
		}
	}
}

// rbacSources are the packages whose +kubebuilder:rbac markers make each
// component's ClusterRole.
var rbacSources = map[string][]string{
	"controller": {"./pkg/controller/...", "./cmd/miglayout-controller/..."},
	"agent":      {"./pkg/agent/...", "./pkg/plugin/...", "./cmd/miglayout-agent/..."},
}

// TestRBACInSync: files/rbac/<component>.yaml is what controller-gen makes of
// the markers now.
func TestRBACInSync(t *testing.T) {
	if testing.Short() {
		t.Skip("runs controller-gen (~20 s)")
	}
	for _, component := range slices.Sorted(maps.Keys(rbacSources)) {
		args := []string{"tool", "controller-gen", "rbac:roleName=miglayout-" + component}
		for _, p := range rbacSources[component] {
			args = append(args, "paths="+p)
		}
		args = append(args, "output:rbac:stdout")
		cmd := exec.Command("go", args...)
		cmd.Dir = repoRoot
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
		}
		path := filepath.Join(ChartDir(), "files/rbac", component+".yaml")
		if *update {
			if err := os.WriteFile(path, out, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		have, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(string(out), string(have)); diff != "" {
			t.Errorf("%s is stale (-controller-gen +file); run go test ./deploy/helm -update:\n%s", path, diff)
		}
	}
}

func render(t *testing.T, values map[string]any) *Rendered {
	t.Helper()
	r, err := Render(Options{Values: values})
	if err != nil {
		t.Fatalf("rendering: %v", err)
	}
	return r
}

func find(t *testing.T, r *Rendered, kind, name string) *unstructured.Unstructured {
	t.Helper()
	for _, o := range r.Objects {
		if o.GetKind() == kind && o.GetName() == name {
			return o
		}
	}
	t.Fatalf("no %s %s rendered", kind, name)
	return nil
}

func convert[T any](t *testing.T, u *unstructured.Unstructured) *T {
	t.Helper()
	out := new(T)
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(u.Object, out, true); err != nil {
		t.Fatalf("%s %s does not decode strictly: %v", u.GetKind(), u.GetName(), err)
	}
	return out
}

func TestRenderDefaults(t *testing.T) {
	r := render(t, nil)
	var got []string
	for _, o := range r.Objects {
		got = append(got, o.GetKind()+"/"+o.GetName())
	}
	want := []string{
		"ServiceAccount/miglayout-controller",
		"ServiceAccount/miglayout-agent",
		"ClusterRole/miglayout-agent",
		"ClusterRole/miglayout-controller",
		"ClusterRole/miglayout-editor",
		"ClusterRole/miglayout-viewer",
		"ClusterRoleBinding/miglayout-agent",
		"ClusterRoleBinding/miglayout-controller",
		"Role/miglayout-agent",
		"Role/miglayout-controller",
		"Role/miglayout-controller-scheduler-lease",
		"RoleBinding/miglayout-agent",
		"RoleBinding/miglayout-controller",
		"RoleBinding/miglayout-controller-scheduler-lease",
		"Service/miglayout-agent-metrics",
		"Service/miglayout-controller-metrics",
		"DaemonSet/miglayout-agent",
		"Deployment/miglayout-controller",
		"PodDisruptionBudget/miglayout-controller",
		"ResourceQuota/miglayout-agent-priority",
		"DeviceClass/gpu.miglayout.io",
		"DeviceClass/mig.miglayout.io",
		"ValidatingAdmissionPolicy/miglayout-agent-node-scope",
		"ValidatingAdmissionPolicy/miglayout-selector-syntax",
		"ValidatingAdmissionPolicyBinding/miglayout-agent-node-scope",
		"ValidatingAdmissionPolicyBinding/miglayout-selector-syntax",
	}
	if diff := cmp.Diff(slices.Sorted(slices.Values(want)), slices.Sorted(slices.Values(got))); diff != "" {
		t.Errorf("rendered objects (-want +got):\n%s", diff)
	}
	var crds []string
	for _, c := range r.CRDs {
		crds = append(crds, c.GetName())
	}
	if diff := cmp.Diff([]string{"miglayouts.miglayout.io", "nodemiglayouts.miglayout.io"}, crds); diff != "" {
		t.Errorf("CRDs (-want +got):\n%s", diff)
	}
	// Only the grant to read kube-scheduler's Lease lives outside the
	// release namespace (TestSchedulerLeaseRole).
	for _, o := range r.Objects {
		if ns := o.GetNamespace(); ns != "" && ns != "miglayout-system" && o.GetName() != "miglayout-controller-scheduler-lease" {
			t.Errorf("%s %s in namespace %q", o.GetKind(), o.GetName(), ns)
		}
	}
	if !strings.Contains(r.Notes, "mig.miglayout.io") {
		t.Errorf("NOTES do not name the driver:\n%s", r.Notes)
	}
}

func TestControllerDeployment(t *testing.T) {
	d := convert[appsv1.Deployment](t, find(t, render(t, nil), "Deployment", "miglayout-controller"))
	if d.Spec.Replicas == nil || *d.Spec.Replicas != 2 {
		t.Errorf("replicas %v, want 2", d.Spec.Replicas)
	}
	c := d.Spec.Template.Spec.Containers[0]
	for _, a := range []string{"--leader-elect=true", "--leader-election-namespace=miglayout-system",
		"--metrics-bind-address=:8080", "--health-probe-bind-address=:8081"} {
		if !slices.Contains(c.Args, a) {
			t.Errorf("controller args %q lack %s", c.Args, a)
		}
	}
	if c.LivenessProbe == nil || c.LivenessProbe.HTTPGet.Path != "/healthz" || c.ReadinessProbe == nil || c.ReadinessProbe.HTTPGet.Path != "/readyz" {
		t.Errorf("probes: liveness %+v readiness %+v", c.LivenessProbe, c.ReadinessProbe)
	}
	if sc := c.SecurityContext; sc == nil || (sc.Privileged != nil && *sc.Privileged) || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
		t.Errorf("controller security context %+v: want unprivileged, read-only root", sc)
	}
	if d.Spec.Template.Spec.ServiceAccountName != "miglayout-controller" {
		t.Errorf("service account %q", d.Spec.Template.Spec.ServiceAccountName)
	}
	if a := d.Spec.Template.Annotations; a["prometheus.io/port"] != "8080" {
		t.Errorf("scrape annotations %v", a)
	}
	// The controller knows the agents' driver name: Auto mode tells MIG
	// demand and miglayout's devices by it.
	if !slices.Contains(c.Args, "--driver-name=mig.miglayout.io") {
		t.Errorf("controller args %q lack --driver-name=mig.miglayout.io", c.Args)
	}
	nv := convert[appsv1.Deployment](t, find(t, render(t, map[string]any{"driverName": "gpu.nvidia.com"}), "Deployment", "miglayout-controller"))
	if args := nv.Spec.Template.Spec.Containers[0].Args; !slices.Contains(args, "--driver-name=gpu.nvidia.com") {
		t.Errorf("with driverName gpu.nvidia.com the controller args %q lack --driver-name=gpu.nvidia.com", args)
	}
}

// TestSchedulerLeaseRole: the controller reads kube-scheduler's Lease
// (controller.schedulerLease), and may get that one Lease only, in its
// namespace; with the value empty, neither the flag's Lease nor the Role.
func TestSchedulerLeaseRole(t *testing.T) {
	for name, tc := range map[string]struct {
		lease, ns, leaseName string
	}{
		"default":    {lease: "", ns: "kube-system", leaseName: "kube-scheduler"},
		"another":    {lease: "sched/second-scheduler", ns: "sched", leaseName: "second-scheduler"},
		"not looked": {lease: "-"},
	} {
		t.Run(name, func(t *testing.T) {
			var values map[string]any
			switch tc.lease {
			case "":
			case "-":
				values = map[string]any{"controller": map[string]any{"schedulerLease": ""}}
			default:
				values = map[string]any{"controller": map[string]any{"schedulerLease": tc.lease}}
			}
			r := render(t, values)
			d := convert[appsv1.Deployment](t, find(t, r, "Deployment", "miglayout-controller"))
			want := "--scheduler-lease=" + tc.ns + "/" + tc.leaseName
			if tc.lease == "-" {
				want = "--scheduler-lease="
			}
			if args := d.Spec.Template.Spec.Containers[0].Args; !slices.Contains(args, want) {
				t.Errorf("controller args %q lack %s", args, want)
			}
			var roles []rbacv1.Role
			for _, o := range r.Objects {
				if o.GetKind() == "Role" && o.GetName() == "miglayout-controller-scheduler-lease" {
					roles = append(roles, *convert[rbacv1.Role](t, o))
				}
			}
			if tc.lease == "-" {
				if len(roles) > 0 {
					t.Errorf("a Role for kube-scheduler's Lease with controller.schedulerLease empty: %+v", roles)
				}
				return
			}
			if len(roles) != 1 || roles[0].Namespace != tc.ns {
				t.Fatalf("Roles for kube-scheduler's Lease %+v, want one in %s", roles, tc.ns)
			}
			wantRules := []rbacv1.PolicyRule{{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, ResourceNames: []string{tc.leaseName}, Verbs: []string{"get"}}}
			if diff := cmp.Diff(wantRules, roles[0].Rules); diff != "" {
				t.Errorf("Role rules (-want +got):\n%s", diff)
			}
			rb := convert[rbacv1.RoleBinding](t, find(t, r, "RoleBinding", "miglayout-controller-scheduler-lease"))
			if rb.Namespace != tc.ns || rb.RoleRef.Name != "miglayout-controller-scheduler-lease" || len(rb.Subjects) != 1 || rb.Subjects[0].Name != "miglayout-controller" || rb.Subjects[0].Namespace != "miglayout-system" {
				t.Errorf("RoleBinding %+v", rb)
			}
		})
	}
}

// TestControllerDisruptionBudget: with several replicas a budget keeps
// one running through drains, selecting exactly the controller's pods, but
// lets replicas that are not Ready go;
// with one replica there is none (it would block every drain).
func TestControllerDisruptionBudget(t *testing.T) {
	r := render(t, nil)
	pdb := convert[policyv1.PodDisruptionBudget](t, find(t, r, "PodDisruptionBudget", "miglayout-controller"))
	d := convert[appsv1.Deployment](t, find(t, r, "Deployment", "miglayout-controller"))
	if pdb.Spec.MaxUnavailable == nil || pdb.Spec.MaxUnavailable.IntValue() != 1 || pdb.Spec.MinAvailable != nil {
		t.Errorf("budget %+v, want maxUnavailable 1", pdb.Spec)
	}
	// Crash-looping replicas (Running, not Ready) do not block drains.
	if p := pdb.Spec.UnhealthyPodEvictionPolicy; p == nil || *p != policyv1.AlwaysAllow {
		t.Errorf("budget unhealthyPodEvictionPolicy %v, want AlwaysAllow", p)
	}
	if diff := cmp.Diff(d.Spec.Selector, pdb.Spec.Selector); diff != "" {
		t.Errorf("budget selector differs from the Deployment's (-deployment +budget):\n%s", diff)
	}
	for name, values := range map[string]map[string]any{
		"one replica": {"controller": map[string]any{"replicas": 1, "leaderElection": map[string]any{"enabled": false}}},
		"disabled":    {"controller": map[string]any{"podDisruptionBudget": map[string]any{"enabled": false}}},
	} {
		for _, o := range render(t, values).Objects {
			if o.GetKind() == "PodDisruptionBudget" {
				t.Errorf("%s: rendered %s", name, o.GetName())
			}
		}
	}
}

// TestPrometheusRule: off by default (its CRD may not exist); on, every
// alert is named, has a severity and summary, and reads only metrics the
// components register, with the labels they carry.
func TestPrometheusRule(t *testing.T) {
	for _, o := range render(t, nil).Objects {
		if o.GetKind() == "PrometheusRule" {
			t.Fatalf("rendered by default: %s", o.GetName())
		}
	}
	r := render(t, map[string]any{"metrics": map[string]any{"prometheusRule": map[string]any{"enabled": true, "labels": map[string]any{"release": "kube-prometheus"}, "for": "5m"}}})
	rule := find(t, r, "PrometheusRule", "miglayout")
	if rule.GetLabels()["release"] != "kube-prometheus" || rule.GetNamespace() != "miglayout-system" {
		t.Errorf("labels %v, namespace %q", rule.GetLabels(), rule.GetNamespace())
	}
	var spec struct {
		Groups []struct {
			Name  string
			Rules []struct {
				Alert, Expr, For string
				Labels           map[string]string
				Annotations      map[string]string
			}
		}
	}
	raw, err := json.Marshal(rule.Object["spec"])
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &spec); err != nil {
		t.Fatal(err)
	}
	labels, nodeStates := registeredMetrics(t), controllerNodeStates(t)
	var alerts []string
	for _, g := range spec.Groups {
		for _, a := range g.Rules {
			alerts = append(alerts, a.Alert)
			if a.Labels["severity"] == "" || a.Annotations["summary"] == "" || a.For == "" {
				t.Errorf("%s: severity %q, summary %q, for %q", a.Alert, a.Labels["severity"], a.Annotations["summary"], a.For)
			}
			checkPromQL(t, a.Alert, a.Expr, labels, nodeStates)
		}
	}
	if len(alerts) < 5 {
		t.Errorf("alerts %q", alerts)
	}
	var fives int
	for _, a := range spec.Groups[0].Rules {
		if a.For == "5m" {
			fives++
		}
	}
	if fives == 0 {
		t.Errorf("metrics.prometheusRule.for is not used")
	}
}

// registeredMetrics reads the metric names and label names the components
// define from their metrics.go files: each prometheus.New... call's Name
// (or Namespace_Subsystem_Name) and []string labels.
// controllerNodeStates are the states miglayout_controller_nodes takes
// (recordMetrics).
func controllerNodeStates(t *testing.T) []string {
	t.Helper()
	src, err := os.ReadFile("../../pkg/controller/metrics.go")
	if err != nil {
		t.Fatal(err)
	}
	block := regexp.MustCompile(`(?s)for state, n := range map\[string\]int32\{(.*?)\}`).FindStringSubmatch(string(src))
	if block == nil {
		t.Fatal("no node states in pkg/controller/metrics.go")
	}
	var states []string
	for _, m := range regexp.MustCompile(`"([a-z]+)":`).FindAllStringSubmatch(block[1], -1) {
		states = append(states, m[1])
	}
	return states
}

// checkPromQL fails t where expr, of what (an alert, a panel), reads no
// miglayout metric, one no component registers (a histogram's series by
// their _bucket, _sum and _count names), groups by or selects a label its
// metrics do not have (the scrape target's namespace, pod, instance, job
// and node, which the ServiceMonitors set, aside), or selects a node state
// the controller never sets.
func checkPromQL(t *testing.T, what, expr string, labels map[string][]string, nodeStates []string) {
	t.Helper()
	ms := regexp.MustCompile(`(miglayout_[a-z_]+)(\{[^}]*\})?`).FindAllStringSubmatch(expr, -1)
	if len(ms) == 0 {
		t.Errorf("%s reads no miglayout metric: %s", what, expr)
	}
	name := func(series string) string {
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			if base, ok := strings.CutSuffix(series, suffix); ok && slices.Contains(labels[base], "le") {
				return base
			}
		}
		return series
	}
	known := []string{"namespace", "pod", "instance", "job", "node"}
	for _, m := range ms {
		known = append(known, labels[name(m[1])]...)
	}
	for _, by := range regexp.MustCompile(`by \(([^)]*)\)`).FindAllStringSubmatch(expr, -1) {
		for _, l := range strings.Split(by[1], ",") {
			if l = strings.TrimSpace(l); !slices.Contains(known, l) {
				t.Errorf("%s groups by %s, a label its metrics do not have", what, l)
			}
		}
	}
	for _, m := range ms {
		have, ok := labels[name(m[1])]
		if !ok {
			t.Errorf("%s reads %s, which no component registers", what, m[1])
			continue
		}
		for _, sel := range regexp.MustCompile(`([a-z_]+)(=~|!=|=)"([^"]*)"`).FindAllStringSubmatch(m[2], -1) {
			if !slices.Contains(have, sel[1]) {
				t.Errorf("%s selects %s{%s}, a label it does not have (%q)", what, m[1], sel[1], have)
			}
			if m[1] == "miglayout_controller_nodes" && sel[1] == "state" {
				for _, v := range strings.Split(sel[3], "|") {
					if !slices.Contains(nodeStates, v) {
						t.Errorf("%s selects state %q, which the controller never sets (%q)", what, v, nodeStates)
					}
				}
			}
		}
	}
}

// registeredMetrics are the metrics the agent and the controller register,
// read from their sources, with their label names (a histogram's include
// le, the label of its _bucket series).
func registeredMetrics(t *testing.T) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	field := func(chunk, key string) string {
		m := regexp.MustCompile(key + `: +"([a-z_]+)"`).FindStringSubmatch(chunk)
		if m == nil {
			return ""
		}
		return m[1]
	}
	for _, f := range []string{"../../pkg/agent/metrics.go", "../../pkg/plugin/metrics.go", "../../pkg/controller/metrics.go"} {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, chunk := range strings.Split(string(src), "prometheus.New")[1:] {
			// A custom collector's metric: NewDesc(name, help, labels, nil).
			if m := regexp.MustCompile(`^Desc\("([a-z_]+)",`).FindStringSubmatch(chunk); m != nil {
				var labels []string
				if l := regexp.MustCompile(`\[\]string\{([^}]*)\}`).FindStringSubmatch(chunk); l != nil {
					for _, name := range strings.Split(l[1], ",") {
						labels = append(labels, strings.Trim(strings.TrimSpace(name), `"`))
					}
				}
				out[m[1]] = labels
				continue
			}
			name := field(chunk, "Name")
			if name == "" {
				continue
			}
			if ns := field(chunk, "Namespace"); ns != "" {
				name = ns + "_" + field(chunk, "Subsystem") + "_" + name
			}
			var labels []string
			if m := regexp.MustCompile(`\}, \[\]string\{([^}]*)\}`).FindStringSubmatch(chunk); m != nil {
				for _, l := range strings.Split(m[1], ",") {
					labels = append(labels, strings.Trim(strings.TrimSpace(l), `"`))
				}
			}
			if strings.HasPrefix(chunk, "Histogram") {
				labels = append(labels, "le") // of its _bucket series
			}
			out[name] = labels
		}
	}
	if len(out) < 10 {
		t.Fatalf("read %d metrics from the sources: %v", len(out), out)
	}
	return out
}

func TestAgentDaemonSet(t *testing.T) {
	ds := convert[appsv1.DaemonSet](t, find(t, render(t, nil), "DaemonSet", "miglayout-agent"))
	spec := ds.Spec.Template.Spec
	if diff := cmp.Diff(map[string]string{"nvidia.com/mig.capable": "true"}, spec.NodeSelector); diff != "" {
		t.Errorf("nodeSelector (-want +got):\n%s", diff)
	}
	c := spec.Containers[0]
	if c.SecurityContext == nil || c.SecurityContext.Privileged == nil || !*c.SecurityContext.Privileged {
		t.Errorf("agent must be privileged for NVML MIG management: %+v", c.SecurityContext)
	}
	var nodeName bool
	for _, e := range c.Env {
		if e.Name == "NODE_NAME" && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "spec.nodeName" {
			nodeName = true
		}
	}
	if !nodeName {
		t.Errorf("no NODE_NAME from spec.nodeName in %+v", c.Env)
	}
	hostPaths := map[string]string{}
	for _, v := range spec.Volumes {
		if v.HostPath != nil {
			hostPaths[v.Name] = v.HostPath.Path
		}
	}
	mounts := map[string]string{}
	for _, m := range c.VolumeMounts {
		mounts[m.Name] = m.MountPath
	}
	// Of the kubelet's plugin directories, the driver's own only.
	for _, hp := range hostPaths {
		if hp == "/var/lib/kubelet/plugins" || hp == "/var/lib/kubelet" {
			t.Errorf("host path %s mounted: every DRA driver's sockets and checkpoints, not the agent's own directory", hp)
		}
	}
	for _, p := range []string{"/dev", "/var/lib/kubelet/plugins/mig.miglayout.io", "/var/lib/kubelet/plugins_registry", "/var/run/cdi", "/var/lib/miglayout"} {
		var found bool
		for name, hp := range hostPaths {
			if hp == p && mounts[name] == p {
				found = true
			}
		}
		if !found {
			t.Errorf("host path %s is not mounted at the same path (volumes %v, mounts %v)", p, hostPaths, mounts)
		}
	}
	for _, a := range []string{"--driver-name=mig.miglayout.io", "--kubelet-plugins-dir=/var/lib/kubelet/plugins",
		"--kubelet-registrar-dir=/var/lib/kubelet/plugins_registry", "--cdi-dir=/var/run/cdi", "--state-dir=/var/lib/miglayout"} {
		if !slices.Contains(c.Args, a) {
			t.Errorf("agent args %q lack %s", c.Args, a)
		}
	}
	if c.LivenessProbe == nil || c.ReadinessProbe == nil {
		t.Error("agent without probes")
	}
	// NVML's first load without persistence mode, and a node whose CPUs
	// a training job saturates, are slow: the agent gets minutes to come up
	// (a startup probe holds the liveness probe back) and seconds to answer.
	if sp := c.StartupProbe; sp == nil || sp.HTTPGet == nil || sp.HTTPGet.Path != "/healthz" || sp.PeriodSeconds*sp.FailureThreshold < 300 {
		t.Errorf("agent startup probe %+v, want /healthz allowing 5 minutes at least", sp)
	}
	for name, p := range map[string]*corev1.Probe{"liveness": c.LivenessProbe, "readiness": c.ReadinessProbe, "startup": c.StartupProbe} {
		if p != nil && p.TimeoutSeconds < 5 {
			t.Errorf("agent %s probe times out after %d s, want 5 s at least", name, p.TimeoutSeconds)
		}
	}
	// NVML is loaded by path from the host's driver root, mounted read-only
	// at /driver-root. The driver's library directories on LD_LIBRARY_PATH
	// would make the dynamic loader take the host's C library for the
	// image's binary, which fails where the two glibc versions differ.
	if hostPaths["driver-root"] != "/" || mounts["driver-root"] != "/driver-root" || !slices.Contains(c.Args, "--nvidia-driver-root=/driver-root") {
		t.Errorf("driver root: volume %q, mount %q, args %q; want / at /driver-root and --nvidia-driver-root=/driver-root",
			hostPaths["driver-root"], mounts["driver-root"], c.Args)
	}
	// The driver root's host path, where a containerised driver's device
	// nodes are (<root>/dev), for the CDI specs.
	if !slices.Contains(c.Args, "--host-nvidia-driver-root=/") {
		t.Errorf("args %q, want --host-nvidia-driver-root=/", c.Args)
	}
	// The MIG capability files and /proc/devices are read from the host's
	// /proc, not the container's: the NVIDIA container runtime replaces
	// the container's /proc/driver/nvidia with a copy made at start.
	if hostPaths["proc-driver-nvidia"] != "/proc/driver/nvidia" || mounts["proc-driver-nvidia"] != "/host/proc/driver/nvidia" ||
		hostPaths["proc-devices"] != "/proc/devices" || mounts["proc-devices"] != "/host/proc/devices" || !slices.Contains(c.Args, "--host-root=/host") {
		t.Errorf("host /proc: volumes %v, mounts %v, args %q; want /proc/driver/nvidia and /proc/devices under /host and --host-root=/host",
			hostPaths, mounts, c.Args)
	}
	for _, e := range c.Env {
		if e.Name == "LD_LIBRARY_PATH" {
			t.Errorf("LD_LIBRARY_PATH=%s: the agent would load the host's C library", e.Value)
		}
	}
}

func TestAgentSimulatedIsUnprivileged(t *testing.T) {
	ds := convert[appsv1.DaemonSet](t, find(t, render(t, map[string]any{"agent": map[string]any{
		"privileged": false, "simulate": "2xA100-SXM4-80GB"}}), "DaemonSet", "miglayout-agent"))
	c := ds.Spec.Template.Spec.Containers[0]
	if c.SecurityContext == nil || c.SecurityContext.Privileged == nil || *c.SecurityContext.Privileged {
		t.Errorf("simulated agent: security context %+v", c.SecurityContext)
	}
	if !slices.Contains(c.Args, "--simulate=2xA100-SXM4-80GB") || slices.ContainsFunc(c.Args, func(a string) bool { return strings.HasPrefix(a, "--nvidia-driver-root") }) {
		t.Errorf("args %q: want --simulate and no driver root", c.Args)
	}
	// The simulated GPUs' capability files go under the state directory,
	// which is writable; the default host root's /proc is not.
	state := ""
	for _, a := range c.Args {
		if v, ok := strings.CutPrefix(a, "--state-dir="); ok {
			state = v
		}
	}
	if state == "" || !slices.Contains(c.Args, "--host-root="+state+"/host") {
		t.Errorf("simulated agent: no --host-root under the state directory %q in %q", state, c.Args)
	}
	for _, v := range ds.Spec.Template.Spec.Volumes {
		if v.HostPath != nil && v.HostPath.Path == "/dev" {
			t.Error("simulated agent mounts /dev")
		}
	}
}

// TestOnlyTheAgentIsPrivileged: no other container of the chart asks for
// privileges.
func TestOnlyTheAgentIsPrivileged(t *testing.T) {
	for _, o := range render(t, nil).Objects {
		containers, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
		for _, c := range containers {
			priv, _, _ := unstructured.NestedBool(c.(map[string]any), "securityContext", "privileged")
			if priv && o.GetKind()+"/"+o.GetName() != "DaemonSet/miglayout-agent" {
				t.Errorf("%s %s runs privileged", o.GetKind(), o.GetName())
			}
		}
	}
}

// flagsOf reads the flag names a command defines from its source.
func flagsOf(t *testing.T, dir string) map[string]bool {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(repoRoot, dir, "*.go"))
	re := regexp.MustCompile(`\.(?:String|Bool|Duration|Int|Int32|Float64)Var\(&[^,]+,\s*"([a-z0-9-]+)"`)
	flags := map[string]bool{"v": true} // klog
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range re.FindAllSubmatch(b, -1) {
			flags[string(m[1])] = true
		}
	}
	if len(flags) < 3 {
		t.Fatalf("found no flags in %s", dir)
	}
	return flags
}

// TestArgsAreFlagsOfTheCommands: every flag the chart passes exists in the
// command it runs, in every mode the values allow.
func TestArgsAreFlagsOfTheCommands(t *testing.T) {
	want := map[string]map[string]bool{
		"miglayout-controller": flagsOf(t, "cmd/miglayout-controller"),
		"miglayout-agent":      flagsOf(t, "cmd/miglayout-agent"),
	}
	for _, values := range []map[string]any{nil, {"agent": map[string]any{"privileged": false, "simulate": "1xA30"}}} {
		for _, o := range render(t, values).Objects {
			containers, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
			for _, c := range containers {
				args, _, _ := unstructured.NestedStringSlice(c.(map[string]any), "args")
				flags := want[o.GetName()]
				if flags == nil {
					t.Fatalf("unexpected workload %s", o.GetName())
				}
				for _, a := range args {
					name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
					if !flags[name] {
						t.Errorf("%s: %s is not a flag of the command (flags: %v)", o.GetName(), a, slices.Sorted(maps.Keys(flags)))
					}
				}
			}
		}
	}
}

// TestDeviceClassesMatchDeploy: with the default values the chart installs
// the DeviceClasses of deploy/deviceclasses.
func TestDeviceClassesMatchDeploy(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(repoRoot, "deploy/deviceclasses/deviceclasses.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	objs, err := decode(string(b))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]resourceapi.DeviceClassSpec{}
	for _, o := range objs {
		want[o.GetName()] = convert[resourceapi.DeviceClass](t, o).Spec
	}
	got := map[string]resourceapi.DeviceClassSpec{}
	for _, o := range render(t, nil).Objects {
		if o.GetKind() == "DeviceClass" {
			got[o.GetName()] = convert[resourceapi.DeviceClass](t, o).Spec
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("DeviceClasses (-deploy/deviceclasses +chart):\n%s", diff)
	}
	// Another driver name reaches the selectors.
	for _, o := range render(t, map[string]any{"driverName": "gpu.nvidia.com",
		"deviceClasses": map[string]any{"migName": "mig.nvidia.com", "gpuName": "gpu.nvidia.com"}}).Objects {
		if o.GetKind() == "DeviceClass" {
			dc := convert[resourceapi.DeviceClass](t, o)
			if e := dc.Spec.Selectors[0].CEL.Expression; !strings.Contains(e, "device.driver == 'gpu.nvidia.com'") || strings.Contains(e, "miglayout") {
				t.Errorf("DeviceClass %s: %s", dc.Name, e)
			}
		}
	}
}

// TestDeviceClassesForExtendedResources: each deviceClasses.extendedResources
// entry is a DeviceClass that names the resource and selects MIG devices of
// the profile only.
func TestDeviceClassesForExtendedResources(t *testing.T) {
	values := map[string]any{"deviceClasses": map[string]any{"extendedResources": []any{
		map[string]any{"profile": "1g.10gb", "resourceName": "nvidia.com/mig-1g.10gb"},
		map[string]any{"profile": "1g.10gb+me", "resourceName": "nvidia.com/mig-1g.10gb.me"},
	}}}
	got := map[string]string{}
	for _, o := range render(t, values).Objects {
		if o.GetKind() != "DeviceClass" {
			continue
		}
		dc := convert[resourceapi.DeviceClass](t, o)
		if dc.Spec.ExtendedResourceName != nil {
			got[dc.Name] = *dc.Spec.ExtendedResourceName + " " + dc.Spec.Selectors[0].CEL.Expression
		}
	}
	want := map[string]string{
		"mig.miglayout.io-1g.10gb":    "nvidia.com/mig-1g.10gb device.driver == 'mig.miglayout.io' && device.attributes['mig.miglayout.io'].type == 'mig' && device.attributes['mig.miglayout.io'].profile == '1g.10gb'",
		"mig.miglayout.io-1g.10gb-me": "nvidia.com/mig-1g.10gb.me device.driver == 'mig.miglayout.io' && device.attributes['mig.miglayout.io'].type == 'mig' && device.attributes['mig.miglayout.io'].profile == '1g.10gb+me'",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("DeviceClasses with an extended resource name (-want +got):\n%s", diff)
	}
}

// TestRBACFromMarkers: each component's roles hold exactly the generated
// rules (Leases and core events moved to the namespaced Role), plus, for the agent, the
// ResourceSlice and Node rules of the DRA kubelet-plugin helper.
func TestRBACFromMarkers(t *testing.T) {
	r := render(t, nil)
	for _, component := range []string{"controller", "agent"} {
		b, err := os.ReadFile(filepath.Join(ChartDir(), "files/rbac", component+".yaml"))
		if err != nil {
			t.Fatal(err)
		}
		var generated rbacv1.ClusterRole
		if err := yaml.Unmarshal(b, &generated); err != nil {
			t.Fatal(err)
		}
		var wantCluster, wantNS []rbacv1.PolicyRule
		for _, rule := range generated.Rules {
			switch {
			case slices.Contains(rule.APIGroups, "coordination.k8s.io") && component == "controller":
				// get and update only on its leader-election Lease.
				wantNS = append(wantNS,
					rbacv1.PolicyRule{APIGroups: rule.APIGroups, Resources: rule.Resources, Verbs: slices.DeleteFunc(slices.Clone(rule.Verbs), func(v string) bool { return v == "get" || v == "update" })},
					rbacv1.PolicyRule{APIGroups: rule.APIGroups, Resources: rule.Resources, ResourceNames: []string{"miglayout-controller.miglayout.io"}, Verbs: []string{"get", "update"}})
			case slices.Contains(rule.APIGroups, "coordination.k8s.io"):
				wantNS = append(wantNS, rule)
			case slices.Contains(rule.APIGroups, "") && slices.Contains(rule.Resources, "events"):
				// Core events (leader election's, beside its Lease) are
				// namespaced; events.k8s.io events stay cluster-wide.
				wantNS = append(wantNS, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: rule.Verbs})
				if rest := slices.DeleteFunc(slices.Clone(rule.APIGroups), func(g string) bool { return g == "" }); len(rest) > 0 {
					wantCluster = append(wantCluster, rbacv1.PolicyRule{APIGroups: rest, Resources: rule.Resources, Verbs: rule.Verbs})
				}
				if rest := slices.DeleteFunc(slices.Clone(rule.Resources), func(r string) bool { return r == "events" }); len(rest) > 0 {
					wantCluster = append(wantCluster, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: rest, Verbs: rule.Verbs})
				}
			default:
				wantCluster = append(wantCluster, rule)
			}
		}
		if component == "agent" {
			wantCluster = append(wantCluster,
				rbacv1.PolicyRule{APIGroups: []string{"resource.k8s.io"}, Resources: []string{"resourceslices"}, Verbs: []string{"create", "delete", "get", "list", "update", "watch"}},
				rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get"}})
		}
		cr := convert[rbacv1.ClusterRole](t, find(t, r, "ClusterRole", "miglayout-"+component))
		if diff := cmp.Diff(wantCluster, cr.Rules); diff != "" {
			t.Errorf("ClusterRole %s (-want +got):\n%s", cr.Name, diff)
		}
		crb := convert[rbacv1.ClusterRoleBinding](t, find(t, r, "ClusterRoleBinding", "miglayout-"+component))
		if len(crb.Subjects) != 1 || crb.Subjects[0].Name != "miglayout-"+component || crb.Subjects[0].Namespace != "miglayout-system" {
			t.Errorf("ClusterRoleBinding %s subjects %+v", crb.Name, crb.Subjects)
		}
		if len(wantNS) > 0 {
			role := convert[rbacv1.Role](t, find(t, r, "Role", "miglayout-"+component))
			if diff := cmp.Diff(wantNS, role.Rules); diff != "" {
				t.Errorf("Role %s (-want +got):\n%s", role.Name, diff)
			}
		}
	}
}

func TestLint(t *testing.T) {
	for name, values := range map[string]map[string]any{
		"defaults":  nil,
		"simulated": {"agent": map[string]any{"privileged": false, "simulate": "4xA100-SXM4-80GB"}},
		"nvidia driver name": {"driverName": "gpu.nvidia.com", "deviceClasses": map[string]any{"create": false},
			"agent": map[string]any{"runtimeClassName": "nvidia", "nvidiaDriverRoot": "/run/nvidia/driver"}},
		"one replica, no policy": {"controller": map[string]any{"replicas": 1, "leaderElection": map[string]any{"enabled": false}},
			"agentNodePolicy": map[string]any{"enabled": false}, "metrics": map[string]any{"service": false, "podAnnotations": false}},
	} {
		t.Run(name, func(t *testing.T) {
			msgs, err := Lint("", values, "miglayout-system", "v1.37.2")
			if err != nil {
				t.Fatal(err)
			}
			if len(msgs) > 0 {
				t.Errorf("helm lint:\n%s", strings.Join(msgs, "\n"))
			}
			if _, err := Render(Options{Values: values}); err != nil {
				t.Errorf("render: %v", err)
			}
		})
	}
}

// badValues are values the chart must refuse, with (part of) the message.
var badValues = []struct {
	name   string
	values map[string]any
	want   string
}{
	{"driver name", map[string]any{"driverName": "MIG_Driver"}, `driverName "MIG_Driver" is not a DRA driver name`},
	{"scheduler lease without namespace", map[string]any{"controller": map[string]any{"schedulerLease": "kube-scheduler"}}, "/controller/schedulerLease"},
	{"same class names", map[string]any{"deviceClasses": map[string]any{"gpuName": "mig.miglayout.io"}}, "MIG devices and whole GPUs need two DeviceClasses"},
	{"extended resource profile twice", map[string]any{"deviceClasses": map[string]any{"extendedResources": []any{
		map[string]any{"profile": "1g.10gb", "resourceName": "nvidia.com/mig-1g.10gb"},
		map[string]any{"profile": "1g.10gb", "resourceName": "example.com/small-gpu"}}}}, `names profile "1g.10gb" twice`},
	{"extended resource name twice", map[string]any{"deviceClasses": map[string]any{"extendedResources": []any{
		map[string]any{"profile": "1g.10gb", "resourceName": "nvidia.com/mig"},
		map[string]any{"profile": "2g.20gb", "resourceName": "nvidia.com/mig"}}}}, `names resourceName "nvidia.com/mig" twice`},
	{"extended resource class name twice", map[string]any{"deviceClasses": map[string]any{"extendedResources": []any{
		map[string]any{"profile": "1g.10gb+me", "resourceName": "nvidia.com/mig-1g.10gb.me"},
		map[string]any{"profile": "1g.10gb-me", "resourceName": "nvidia.com/mig-1g.10gb-me"}}}},
		`profiles "1g.10gb+me" and "1g.10gb-me" both make the DeviceClass "mig.miglayout.io-1g.10gb-me"`},
	{"no resync period", map[string]any{"agent": map[string]any{"resyncPeriod": "0s"}}, "agent.resyncPeriod 0s must be longer than 0"},
	{"replicas without leader election", map[string]any{"controller": map[string]any{"leaderElection": map[string]any{"enabled": false}}},
		"controller.replicas is 2 but controller.leaderElection.enabled is false"},
	{"port clash", map[string]any{"agent": map[string]any{"healthPort": 8081}}, "agent.metricsPort and agent.healthPort are both 8081"},
	{"pod label the chart selects by", map[string]any{"agent": map[string]any{"podLabels": map[string]any{"app.kubernetes.io/component": "gpu"}}},
		`agent.podLabels sets "app.kubernetes.io/component", a label the chart sets itself`},
	{"common label the chart sets", map[string]any{"commonLabels": map[string]any{"app.kubernetes.io/name": "gpus"}},
		`commonLabels sets "app.kubernetes.io/name", a label the chart sets itself`},
	{"unprivileged real agent", map[string]any{"agent": map[string]any{"privileged": false}}, "agent.privileged=false needs agent.simulate"},
	{"bad simulate spec", map[string]any{"agent": map[string]any{"privileged": false, "simulate": "A100"}}, `agent.simulate "A100" is not a hardware spec`},
	{"policy on the default ServiceAccount", map[string]any{"agent": map[string]any{"serviceAccount": map[string]any{"create": false}}},
		"agentNodePolicy.enabled needs the agent's own ServiceAccount"},
	{"Deny and Warn", map[string]any{"agentNodePolicy": map[string]any{"validationActions": []any{"Deny", "Warn"}}}, "may not hold both Deny and Warn"},
	{"selector policy Deny and Warn", map[string]any{"migLayoutSelectorPolicy": map[string]any{"validationActions": []any{"Deny", "Warn"}}},
		"migLayoutSelectorPolicy.validationActions may not hold both Deny and Warn"},
	{"controller on the default ServiceAccount", map[string]any{"controller": map[string]any{"serviceAccount": map[string]any{"create": false}}},
		"controller.serviceAccount.create=false needs controller.serviceAccount.name"},
	{"controller on the ServiceAccount named default", map[string]any{"controller": map[string]any{"serviceAccount": map[string]any{"create": false, "name": "default"}}},
		"controller.serviceAccount.create=false needs controller.serviceAccount.name"},
	{"short heartbeat", map[string]any{"agent": map[string]any{"heartbeatLeaseDuration": "3s"}}, `agent.heartbeatLeaseDuration "3s" is under 4s`},
	{"zero heartbeat", map[string]any{"agent": map[string]any{"heartbeatLeaseDuration": "0m0s"}}, `agent.heartbeatLeaseDuration "0m0s" is under 4s`},
	{"fractional heartbeat", map[string]any{"agent": map[string]any{"heartbeatLeaseDuration": "4.5s"}}, "/agent/heartbeatLeaseDuration"},
	{"ServiceMonitor without Services", map[string]any{"metrics": map[string]any{"service": false, "serviceMonitor": map[string]any{"enabled": true}}},
		"metrics.serviceMonitor.enabled needs metrics.service"},
	// Values the templates write as they are: a newline would add YAML of
	// its own (a hostPath volume of the host's /etc, say).
	{"path with a newline", map[string]any{"agent": map[string]any{
		"nvidiaDriverRoot": "/run/nvidia/driver\n          type: Directory\n      - name: injected\n        hostPath:\n          path: /etc"}}, "/agent/nvidiaDriverRoot"},
	{"host path with a newline", map[string]any{"agent": map[string]any{"hostPaths": map[string]any{"cdi": "/var/run/cdi\n- x"}}}, "/agent/hostPaths/cdi"},
	{"priority class with a newline", map[string]any{"agent": map[string]any{"priorityClassName": "x\n  hostNetwork: true"}}, "/agent/priorityClassName"},
	{"runtime class with a space", map[string]any{"agent": map[string]any{"runtimeClassName": "nvidia legacy"}}, "/agent/runtimeClassName"},
	{"image tag with a newline", map[string]any{"controller": map[string]any{"image": map[string]any{"tag": "v1\n  x: y"}}}, "/controller/image/tag"},
	{"image repository with a space", map[string]any{"agent": map[string]any{"image": map[string]any{"repository": "registry.example.com/a b"}}}, "/agent/image/repository"},
	{"secure ServiceMonitor without RBAC", map[string]any{"rbac": map[string]any{"create": false}, "metrics": map[string]any{"secure": true, "serviceMonitor": map[string]any{"enabled": true}}},
		"metrics.secure with metrics.serviceMonitor.enabled needs rbac.create"},
	// values.schema.json
	{"bad scrape interval", map[string]any{"metrics": map[string]any{"serviceMonitor": map[string]any{"interval": "30 seconds"}}}, "/metrics/serviceMonitor/interval"},
	{"typo in a key", map[string]any{"agent": map[string]any{"nodeselector": map[string]any{"a": "b"}}}, "additional properties 'nodeselector' not allowed"},
	{"relative host path", map[string]any{"agent": map[string]any{"hostPaths": map[string]any{"cdi": "var/run/cdi"}}}, "/agent/hostPaths/cdi"},
	{"replicas zero", map[string]any{"controller": map[string]any{"replicas": 0}}, "/controller/replicas"},
	{"bad duration", map[string]any{"agent": map[string]any{"settlePeriod": "5 seconds"}}, "/agent/settlePeriod"},
	{"orphaned-claim grace under a minute", map[string]any{"agent": map[string]any{"orphanedClaimGrace": "30s"}}, "agent.orphanedClaimGrace 30s must be at least 1m"},
	{"negative ignored Xid", map[string]any{"agent": map[string]any{"deviceHealthIgnoredXids": []any{-1}}}, "deviceHealthIgnoredXids"},
	{"device health interval under a second", map[string]any{"agent": map[string]any{"deviceHealthInterval": "500ms"}}, "agent.deviceHealthInterval 500ms must be at least 1s"},
	{"dashboard label not a label key", map[string]any{"metrics": map[string]any{"grafanaDashboard": map[string]any{"label": "grafana dashboard"}}}, "/metrics/grafanaDashboard/label"},
	{"dashboard namespace not a name", map[string]any{"metrics": map[string]any{"grafanaDashboard": map[string]any{"namespace": "Monitoring"}}}, "/metrics/grafanaDashboard/namespace"},
	{"bad validation action", map[string]any{"agentNodePolicy": map[string]any{"validationActions": []any{"Reject"}}}, "/agentNodePolicy/validationActions/0"},
	{"extended resource without a name", map[string]any{"deviceClasses": map[string]any{"extendedResources": []any{map[string]any{"profile": "1g.10gb"}}}}, "/deviceClasses/extendedResources/0"},
	{"extended resource of no profile", map[string]any{"deviceClasses": map[string]any{"extendedResources": []any{map[string]any{"profile": "small", "resourceName": "nvidia.com/mig-small"}}}}, "/deviceClasses/extendedResources/0/profile"},
	{"extended resource of a compute-instance-like name", map[string]any{"deviceClasses": map[string]any{"extendedResources": []any{map[string]any{"profile": "7c.10gb+zz", "resourceName": "nvidia.com/mig-x"}}}}, "/deviceClasses/extendedResources/0/profile"},
}

// TestExtendedResourceProfilesAsTheCRD: values.schema.json admits the
// profile names the MigLayout CRD admits (mig.ProfileNamePattern), the
// media-extension variants among them.
func TestExtendedResourceProfilesAsTheCRD(t *testing.T) {
	for _, profile := range []string{"1g.10gb", "1g.45gb-me", "1g.10gb+me", "7g.80gb+me.all", "1g.12gb+gfx"} {
		if _, err := Render(Options{Values: map[string]any{"deviceClasses": map[string]any{"extendedResources": []any{
			map[string]any{"profile": profile, "resourceName": "example.com/mig"}}}}}); err != nil {
			t.Errorf("profile %s: %v", profile, err)
		}
	}
}

// TestRefusedForTheCluster: values that need the agents' policy where the
// chart is installed are refused with a message naming them.
func TestRefusedForTheCluster(t *testing.T) {
	tests := map[string]struct {
		opts Options
		want string
	}{
		"kube-system without the agents' policy": {Options{Namespace: "kube-system", Values: map[string]any{"agentNodePolicy": map[string]any{"enabled": false}}},
			"installing into kube-system needs agentNodePolicy.enabled with validationActions [Deny]"},
		"kube-system with the policy only warning": {Options{Namespace: "kube-system", Values: map[string]any{"agentNodePolicy": map[string]any{"validationActions": []any{"Warn", "Audit"}}}},
			"installing into kube-system needs agentNodePolicy.enabled with validationActions [Deny]"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if _, err := Render(tc.opts); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("rendering: %v; want an error with %q", err, tc.want)
			}
		})
	}
	if _, err := Render(Options{Namespace: "kube-system"}); err != nil {
		t.Errorf("kube-system with the policy denying: %v", err)
	}
}

// TestNotesWarnExtendedResourcesBefore136: before Kubernetes 1.36 the
// DRAExtendedResource feature gate is off by default: the notes say so
// where extended resources are asked for (a cluster may have turned the
// gate on, so the chart installs).
func TestNotesWarnExtendedResourcesBefore136(t *testing.T) {
	extended := map[string]any{"deviceClasses": map[string]any{"extendedResources": []any{
		map[string]any{"profile": "1g.10gb", "resourceName": "nvidia.com/mig-1g.10gb"}}}}
	for version, want := range map[string]bool{"v1.35.3": true, "v1.36.0": false} {
		r, err := Render(Options{Values: extended, KubeVersion: version})
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Contains(r.Notes, "needs the DRAExtendedResource feature gate"); got != want {
			t.Errorf("Kubernetes %s: warning in the notes %t, want %t:\n%s", version, got, want, r.Notes)
		}
	}
}

func TestBadValuesFail(t *testing.T) {
	for _, tc := range badValues {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Render(Options{Values: tc.values})
			if err == nil {
				t.Fatalf("rendered; want an error with %q", tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q\nwant it to contain %q", err, tc.want)
			}
			if !strings.HasPrefix(tc.want, "/") && !strings.HasPrefix(tc.want, "additional properties") {
				return // helm lint only logs a template's fail (lint mode); schema errors it reports
			}
			msgs, lerr := Lint("", tc.values, "miglayout-system", "v1.37.2")
			if lerr != nil {
				t.Fatal(lerr)
			}
			if !strings.Contains(strings.Join(msgs, "\n"), tc.want) {
				t.Errorf("helm lint does not report %q:\n%s", tc.want, strings.Join(msgs, "\n"))
			}
		})
	}
}

func TestOldClusterRefused(t *testing.T) {
	_, err := Render(Options{KubeVersion: "v1.31.4"})
	if err == nil || !strings.Contains(err.Error(), "chart requires kubeVersion >=1.34.0-0") {
		t.Errorf("rendering for 1.31: %v", err)
	}
}

func TestVersionPinnedImages(t *testing.T) {
	r := render(t, map[string]any{"controller": map[string]any{"image": map[string]any{"digest": "sha256:" + strings.Repeat("ab", 32)}}})
	d := convert[appsv1.Deployment](t, find(t, r, "Deployment", "miglayout-controller"))
	if img := d.Spec.Template.Spec.Containers[0].Image; img != "ghcr.io/miglayout/miglayout-controller@sha256:"+strings.Repeat("ab", 32) {
		t.Errorf("image %s", img)
	}
	ds := convert[appsv1.DaemonSet](t, find(t, r, "DaemonSet", "miglayout-agent"))
	if img := ds.Spec.Template.Spec.Containers[0].Image; img != fmt.Sprintf("ghcr.io/miglayout/miglayout-agent:%s", "0.1.0") {
		t.Errorf("image %s", img)
	}
}

// TestAgentBindingConditions: agent.deviceBindingConditions turns on the
// agent's flag and grants what its Binder needs, only then; it is refused on
// clusters older than 1.36.
func TestAgentBindingConditions(t *testing.T) {
	statusRule := rbacv1.PolicyRule{APIGroups: []string{"resource.k8s.io"}, Resources: []string{"resourceclaims/status"}, Verbs: []string{"patch"}}
	driverRule := rbacv1.PolicyRule{APIGroups: []string{"resource.k8s.io"}, Resources: []string{"resourceclaims/driver"},
		ResourceNames: []string{"mig.miglayout.io"}, Verbs: []string{"associated-node:patch"}}
	for _, on := range []bool{false, true} {
		t.Run(fmt.Sprint(on), func(t *testing.T) {
			objs, err := Render(Options{KubeVersion: "v1.37.2", Values: map[string]any{"agent": map[string]any{"deviceBindingConditions": on}}})
			if err != nil {
				t.Fatal(err)
			}
			ds := convert[appsv1.DaemonSet](t, find(t, objs, "DaemonSet", "miglayout-agent"))
			if got := slices.Contains(ds.Spec.Template.Spec.Containers[0].Args, "--device-binding-conditions"); got != on {
				t.Errorf("--device-binding-conditions in the agent's args: %v, want %v", got, on)
			}
			role := convert[rbacv1.ClusterRole](t, find(t, objs, "ClusterRole", "miglayout-agent"))
			for _, want := range []rbacv1.PolicyRule{statusRule, driverRule} {
				got := slices.ContainsFunc(role.Rules, func(r rbacv1.PolicyRule) bool { return cmp.Equal(r, want) })
				if got != on {
					t.Errorf("agent ClusterRole has %v: %v, want %v", want, got, on)
				}
			}
		})
	}
	_, err := Render(Options{KubeVersion: "v1.35.3", Values: map[string]any{"agent": map[string]any{"deviceBindingConditions": true}}})
	if err == nil || !strings.Contains(err.Error(), "agent.deviceBindingConditions needs Kubernetes 1.36 or newer") {
		t.Errorf("rendering for 1.35 with binding conditions: %v", err)
	}
}

// TestLongReleaseName: with the longest release name Helm allows (53), every
// object whose name must be a DNS label (Services) has one.
func TestLongReleaseName(t *testing.T) {
	r, err := Render(Options{ReleaseName: strings.Repeat("m", 53)})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range r.Objects {
		if o.GetKind() != "Service" {
			continue
		}
		if errs := validation.IsDNS1035Label(o.GetName()); len(errs) > 0 {
			t.Errorf("Service %s: %v", o.GetName(), errs)
		}
	}
}

// TestRBACCoversGenerated: every grant the code's markers generate (group,
// resource, verb) is in the rendered ClusterRole or Role of its component,
// however controller-gen merges the rules.
func TestRBACCoversGenerated(t *testing.T) {
	for name, extra := range map[string]*rbacv1.PolicyRule{
		"as generated": nil,
		// controller-gen merges core resources of equal verbs into the
		// events rule.
		"another core resource beside events": {APIGroups: []string{"", "events.k8s.io"}, Resources: []string{"configmaps", "events"}, Verbs: []string{"create", "patch"}},
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.CopyFS(dir, os.DirFS(ChartDir())); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(dir, "files/rbac/controller.yaml")
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			var generated rbacv1.ClusterRole
			if err := yaml.Unmarshal(b, &generated); err != nil {
				t.Fatal(err)
			}
			if extra != nil {
				generated.Rules = append(generated.Rules, *extra)
				out, err := yaml.Marshal(&generated)
				if err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, out, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			r, err := Render(Options{ChartDir: dir})
			if err != nil {
				t.Fatal(err)
			}
			var granted []rbacv1.PolicyRule
			for _, kind := range []string{"ClusterRole", "Role"} {
				for _, o := range r.Objects {
					if o.GetKind() == kind && o.GetName() == "miglayout-controller" {
						granted = append(granted, convert[rbacv1.ClusterRole](t, o).Rules...)
					}
				}
			}
			covers := func(group, resource, verb string) bool {
				return slices.ContainsFunc(granted, func(g rbacv1.PolicyRule) bool {
					return slices.Contains(g.APIGroups, group) && slices.Contains(g.Resources, resource) && slices.Contains(g.Verbs, verb)
				})
			}
			for _, rule := range generated.Rules {
				for _, g := range rule.APIGroups {
					for _, res := range rule.Resources {
						for _, v := range rule.Verbs {
							if !covers(g, res, v) {
								t.Errorf("generated grant %q/%s/%s is in neither the ClusterRole nor the Role", g, res, v)
							}
						}
					}
				}
			}
		})
	}
}

// TestHeartbeatDurationForms: the lease durations the agent takes render,
// in any of their forms, as the agent's --lease-duration.
func TestHeartbeatDurationForms(t *testing.T) {
	for _, d := range []string{"4s", "40s", "1m", "1m30s", "1h"} {
		r, err := Render(Options{Values: map[string]any{"agent": map[string]any{"heartbeatLeaseDuration": d}}})
		if err != nil {
			t.Errorf("%s: %v", d, err)
			continue
		}
		if !strings.Contains(r.Manifest, "--lease-duration="+d) {
			t.Errorf("%s: no --lease-duration=%s in the manifest", d, d)
		}
	}
}

// TestPodTemplatesOutliveChartUpgrades: the pod templates carry neither
// the chart's version nor commonLabels, so a chart-only upgrade (an alert
// fixed) or a label added to every object restarts no agent (each node's
// devices go unpublished while its agent is away) and no controller;
// podLabels still reach the pods.
func TestPodTemplatesOutliveChartUpgrades(t *testing.T) {
	templates := func(r *Rendered) map[string]corev1.PodTemplateSpec {
		return map[string]corev1.PodTemplateSpec{
			"agent":      convert[appsv1.DaemonSet](t, find(t, r, "DaemonSet", "miglayout-agent")).Spec.Template,
			"controller": convert[appsv1.Deployment](t, find(t, r, "Deployment", "miglayout-controller")).Spec.Template,
		}
	}
	before := templates(render(t, nil))

	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS(ChartDir())); err != nil {
		t.Fatal(err)
	}
	meta := filepath.Join(dir, "Chart.yaml")
	data, err := os.ReadFile(meta)
	if err != nil {
		t.Fatal(err)
	}
	bumped := regexp.MustCompile(`(?m)^version: .*$`).ReplaceAll(data, []byte("version: 99.0.0"))
	if bytes.Equal(bumped, data) {
		t.Fatal("Chart.yaml has no version line")
	}
	if err := os.WriteFile(meta, bumped, 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := Render(Options{ChartDir: dir, Values: map[string]any{"commonLabels": map[string]any{"cost-centre": "gpu"}}})
	if err != nil {
		t.Fatal(err)
	}
	if got := find(t, r, "DaemonSet", "miglayout-agent").GetLabels()["helm.sh/chart"]; got != "miglayout-99.0.0" {
		t.Fatalf("the bumped chart renders helm.sh/chart %q", got)
	}
	if diff := cmp.Diff(before, templates(r)); diff != "" {
		t.Errorf("pod templates changed by a chart version and commonLabels alone (-before +after):\n%s", diff)
	}

	withPodLabels := templates(render(t, map[string]any{"agent": map[string]any{"podLabels": map[string]any{"team": "ml"}}}))
	if got := withPodLabels["agent"].Labels["team"]; got != "ml" {
		t.Errorf("agent pod labels %v lack podLabels team=ml", withPodLabels["agent"].Labels)
	}
}

// TestAgentXidArgs: agent.deviceHealthXids and deviceHealthIgnoredXids
// become the agent's Xid flags; an empty list ignores none.
func TestAgentXidArgs(t *testing.T) {
	tests := map[string]struct {
		values map[string]any
		want   []string
	}{
		"defaults":     {map[string]any{}, []string{"--device-health-xids=true", "--device-health-ignored-xids=13,31,43,45,68,109"}},
		"none ignored": {map[string]any{"deviceHealthIgnoredXids": []any{}}, []string{"--device-health-xids=true", "--device-health-ignored-xids="}},
		"watch off":    {map[string]any{"deviceHealthXids": false, "deviceHealthIgnoredXids": []any{48}}, []string{"--device-health-xids=false", "--device-health-ignored-xids=48"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			objs, err := Render(Options{KubeVersion: "v1.37.2", Values: map[string]any{"agent": tc.values}})
			if err != nil {
				t.Fatal(err)
			}
			ds := convert[appsv1.DaemonSet](t, find(t, objs, "DaemonSet", "miglayout-agent"))
			var got []string
			for _, a := range ds.Spec.Template.Spec.Containers[0].Args {
				if strings.HasPrefix(a, "--device-health-xids") || strings.HasPrefix(a, "--device-health-ignored-xids") {
					got = append(got, a)
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("agent's Xid args (-want +got):\n%s", diff)
			}
		})
	}
}

// TestUserRolesOptional: rbac.userRoles=false, or rbac.create=false,
// installs no ClusterRole for people (TestHelmUserRoles checks what they
// grant on the real API server).
func TestUserRolesOptional(t *testing.T) {
	for name, rbac := range map[string]map[string]any{
		"userRoles off": {"userRoles": false},
		"create off":    {"create": false},
	} {
		t.Run(name, func(t *testing.T) {
			for _, o := range render(t, map[string]any{"rbac": rbac}).Objects {
				if n := o.GetName(); n == "miglayout-viewer" || n == "miglayout-editor" {
					t.Errorf("%s %s rendered", o.GetKind(), n)
				}
			}
		})
	}
}
