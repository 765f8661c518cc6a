package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// The miglayout CRDs (deploy/crds) are installed once per package run, by
// the first test that needs them (miglayoutClient).

var (
	crdsOnce sync.Once
	crdsErr  error
)

// miglayoutScheme knows the built-in types, CRDs and the miglayout API.
func miglayoutScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, apiextensionsv1.AddToScheme, v1alpha1.AddToScheme} {
		if err := add(s); err != nil {
			panic(err)
		}
	}
	return s
}

// miglayoutClient installs the CRDs of deploy/crds (once per package run)
// and returns a controller-runtime client that knows the miglayout API.
func miglayoutClient(t *testing.T) crclient.Client {
	t.Helper()
	c, err := crclient.New(cp.Config(), crclient.Options{Scheme: miglayoutScheme()})
	if err != nil {
		t.Fatal(err)
	}
	crdsOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		crdsErr = applyCRDs(ctx, c, "../../deploy/crds")
	})
	if crdsErr != nil {
		t.Fatal(crdsErr)
	}
	return c
}

// applyCRDs creates or updates every CRD of dir and waits until each is
// Established and served.
func applyCRDs(ctx context.Context, c crclient.Client, dir string) error {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(files) == 0 {
		return fmt.Errorf("finding CRDs in %s: %v", dir, err)
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return fmt.Errorf("reading %s: %w", f, err)
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.UnmarshalStrict(data, crd); err != nil {
			return fmt.Errorf("decoding %s: %w", f, err)
		}
		if err := c.Create(ctx, crd); apierrors.IsAlreadyExists(err) {
			cur := &apiextensionsv1.CustomResourceDefinition{}
			if err := c.Get(ctx, crclient.ObjectKeyFromObject(crd), cur); err != nil {
				return fmt.Errorf("getting CRD %s: %w", crd.Name, err)
			}
			cur.Spec = crd.Spec
			err = c.Update(ctx, cur)
			if err != nil {
				return fmt.Errorf("updating CRD %s: %w", crd.Name, err)
			}
		} else if err != nil {
			return fmt.Errorf("creating CRD %s: %w", crd.Name, err)
		}
		err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			cur := &apiextensionsv1.CustomResourceDefinition{}
			if err := c.Get(ctx, crclient.ObjectKeyFromObject(crd), cur); err != nil {
				return false, err
			}
			for _, cond := range cur.Status.Conditions {
				if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
					return true, nil
				}
			}
			return false, nil
		})
		if err != nil {
			return fmt.Errorf("waiting for CRD %s to be established: %w", crd.Name, err)
		}
	}
	// Served: a list of each kind succeeds.
	return wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		if err := c.List(ctx, &v1alpha1.MigLayoutList{}); err != nil {
			return false, nil
		}
		return c.List(ctx, &v1alpha1.NodeMigLayoutList{}) == nil, nil
	})
}

// dryRunMigLayout submits a MigLayout given as YAML (spec only) with
// dryRun=All: admission, defaulting and CEL validation run, nothing is stored.
func dryRunMigLayout(ctx context.Context, c crclient.Client, name, spec string) error {
	_, err := dryRunMigLayoutObject(ctx, c, name, spec)
	return err
}

// dryRunMigLayoutObject is dryRunMigLayout returning the object as the API
// server would have stored it (defaults filled in).
func dryRunMigLayoutObject(ctx context.Context, c crclient.Client, name, spec string) (*unstructured.Unstructured, error) {
	obj := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte("spec:\n"+indent(spec, "  ")), &obj.Object); err != nil {
		return nil, fmt.Errorf("test bug: spec does not parse: %w", err)
	}
	obj.SetAPIVersion(v1alpha1.GroupVersion.String())
	obj.SetKind("MigLayout")
	obj.SetName(name)
	return obj, c.Create(ctx, obj, crclient.DryRunAll)
}

// testContext is t.Context with a deadline.
func testContext(t *testing.T, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), d)
	t.Cleanup(cancel)
	return ctx
}

func indent(s, prefix string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i, l := range lines {
		lines[i] = prefix + l
	}
	return strings.Join(lines, "\n") + "\n"
}

const selectorYAML = "nodeSelector: {matchLabels: {pool: a}}\n"

func TestCELRejectsAtAdmission(t *testing.T) {
	c := miglayoutClient(t)
	ctx := testContext(t, time.Minute)
	tests := map[string]struct {
		spec string
		want string // a substring of the admission error
	}{
		"malformed profile name in counts": {
			spec: "rules: [{profiles: {3g.40gb: 1, 3g.40: 1}}]",
			want: `profile names look like 3g.40gb or 1g.10gb+me (digits, lowercase letters, ".", "+" and "-" only), not "3g.40"`,
		},
		"profile name with a trailing space": {
			spec: `rules: [{profiles: {"3g.40gb ": 1}}]`,
			want: `not "3g.40gb "`,
		},
		"empty profile name": {
			spec: `rules: [{profiles: {"": 1}}]`,
			want: `not ""`,
		},
		"malformed profile name in spares": {
			spec: "mode: Auto\npolicy: {spares: {big: 1}}",
			want: `not "big"`,
		},
		"profile name with a zero-width space in spares": {
			spec: "mode: Auto\npolicy: {spares: {\"1g.10gb\\u200b\": 1}}",
			want: "not \"1g.10gb\u200b\"",
		},
		"malformed allowed profile": {
			spec: "mode: Auto\npolicy: {allowedProfiles: [3g40gb]}",
			want: "profile names look like 3g.40gb or 1g.10gb+me",
		},
		"count zero": {
			spec: "rules: [{profiles: {3g.40gb: 0}}]",
			want: "profile counts must be between 1 and 7 (3g.40gb)",
		},
		"count negative": {
			spec: "rules: [{profiles: {1g.10gb: -2}}]",
			want: "profile counts must be between 1 and 7 (1g.10gb)",
		},
		"count above seven": {
			spec: "rules: [{profiles: {3g.40gb: 1, 1g.10gb: 8}}]",
			want: "profile counts must be between 1 and 7 (1g.10gb)",
		},
		"compute slices over seven (4g+3g+1g)": {
			spec: "rules: [{profiles: {4g.40gb: 1, 3g.40gb: 1, 1g.10gb: 1}}]",
			want: "these counts need more than 7 compute slices (each count times the number before g of its profile); no GPU has more",
		},
		"three halves": {
			spec: "rules: [{profiles: {3g.40gb: 3}}]",
			want: "these counts need more than 7 compute slices",
		},
		"the whole GPU beside another device": {
			spec: "rules: [{profiles: {7g.80gb: 1, 1g.10gb: 1}}]",
			want: "these counts need more than 7 compute slices",
		},
		"two media-extension devices": {
			spec: "rules: [{profiles: {1g.10gb+me: 2}}]",
			want: "a GPU holds at most one device of a profile with media extensions (+me)",
		},
		"devices of two media-extension profiles": {
			spec: "rules: [{profiles: {1g.6gb+me: 1, 2g.12gb+me: 1}}]",
			want: "a GPU holds at most one device with media extensions (+me): these counts ask for devices of two such profiles",
		},
		"negative spares": {
			spec: "mode: Auto\npolicy: {spares: {1g.10gb: -1}}",
			want: "spare counts must be between 0 and 112, per node over all its GPUs (1g.10gb)",
		},
		"profiles and layout in one rule": {
			spec: "rules: [{profiles: {3g.40gb: 1}, layout: 3g.40gb@0}]",
			want: "give either profiles (counts) or layout (explicit placements), not both",
		},
		"policy in Static mode": {
			spec: "mode: Static\nrules: [{profiles: {3g.40gb: 2}}]\npolicy: {maxGPUs: 2}",
			want: "policy is only allowed in Auto mode",
		},
		"maxNodesChanging in Auto mode": {
			spec: "mode: Auto\nmaxNodesChanging: 2",
			want: "maxNodesChanging is only allowed in Static mode; Auto mode bounds changes with policy.maxGPUs",
		},
		"maxNodesChanging zero": {
			spec: "rules: [{profiles: {3g.40gb: 2}}]\nmaxNodesChanging: 0",
			want: "spec.maxNodesChanging: Invalid value",
		},
		"maxNodesChanging 10001": {
			spec: "rules: [{profiles: {3g.40gb: 2}}]\nmaxNodesChanging: 10001",
			want: "spec.maxNodesChanging: Invalid value",
		},
		"rules in Auto mode": {
			spec: "mode: Auto\nrules: [{profiles: {3g.40gb: 2}}]",
			want: "rules are only allowed in Static mode; Auto mode takes a policy",
		},
		"Static without rules": {
			spec: "mode: Static",
			want: "Static mode needs at least one rule",
		},
		"Static by default, without rules": {
			spec: "",
			want: "Static mode needs at least one rule",
		},
		"Static with an empty rule list": {
			spec: "rules: []",
			want: "Static mode needs at least one rule",
		},
		"migEnabled false with profiles": {
			spec: "rules: [{migEnabled: false, profiles: {1g.10gb: 7}}]",
			want: "profiles and layout need migEnabled: true",
		},
		"migEnabled false with a layout": {
			spec: "rules: [{migEnabled: false, layout: 7g.80gb@0}]",
			want: "profiles and layout need migEnabled: true",
		},
		"MIG on without profiles or layout": {
			spec: "rules: [{name: empty}]",
			want: "a rule with MIG enabled needs profiles or layout",
		},
		"empty layout": {
			spec: "rules: [{layout: ''}]",
			want: "(for MIG on with no device, write profiles: {})",
		},
		"layout without placement": {
			spec: "rules: [{layout: 3g.40gb}]",
			want: "layouts look like 3g.40gb@0,2g.20gb@4,1g.10gb@6",
		},
		"layout with a bad separator": {
			spec: "rules: [{layout: '3g.40gb@0;3g.40gb@4'}]",
			want: "layouts look like 3g.40gb@0,2g.20gb@4,1g.10gb@6",
		},
		"layout with a malformed profile": {
			spec: "rules: [{layout: '3g.40gb@0,3g.40@4'}]",
			want: "layouts look like 3g.40gb@0,2g.20gb@4,1g.10gb@6",
		},
		"layout with a leading zero": {
			spec: "rules: [{layout: '3g.40gb@04'}]",
			want: "layouts look like 3g.40gb@0,2g.20gb@4,1g.10gb@6",
		},
		"layout of more than 7 compute slices": {
			spec: "rules: [{layout: '7g.80gb@0,7g.80gb@0'}]",
			want: "these devices need more than 7 compute slices",
		},
		"layout of 8 devices": {
			spec: "rules: [{layout: '1g.10gb@0,1g.10gb@1,1g.10gb@2,1g.10gb@3,1g.10gb@4,1g.10gb@5,1g.10gb@6,1g.10gb@7'}]",
			want: "these devices need more than 7 compute slices",
		},
		"layout of two media-extension devices": {
			spec: "rules: [{layout: '1g.10gb+me@0,1g.10gb+me@1'}]",
			want: "a GPU holds at most one device with media extensions (+me)",
		},
		"layout with a start beyond any GPU": {
			spec: "rules: [{layout: '1g.10gb@0,7g.80gb@99'}]",
			want: "layouts look like 3g.40gb@0,2g.20gb@4,1g.10gb@6",
		},
		"unknown mode": {
			spec: "mode: Manual\nrules: [{profiles: {3g.40gb: 2}}]",
			want: `spec.mode: Unsupported value: "Manual"`,
		},
		"negative idle time before a GPU is reclaimed": {
			spec: "mode: Auto\npolicy: {reclaimIdleGPUsAfterSeconds: -1}",
			want: "spec.policy.reclaimIdleGPUsAfterSeconds: Invalid value",
		},
		"idle time before a GPU is reclaimed above a day": {
			spec: "mode: Auto\npolicy: {reclaimIdleGPUsAfterSeconds: 86401}",
			want: "spec.policy.reclaimIdleGPUsAfterSeconds: Invalid value",
		},
		"spares of a profile not allowed": {
			spec: "mode: Auto\npolicy: {allowedProfiles: [3g.40gb], spares: {3g.40gb: 1, 1g.10gb: 2}}",
			want: "spares must name profiles in allowedProfiles; 1g.10gb is not there",
		},
		"two rules of one name": {
			spec: "rules: [{name: halves, gpuIndices: [0], profiles: {3g.40gb: 2}}, {name: halves, profiles: {1g.10gb: 7}}]",
			want: "rule names must be distinct",
		},
		"profile without a count (a key left empty)": {
			spec: "rules:\n- profiles:\n    3g.40gb:\n    1g.10gb: 1\n",
			want: "profile 3g.40gb has no count",
		},
		"spare without a count": {
			spec: "mode: Auto\npolicy:\n  spares:\n    1g.10gb:\n",
			want: "spares: profile 1g.10gb has no count",
		},
		"spare without a count, allowed profiles listed": {
			spec: "mode: Auto\npolicy:\n  allowedProfiles: [3g.40gb]\n  spares:\n    3g.40gb: 1\n    1g.10gb:\n",
			want: "spares: profile 1g.10gb has no count",
		},
		"GPU index out of range": {
			spec: "rules: [{gpuIndices: [64], profiles: {3g.40gb: 2}}]",
			want: "spec.rules[0].gpuIndices[0]",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			err := dryRunMigLayout(ctx, c, "cel-reject", selectorYAML+tc.spec)
			if err == nil {
				t.Fatalf("admission accepted the MigLayout; want an error with %q", tc.want)
			}
			if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("admission error %q; want an Invalid error with %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "no such overload") {
				t.Errorf("admission error %q: a CEL rule failed to evaluate", err)
			}
		})
	}
}

func TestCELAcceptsValid(t *testing.T) {
	c := miglayoutClient(t)
	ctx := testContext(t, time.Minute)
	tests := map[string]string{
		"counts":                      "rules: [{name: halves, productName: A100-SXM4-80GB, profiles: {3g.40gb: 2}}]",
		"media-extension profile":     "rules: [{profiles: {1g.10gb+me: 1, 1g.10gb: 6}}]",
		"seven compute slices":        "rules: [{profiles: {4g.40gb: 1, 2g.20gb: 1, 1g.10gb: 1}}, {profiles: {3g.40gb: 2, 1g.10gb: 1}}, {profiles: {1g.10gb: 7}}]",
		"without media engines (-me)": "rules: [{profiles: {1g.10gb-me: 2}}]",
		"explicit layout":             "mode: Static\nrules: [{gpuIndices: [0, 1], layout: '3g.40gb@0,2g.20gb@4,1g.10gb@6'}]",
		"MIG off":                     "rules: [{migEnabled: false}]",
		"MIG on with explicit flag":   "rules: [{migEnabled: true, profiles: {7g.80gb: 1}}]",
		"MIG on, no device":           "rules: [{profiles: {}}]",
		"Auto with a policy":          "mode: Auto\npolicy: {allowedProfiles: [1g.10gb], spares: {1g.10gb: 0}}",
		"Auto without a policy":       "mode: Auto",
		"Static, one node at a time":  "rules: [{profiles: {3g.40gb: 2}}]\nmaxNodesChanging: 1",
		"Auto: spares with every profile allowed (empty list)":        "mode: Auto\npolicy: {allowedProfiles: [], spares: {1g.10gb: 1}}",
		"explicit layout, starts of two digits":                       "rules: [{layout: '1g.10gb@0,1g.10gb@63'}]",
		"explicit layout of seven compute slices, one +me":            "rules: [{layout: '1g.10gb+me@0,1g.10gb@1,1g.10gb@2,1g.10gb@3,1g.10gb@4,1g.10gb@5,1g.10gb@6'}, {layout: '4g.40gb@0,3g.40gb@4'}]",
		"explicit layouts of sixteen rules, each at the length limit": sixteenLongLayouts(),
		"Auto: every profile but the whole GPU of three models":       "mode: Auto\npolicy: {allowedProfiles: [1g.10gb, 1g.10gb+me, 1g.20gb, 2g.20gb, 3g.40gb, 4g.40gb, 1g.18gb, 1g.18gb+me, 1g.35gb, 2g.35gb, 3g.71gb, 4g.71gb, 1g.23gb, 1g.23gb+me, 1g.45gb, 2g.45gb, 3g.90gb, 4g.90gb]}",
		"Auto: zero spares of a profile not allowed":                  "mode: Auto\npolicy: {allowedProfiles: [3g.40gb], spares: {1g.10gb: 0, 3g.40gb: 1}}",
		"Auto: spares over several GPUs of a node":                    "mode: Auto\npolicy: {spares: {1g.10gb: 14, 7g.80gb: 8}}",
		"rules of distinct names and unnamed ones":                    "rules: [{name: a, gpuIndices: [0], profiles: {7g.80gb: 1}}, {gpuIndices: [1], profiles: {3g.40gb: 2}}, {name: b, gpuIndices: [2], profiles: {1g.10gb: 7}}, {profiles: {2g.20gb: 3}}]",
	}
	for name, spec := range tests {
		t.Run(name, func(t *testing.T) {
			if err := dryRunMigLayout(ctx, c, "cel-accept", selectorYAML+spec); err != nil {
				t.Fatalf("admission refused a valid MigLayout: %v", err)
			}
		})
	}
	examples, err := filepath.Glob("../../deploy/examples/*.yaml")
	if err != nil || len(examples) < 4 {
		t.Fatalf("want at least 4 examples in deploy/examples, found %d (%v)", len(examples), err)
	}
	for _, f := range examples {
		t.Run(filepath.Base(f), func(t *testing.T) {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			obj := &unstructured.Unstructured{}
			if err := yaml.Unmarshal(data, &obj.Object); err != nil {
				t.Fatal(err)
			}
			if err := c.Create(ctx, obj, crclient.DryRunAll); err != nil {
				t.Fatalf("admission refused example %s: %v", f, err)
			}
		})
	}
}

// TestTypedEmptyProfiles: a rule asking for MIG on with no device, written
// with the Go types (Profiles: an empty map), reaches the API server as
// profiles: {} and is admitted and kept so; nil profiles stay absent (and
// the rule, asking for nothing, is refused).
func TestTypedEmptyProfiles(t *testing.T) {
	c := miglayoutClient(t)
	ctx := testContext(t, time.Minute)
	ml := &v1alpha1.MigLayout{
		ObjectMeta: metav1.ObjectMeta{Name: "typed-empty-profiles"},
		Spec: v1alpha1.MigLayoutSpec{
			NodeSelector: metav1.LabelSelector{MatchLabels: map[string]string{"pool": "a"}},
			Rules:        []v1alpha1.LayoutRule{{Profiles: map[string]int32{}}},
		},
	}
	if err := c.Create(ctx, ml); err != nil {
		t.Fatalf("admission refused profiles: {} sent with the Go types: %v", err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), ml) })
	// Read back into a fresh object: decoding the answer into ml keeps the map it sent.
	stored := &v1alpha1.MigLayout{}
	if err := c.Get(ctx, crclient.ObjectKeyFromObject(ml), stored); err != nil {
		t.Fatal(err)
	}
	if got := stored.Spec.Rules[0].Profiles; got == nil || len(got) != 0 {
		t.Errorf("stored profiles %v, want {} (empty, not absent)", got)
	}
	ml = &v1alpha1.MigLayout{
		ObjectMeta: metav1.ObjectMeta{Name: "typed-nil-profiles"},
		Spec: v1alpha1.MigLayoutSpec{
			NodeSelector: metav1.LabelSelector{MatchLabels: map[string]string{"pool": "a"}},
			Rules:        []v1alpha1.LayoutRule{{}},
		},
	}
	if err := c.Create(ctx, ml, crclient.DryRunAll); err == nil {
		t.Error("admission took a rule with nil profiles and no layout, want it refused")
	}
}

// TestAutoPolicyDefaults: the API server fills in an Auto policy's limits
// and the idle time before a GPU is given back whole.
func TestAutoPolicyDefaults(t *testing.T) {
	c := miglayoutClient(t)
	ctx := testContext(t, time.Minute)
	obj, err := dryRunMigLayoutObject(ctx, c, "policy-defaults", selectorYAML+"mode: Auto\npolicy: {allowedProfiles: [3g.40gb]}")
	if err != nil {
		t.Fatal(err)
	}
	policy, _, _ := unstructured.NestedMap(obj.Object, "spec", "policy")
	want := map[string]any{"allowedProfiles": []any{"3g.40gb"}, "maxGPUs": int64(8), "maxGPUsPerNode": int64(1), "reclaimIdleGPUsAfterSeconds": int64(300)}
	if diff := cmp.Diff(want, policy); diff != "" {
		t.Errorf("defaulted policy (-want +got):\n%s", diff)
	}
}

// TestCELNodeSelector: a node selector with an operator a label selector
// does not have, or values where none belong or none where they do, is
// refused at admission; valid ones pass. (Malformed label keys and values
// are not, by the CRD: the CEL cost of checking them on
// metav1.LabelSelector's unbounded lists exceeds the API server's budget.
// The chart's admission policy refuses them, TestSelectorPolicy; without it
// the controller reports such a selector, InvalidSelector, and no other
// MigLayout takes the nodes it holds: TestInvalidSelectorKeepsItsNodes.)
func TestCELNodeSelector(t *testing.T) {
	c := miglayoutClient(t)
	ctx := testContext(t, time.Minute)
	const rules = "\nrules: [{profiles: {3g.40gb: 2}}]"
	tests := map[string]struct {
		selector string
		want     string // a substring of the admission error; "" for accepted
		not      string // not in the admission error
	}{
		"an operator of node affinity, with values": {selector: "nodeSelector: {matchExpressions: [{key: gpus, operator: Gt, values: ['1']}]}",
			want: "operators are In, NotIn, Exists and DoesNotExist", not: "need values"},
		"operator in lower case":        {"nodeSelector: {matchExpressions: [{key: pool, operator: in, values: [a]}]}", "operators are In, NotIn, Exists and DoesNotExist", ""},
		"In without values":             {"nodeSelector: {matchExpressions: [{key: pool, operator: In}]}", "with In or NotIn need values", ""},
		"NotIn with an empty list":      {"nodeSelector: {matchExpressions: [{key: pool, operator: NotIn, values: []}]}", "with In or NotIn need values", ""},
		"Exists with values":            {"nodeSelector: {matchExpressions: [{key: pool, operator: Exists, values: [a]}]}", "with Exists or DoesNotExist they take none", ""},
		"In, Exists and a prefixed key": {"nodeSelector: {matchLabels: {'example.com/gpu': 'true'}, matchExpressions: [{key: pool, operator: In, values: [a, b]}, {key: nvidia.com/gpu.present, operator: Exists}]}", "", ""},
		"an empty value":                {"nodeSelector: {matchLabels: {pool: ''}}", "", ""},
		"no selector terms":             {"nodeSelector: {}", "", ""},
		"a label key left without a value": {"nodeSelector:\n  matchLabels:\n    pool: gpu\n    miglayout.io/profile:\n",
			"matchLabels miglayout.io/profile has no value", "no such overload"},
		"the only label key left without a value": {"nodeSelector:\n  matchLabels:\n    miglayout.io/profile: null\n",
			"matchLabels miglayout.io/profile has no value", ""},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			err := dryRunMigLayout(ctx, c, "cel-selector", tc.selector+rules)
			wantAdmission(t, err, tc.want)
			if tc.not != "" && strings.Contains(err.Error(), tc.not) {
				t.Errorf("admission error %q also says %q", err, tc.not)
			}
		})
	}
}

// wantAdmission checks the API server's answer err to a MigLayout: admitted
// where want is "", else refused as Invalid with want in the message.
func wantAdmission(t *testing.T, err error, want string) {
	t.Helper()
	switch {
	case want == "" && err != nil:
		t.Fatalf("admission refused a valid MigLayout: %v", err)
	case want != "" && err == nil:
		t.Fatalf("admission accepted the MigLayout; want an error with %q", want)
	case want != "" && (!apierrors.IsInvalid(err) || !strings.Contains(err.Error(), want)):
		t.Fatalf("admission error %q; want an Invalid error with %q", err, want)
	}
}

// TestNodeMigLayoutStatusGPUIndexBounded: the API server refuses a
// NodeMigLayout status row whose GPU index no spec entry may name (a
// plan on it would be refused when written), and takes the highest one a
// spec may name.
func TestNodeMigLayoutStatusGPUIndexBounded(t *testing.T) {
	c := miglayoutClient(t)
	ctx := testContext(t, time.Minute)
	nml := &v1alpha1.NodeMigLayout{ObjectMeta: metav1.ObjectMeta{Name: "status-index-bounded"}}
	if err := c.Create(ctx, nml); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), nml) })
	for _, tc := range []struct {
		index int32
		ok    bool
	}{{v1alpha1.MaxGPUIndex + 1, false}, {-1, false}, {v1alpha1.MaxGPUIndex, true}} {
		nml.Status.GPUs = []v1alpha1.GPUStatus{{Index: tc.index, Phase: v1alpha1.PhaseReady}}
		err := c.Status().Update(ctx, nml)
		switch {
		case tc.ok && err != nil:
			t.Errorf("status with GPU index %d: %v, want it taken", tc.index, err)
		case !tc.ok && (err == nil || !strings.Contains(err.Error(), "status.gpus[0].index")):
			t.Errorf("status with GPU index %d: %v, want it refused naming status.gpus[0].index", tc.index, err)
		}
	}
}

// sixteenLongLayouts is a MigLayout spec of 16 rules (the most), each with
// a layout of 7 devices whose names are as long as valid names get: the
// CEL rules on layouts run within the API server's cost budget there.
func sixteenLongLayouts() string {
	var b strings.Builder
	b.WriteString("rules: [")
	for i := range 16 {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "{name: r%d, gpuIndices: [%d], layout: '1g.1023gb+me.all@10,1g.1023gb@11,1g.1023gb@12,1g.1023gb@13,1g.1023gb@14,1g.1023gb@15,1g.1023gb@16'}", i, i)
	}
	b.WriteString("]")
	return b.String()
}

// TestNodeMigLayoutSpecLayoutSyntax: a NodeMigLayout spec written by hand
// with a layout that is not in the canonical text form is refused at
// admission; "" (MIG on, no device) and the form the controller writes
// are taken.
func TestNodeMigLayoutSpecLayoutSyntax(t *testing.T) {
	c := miglayoutClient(t)
	ctx := testContext(t, time.Minute)
	for layout, ok := range map[string]bool{
		"":                              true,
		"3g.40gb@0,2g.20gb@4,1g.10gb@6": true,
		"1g.10gb+me@0,1g.10gb-me@1":     true,
		"3g.40gb@0;garbage":             false,
		"3g.40gb@0, 3g.40gb@4":          false,
		"3g.40gb":                       false,
		"3g.40gb@64":                    false,
	} {
		nml := &v1alpha1.NodeMigLayout{ObjectMeta: metav1.ObjectMeta{Name: "spec-layout-syntax"},
			Spec: v1alpha1.NodeMigLayoutSpec{GPUs: []v1alpha1.GPUSpec{{Index: 0, MIGEnabled: true, Layout: layout}}}}
		err := c.Create(ctx, nml, crclient.DryRunAll)
		switch {
		case ok && err != nil:
			t.Errorf("layout %q: %v, want it taken", layout, err)
		case !ok && (err == nil || !strings.Contains(err.Error(), "layouts look like")):
			t.Errorf("layout %q: %v, want it refused saying what layouts look like", layout, err)
		}
	}
}
