package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/miglayout/miglayout/api/v1alpha1"
	"github.com/miglayout/miglayout/deploy/helm"
)

// TestSelectorPolicy: the chart's migLayoutSelectorPolicy, installed for
// real, refuses a MigLayout whose nodeSelector has a malformed label key or
// value (which the CRD's own rules cannot check), with the offending key or
// value in the message, and admits well-formed ones. A MigLayout stored
// before the policy keeps its selector through other edits and can be
// deleted; its selector can only be changed to a well-formed one.
func TestSelectorPolicy(t *testing.T) {
	c := miglayoutClient(t)
	ctx := testContext(t, 2*time.Minute)
	const rules = "\nrules: [{profiles: {3g.40gb: 2}}]"

	// Stored before the policy: the CRD admits it. (A policy another
	// test installed and removed may still be enforced for a moment.)
	old := migLayoutObject(t, "sel-policy-old", "nodeSelector: {matchLabels: {'bad key': a}}"+rules)
	var err error
	if werr := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		err = c.Create(ctx, old.DeepCopy())
		return err == nil, nil
	}); werr != nil {
		t.Fatalf("creating a MigLayout with a malformed selector before the policy: %v", err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), old) })

	installSelectorPolicy(t, ctx)

	tests := map[string]struct {
		selector string
		want     string // a substring of the admission error; "" for accepted
	}{
		"matchLabels key with a space":     {"nodeSelector: {matchLabels: {'bad key': a}}", `key "bad key" is not a label key`},
		"matchLabels key with two slashes": {"nodeSelector: {matchLabels: {'a/b/c': a}}", `key "a/b/c" is not a label key`},
		"matchLabels value too long":       {"nodeSelector: {matchLabels: {pool: " + strings.Repeat("v", 64) + "}}", "is not a label value: must be no more than 63"},
		"matchLabels value with unicode":   {"nodeSelector: {matchLabels: {pool: 'bäd'}}", `"bäd" is not a label value`},
		"expression key ending in a dot":   {"nodeSelector: {matchExpressions: [{key: 'pool.', operator: Exists}]}", `key "pool." is not a label key`},
		"expression value with a slash":    {"nodeSelector: {matchExpressions: [{key: pool, operator: In, values: [a, 'b/c']}]}", `"b/c" is not a label value`},
		"prefixed keys and empty values": {"nodeSelector: {matchLabels: {'example.com/gpu': '', pool: a-b.c_d}, " +
			"matchExpressions: [{key: nvidia.com/gpu.present, operator: Exists}, {key: pool, operator: NotIn, values: ['', x]}]}", ""},
		"no selector terms": {"nodeSelector: {}", ""},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			wantAdmission(t, dryRunMigLayout(ctx, c, "sel-policy", tc.selector+rules), tc.want)
		})
	}

	t.Run("stored before the policy", func(t *testing.T) {
		if err := c.Get(ctx, crclient.ObjectKeyFromObject(old), old); err != nil {
			t.Fatal(err)
		}
		old.SetLabels(map[string]string{"edited": "true"})
		if err := c.Update(ctx, old); err != nil {
			t.Errorf("an edit that keeps the selector was refused: %v", err)
		}
		if err := c.Get(ctx, crclient.ObjectKeyFromObject(old), old); err != nil {
			t.Fatal(err)
		}
		if err := unstructured.SetNestedStringMap(old.Object, map[string]string{"other bad": "a"}, "spec", "nodeSelector", "matchLabels"); err != nil {
			t.Fatal(err)
		}
		if err := c.Update(ctx, old); err == nil || !strings.Contains(err.Error(), `key "other bad" is not a label key`) {
			t.Errorf("a change to another malformed selector: %v, want it refused", err)
		}
		if err := c.Delete(ctx, old); err != nil {
			t.Errorf("deleting it: %v", err)
		}
	})
}

// migLayoutObject is a MigLayout of the given spec (YAML) as unstructured.
func migLayoutObject(t *testing.T, name, spec string) *unstructured.Unstructured {
	t.Helper()
	obj := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte("spec:\n"+indent(spec, "  ")), &obj.Object); err != nil {
		t.Fatalf("test bug: spec does not parse: %v", err)
	}
	obj.SetAPIVersion(v1alpha1.GroupVersion.String())
	obj.SetKind("MigLayout")
	obj.SetName(name)
	return obj
}

// installSelectorPolicy applies the chart's selector policy and binding,
// removed when the test ends, and waits until the API server enforces it
// (policies take effect asynchronously).
func installSelectorPolicy(t *testing.T, ctx context.Context) {
	t.Helper()
	r, err := helm.Render(helm.Options{ReleaseName: "miglayout", Namespace: "miglayout-system", KubeVersion: serverVersion(t)})
	if err != nil {
		t.Fatal(err)
	}
	a := newApplier(t, cp.Config())
	n := 0
	for _, o := range r.Objects {
		if !strings.HasPrefix(o.GetKind(), "ValidatingAdmissionPolicy") || o.GetName() != "miglayout-selector-syntax" {
			continue
		}
		if err := a.apply(ctx, o, false); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := a.delete(ctx, o); err != nil {
				t.Logf("cleanup: %v", err)
			}
		})
		n++
	}
	if n != 2 {
		t.Fatalf("the chart rendered %d objects named miglayout-selector-syntax, want a policy and its binding", n)
	}
	c := miglayoutClient(t)
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		return dryRunMigLayout(ctx, c, "sel-policy-probe", "nodeSelector: {matchLabels: {'probe key': a}}\nrules: [{profiles: {3g.40gb: 2}}]") != nil, nil
	})
	if err != nil {
		t.Fatalf("the selector policy is not enforced a minute after it was installed: %v", err)
	}
}
