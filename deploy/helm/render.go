// Package helm renders and lints the miglayout Helm chart (deploy/helm/miglayout)
// with Helm's Go library, as `helm template` and `helm lint` do, for the tests
// that check the chart offline (this package) and against a real API server
// (test/e2e). Nothing is downloaded: the chart has no dependencies.
package helm

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"runtime"
	"slices"
	"strings"

	"helm.sh/helm/v4/pkg/chart/common"
	chartutil "helm.sh/helm/v4/pkg/chart/common/util"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/chart/v2/lint"
	"helm.sh/helm/v4/pkg/chart/v2/lint/support"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	chartv2util "helm.sh/helm/v4/pkg/chart/v2/util"
	"helm.sh/helm/v4/pkg/engine"
	releaseutil "helm.sh/helm/v4/pkg/release/v1/util"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// DefaultKubeVersion is the Kubernetes version rendered for when Options.KubeVersion
// is empty: the oldest the chart supports (Chart.yaml kubeVersion).
const DefaultKubeVersion = "v1.34.0"

// ChartDir is the absolute path of deploy/helm/miglayout.
func ChartDir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "miglayout")
}

// Options are the inputs of Render.
type Options struct {
	// ChartDir defaults to ChartDir().
	ChartDir string
	// ReleaseName defaults to "miglayout", Namespace to "miglayout-system".
	ReleaseName, Namespace string
	// Values override the chart's values.yaml, as --values/--set do.
	Values map[string]any
	// KubeVersion is the cluster version seen by the templates
	// (.Capabilities.KubeVersion) and checked against Chart.yaml's kubeVersion.
	KubeVersion string
}

// Rendered is a rendered chart.
type Rendered struct {
	// CRDs are the chart's crds/ files (Helm installs them first, untemplated).
	CRDs []*unstructured.Unstructured
	// Objects are the templates' objects in Helm's install order.
	Objects []*unstructured.Unstructured
	// Manifest is the whole `helm template` output (CRDs not included).
	Manifest string
	// Notes is the rendered NOTES.txt.
	Notes string
}

func (o *Options) defaults() {
	if o.ChartDir == "" {
		o.ChartDir = ChartDir()
	}
	if o.ReleaseName == "" {
		o.ReleaseName = "miglayout"
	}
	if o.Namespace == "" {
		o.Namespace = "miglayout-system"
	}
	if o.KubeVersion == "" {
		o.KubeVersion = DefaultKubeVersion
	}
}

func capabilities(kubeVersion string) (*common.Capabilities, error) {
	kv, err := common.ParseKubeVersion(kubeVersion)
	if err != nil {
		return nil, fmt.Errorf("parsing Kubernetes version %q: %w", kubeVersion, err)
	}
	caps := common.DefaultCapabilities.Copy()
	caps.KubeVersion = *kv
	return caps, nil
}

// Load loads the chart.
func Load(dir string) (*chart.Chart, error) {
	if dir == "" {
		dir = ChartDir()
	}
	return loader.Load(dir)
}

// Render renders the chart as `helm template` does: values are checked against
// values.schema.json, templates that call fail return their message as the
// error.
func Render(o Options) (*Rendered, error) {
	o.defaults()
	ch, err := Load(o.ChartDir)
	if err != nil {
		return nil, fmt.Errorf("loading chart %s: %w", o.ChartDir, err)
	}
	caps, err := capabilities(o.KubeVersion)
	if err != nil {
		return nil, err
	}
	if c := ch.Metadata.KubeVersion; c != "" && !chartv2util.IsCompatibleRange(c, caps.KubeVersion.String()) {
		return nil, fmt.Errorf("chart requires kubeVersion %s, which is incompatible with Kubernetes %s", c, caps.KubeVersion.String())
	}
	vals, err := chartutil.ToRenderValues(ch, o.Values,
		common.ReleaseOptions{Name: o.ReleaseName, Namespace: o.Namespace, IsInstall: true, Revision: 1}, caps)
	if err != nil {
		return nil, err
	}
	files, err := engine.Render(ch, vals)
	if err != nil {
		return nil, err
	}
	out := &Rendered{}
	for name, content := range files {
		if strings.HasSuffix(name, "NOTES.txt") {
			out.Notes = content
			delete(files, name)
		}
	}
	hooks, manifests, err := releaseutil.SortManifests(files, caps.APIVersions, releaseutil.InstallOrder)
	if err != nil {
		return nil, fmt.Errorf("sorting manifests: %w", err)
	}
	if len(hooks) > 0 {
		return nil, fmt.Errorf("the chart has %d hooks; this renderer does not run hooks", len(hooks))
	}
	var b strings.Builder
	for _, m := range manifests {
		fmt.Fprintf(&b, "---\n# Source: %s\n%s\n", m.Name, m.Content)
		objs, err := decode(m.Content)
		if err != nil {
			return nil, fmt.Errorf("decoding %s: %w", m.Name, err)
		}
		out.Objects = append(out.Objects, objs...)
	}
	out.Manifest = b.String()
	for _, f := range ch.CRDObjects() {
		objs, err := decode(string(f.File.Data))
		if err != nil {
			return nil, fmt.Errorf("decoding %s: %w", f.Filename, err)
		}
		out.CRDs = append(out.CRDs, objs...)
	}
	return out, nil
}

// decode splits a YAML stream into objects, skipping empty documents.
func decode(s string) ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	d := utilyaml.NewYAMLOrJSONDecoder(bytes.NewBufferString(s), 4096)
	for {
		var m map[string]any
		if err := d.Decode(&m); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, err
		}
		if len(m) == 0 {
			continue
		}
		u := &unstructured.Unstructured{Object: m}
		if u.GetKind() == "" || u.GetAPIVersion() == "" {
			return nil, fmt.Errorf("a document without apiVersion or kind: %v", m)
		}
		out = append(out, u)
	}
}

// Lint runs `helm lint` on the chart with the given values overrides and
// returns the messages at or above support.WarningSev ("[WARNING] ..." or
// "[ERROR] ..."); INFO messages (such as a missing icon) are left out.
func Lint(dir string, values map[string]any, namespace, kubeVersion string) ([]string, error) {
	if dir == "" {
		dir = ChartDir()
	}
	if kubeVersion == "" {
		kubeVersion = DefaultKubeVersion
	}
	kv, err := common.ParseKubeVersion(kubeVersion)
	if err != nil {
		return nil, err
	}
	res := lint.RunAll(dir, values, namespace, lint.WithKubeVersion(kv))
	var msgs []string
	for _, m := range res.Messages {
		if m.Severity >= support.WarningSev {
			msgs = append(msgs, m.Error())
		}
	}
	slices.Sort(msgs)
	return msgs, nil
}
