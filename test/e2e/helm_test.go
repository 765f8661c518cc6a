package e2e

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/rand"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"

	"github.com/miglayout/miglayout/deploy/helm"
	"github.com/miglayout/miglayout/test/harness"
)

// The miglayout Helm chart (deploy/helm/miglayout), rendered with Helm's Go
// library as `helm template` would, must be accepted object by object by the
// real API server. deploy/helm's own tests cover rendering and lint offline.

// serverVersion is the API server's version, as .Capabilities.KubeVersion.
func serverVersion(t *testing.T) string {
	t.Helper()
	v, err := client.Discovery().ServerVersion()
	if err != nil {
		t.Fatal(err)
	}
	return v.GitVersion
}

// applier applies unstructured objects with server-side apply.
type applier struct {
	dyn    dynamic.Interface
	mapper *restmapper.DeferredDiscoveryRESTMapper
}

func newApplier(t *testing.T, cfg *rest.Config) *applier {
	t.Helper()
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &applier{dyn: dyn, mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(client.Discovery()))}
}

func (a *applier) resource(o *unstructured.Unstructured) (dynamic.ResourceInterface, error) {
	gvk := o.GroupVersionKind()
	m, err := a.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		a.mapper.Reset() // a CRD installed since the last discovery
		if m, err = a.mapper.RESTMapping(gvk.GroupKind(), gvk.Version); err != nil {
			return nil, fmt.Errorf("mapping %s: %w", gvk, err)
		}
	}
	if m.Scope.Name() == "namespace" {
		if o.GetNamespace() == "" {
			return nil, fmt.Errorf("%s %s is namespaced but has no namespace", o.GetKind(), o.GetName())
		}
		return a.dyn.Resource(m.Resource).Namespace(o.GetNamespace()), nil
	}
	if o.GetNamespace() != "" {
		return nil, fmt.Errorf("%s %s is cluster-scoped but has namespace %q", o.GetKind(), o.GetName(), o.GetNamespace())
	}
	return a.dyn.Resource(m.Resource), nil
}

// apply server-side applies o; with dryRun the server runs defaulting,
// validation and admission (CEL included) and stores nothing.
func (a *applier) apply(ctx context.Context, o *unstructured.Unstructured, dryRun bool) error {
	ri, err := a.resource(o)
	if err != nil {
		return err
	}
	opts := metav1.ApplyOptions{FieldManager: "miglayout-e2e", Force: true}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	_, err = ri.Apply(ctx, o.GetName(), o, opts)
	if err != nil {
		return fmt.Errorf("%s %s: %w", o.GetKind(), o.GetName(), err)
	}
	return nil
}

func (a *applier) delete(ctx context.Context, o *unstructured.Unstructured) error {
	ri, err := a.resource(o)
	if err != nil {
		return err
	}
	if err := ri.Delete(ctx, o.GetName(), metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	return nil
}

// installChartCRDs creates or updates the chart's CRDs (crds/) for real, as
// helm install does before the templates, and waits until they are served.
func installChartCRDs(t *testing.T, ctx context.Context) {
	t.Helper()
	c := miglayoutClient(t) // deploy/crds, once per package run
	if err := applyCRDs(ctx, c, filepath.Join(helm.ChartDir(), "crds")); err != nil {
		t.Fatal(err)
	}
}

func TestHelmChartAcceptedByAPIServer(t *testing.T) {
	ctx := testContext(t, 3*time.Minute)
	installChartCRDs(t, ctx)
	version := serverVersion(t)
	a := newApplier(t, cp.Config())
	for name, values := range map[string]map[string]any{
		"defaults": nil,
		"simulated, with the dashboard": {"agent": map[string]any{"privileged": false, "simulate": "4xA100-SXM4-80GB"},
			"metrics": map[string]any{"grafanaDashboard": map[string]any{"enabled": true}}},
		"nvidia driver name": {"driverName": "gpu.nvidia.com",
			"deviceClasses": map[string]any{"migName": "mig.nvidia.com", "gpuName": "gpu.nvidia.com"},
			"agent":         map[string]any{"runtimeClassName": "nvidia", "nvidiaDriverRoot": "/run/nvidia/driver"}},
		"one replica, no policy": {"controller": map[string]any{"replicas": 1, "leaderElection": map[string]any{"enabled": false}},
			"agentNodePolicy": map[string]any{"enabled": false}, "metrics": map[string]any{"service": false}},
		"extended resources": {"deviceClasses": map[string]any{"extendedResources": []any{
			map[string]any{"profile": "1g.10gb", "resourceName": "nvidia.com/mig-1g.10gb"},
			map[string]any{"profile": "1g.10gb+me", "resourceName": "nvidia.com/mig-1g.10gb.me"}}}},
	} {
		t.Run(name, func(t *testing.T) {
			sfx := rand.String(5)
			ns := "helm-" + sfx
			r, err := helm.Render(helm.Options{ReleaseName: "ml-" + sfx, Namespace: ns, Values: values, KubeVersion: version})
			if err != nil {
				t.Fatalf("helm template: %v", err)
			}
			if msgs, err := helm.Lint("", values, ns, version); err != nil || len(msgs) > 0 {
				t.Errorf("helm lint: %v\n%s", err, strings.Join(msgs, "\n"))
			}
			if _, err := harness.CreateNamespace(ctx, client, ns); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				_ = client.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{})
			})
			kinds := map[string]int{}
			for _, o := range r.Objects {
				if err := a.apply(ctx, o, true); err != nil {
					t.Errorf("server-side dry-run refused: %v", err)
				}
				kinds[o.GetKind()]++
			}
			for _, k := range []string{"Deployment", "DaemonSet", "ServiceAccount", "ClusterRole", "ClusterRoleBinding"} {
				if kinds[k] == 0 {
					t.Errorf("no %s rendered (%v)", k, kinds)
				}
			}
			t.Logf("%d objects accepted by the API server (dry run): %v", len(r.Objects), kinds)
		})
	}
}

// TestHelmCRDsServeTheExamples: with the chart's CRDs installed, every
// MigLayout of deploy/examples passes the API server's validation.
func TestHelmCRDsServeTheExamples(t *testing.T) {
	ctx := testContext(t, time.Minute)
	installChartCRDs(t, ctx)
	a := newApplier(t, cp.Config())
	files, err := filepath.Glob("../../deploy/examples/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no examples: %v", err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		d := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(string(b)), 4096)
		for {
			var m map[string]any
			if err := d.Decode(&m); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				t.Fatalf("%s: %v", filepath.Base(f), err)
			}
			if len(m) == 0 {
				continue
			}
			if err := a.apply(ctx, &unstructured.Unstructured{Object: m}, true); err != nil {
				t.Errorf("%s: %v", filepath.Base(f), err)
			}
		}
	}
}

// TestHelmBadValuesFail: values the chart refuses fail `helm template` with
// a message that names the value, before anything reaches the API server.
func TestHelmBadValuesFail(t *testing.T) {
	version := serverVersion(t)
	for _, tc := range []struct {
		values map[string]any
		want   string
	}{
		{map[string]any{"agent": map[string]any{"privileged": false}}, "agent.privileged=false needs agent.simulate"},
		{map[string]any{"controller": map[string]any{"leaderElection": map[string]any{"enabled": false}}}, "controller.leaderElection.enabled is false"},
		{map[string]any{"driverName": "Not_A_Driver"}, `driverName "Not_A_Driver" is not a DRA driver name`},
		{map[string]any{"agent": map[string]any{"nodeselector": map[string]any{}}}, "additional properties 'nodeselector' not allowed"},
	} {
		_, err := helm.Render(helm.Options{Values: tc.values, KubeVersion: version})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("values %v: error %v, want %q", tc.values, err, tc.want)
		}
	}
	if _, err := helm.Render(helm.Options{KubeVersion: "v1.33.1"}); err == nil || !strings.Contains(err.Error(), "kubeVersion") {
		t.Errorf("rendering for 1.33: %v, want the kubeVersion constraint", err)
	}
}
