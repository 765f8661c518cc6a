package helm

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/apimachinery/pkg/util/managedfields/managedfieldstest"
	"sigs.k8s.io/yaml"
)

// TestCRDUpgradeStepsApply: Helm installs crds/ on first install only, and
// the chart README's upgrade steps apply them with
// `kubectl apply --server-side` before `helm upgrade`. The CRDs were
// created by Helm (field manager "helm"), and a CRD's spec.versions is an
// atomic list (apiextensions/v1 +listType=atomic): a server-side apply by
// another manager ("kubectl") that changes anything in it, even a field
// added to the schema, is a conflict with "helm" on .spec.versions, and the
// apply fails unless forced. The test replays the README's command, as
// written, with a field manager as the API server's (with a type converter
// deduced from the object: it treats lists as atomic, as the CRD schema
// marks spec.versions) on each of the chart's CRDs and a next release that
// adds one property, and checks that the applied CRD is the next one.
func TestCRDUpgradeStepsApply(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join(ChartDir(), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := regexp.MustCompile(`(?m)^kubectl apply --server-side.*crds/.*$`).FindString(string(readme))
	if cmd == "" {
		t.Fatal("the README's upgrade steps have no `kubectl apply --server-side ... crds/`")
	}
	force := strings.Contains(cmd, "--force-conflicts")

	files, err := filepath.Glob(filepath.Join(ChartDir(), "crds", "*.yaml"))
	if err != nil || len(files) < 2 {
		t.Fatalf("the chart's CRDs: %v (%v), want MigLayout's and NodeMigLayout's", files, err)
	}
	gvk := schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"}
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		installed := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(b, &installed.Object); err != nil {
			t.Fatal(err)
		}
		// The next release's CRD: one property more in the first version's spec.
		next := installed.DeepCopy()
		versions, _, _ := unstructured.NestedSlice(next.Object, "spec", "versions")
		v0 := versions[0].(map[string]any)
		if err := unstructured.SetNestedField(v0, map[string]any{"type": "string", "description": "a field of the next release"},
			"schema", "openAPIV3Schema", "properties", "spec", "properties", "nextReleaseField"); err != nil {
			t.Fatal(err)
		}
		if err := unstructured.SetNestedSlice(next.Object, versions, "spec", "versions"); err != nil {
			t.Fatal(err)
		}
		for how, install := range map[string]func(f managedfieldstest.TestFieldManager) error{
			// Helm 3 creates crds/ (and Helm 4 without --server-side): an Update-type entry of "helm".
			"created by helm": func(f managedfieldstest.TestFieldManager) error { return f.Update(installed.DeepCopy(), "helm") },
			// Helm 4's default: server-side apply as "helm".
			"applied by helm": func(f managedfieldstest.TestFieldManager) error { return f.Apply(installed.DeepCopy(), "helm", true) },
		} {
			t.Run(filepath.Base(file)+"/"+how, func(t *testing.T) {
				f := managedfieldstest.NewTestFieldManager(managedfields.NewDeducedTypeConverter(), gvk)
				if err := install(f); err != nil {
					t.Fatal(err)
				}
				if err := f.Apply(next.DeepCopy(), "kubectl", force); err != nil {
					t.Fatalf("the README's upgrade step %q fails on a CRD whose schema gains one field: %v", cmd, err)
				}
				live, err := runtime.DefaultUnstructuredConverter.ToUnstructured(f.Live())
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(next.Object["spec"], live["spec"]); diff != "" {
					t.Errorf("the CRD after the README's upgrade step differs from the next release's (-next +live):\n%s", diff)
				}
			})
		}
	}
}
