package badinput

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"text/tabwriter"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/miglayout/miglayout/api/v1alpha1"
	"github.com/miglayout/miglayout/pkg/mig/nvmlsim"
	"github.com/miglayout/miglayout/test/cluster/clustertest"
)

// The baseline: one MigLayout selects both nodes and holds a valid layout. A bad spec
// is applied on top of it (so that the controller has something to refuse and the agents
// something to keep), or as a new MigLayout.
const (
	baseName = "bad-base"
	selector = "nodeSelector: {matchLabels: {miglayout.test/group: bad}}\n"
	baseSpec = selector + `rules:
- {name: a100, productName: A100-SXM4-80GB, profiles: {3g.40gb: 2}}
- {name: h100, productName: H100-SXM5-80GB, profiles: {3g.40gb: 1, 2g.20gb: 1, 1g.10gb: 2}}
`
)

// How a case is applied.
type how int

const (
	// both: created as a new MigLayout, and as an update of the baseline's spec (both
	// must be refused at admission).
	both how = iota
	// create: created as a new MigLayout (metadata cases; conflicts with the baseline).
	create
	// update: the baseline's spec replaced (the controller must refuse it; the baseline
	// is restored afterwards).
	update
)

// expect is a case's expected outcome.
type expect struct {
	// admission: a substring of the API server's Invalid error.
	admission string
	// Otherwise accepted, and the MigLayout's condition cond is True with reason and a
	// message containing msg.
	cond, reason, msg string
	// gap: accepted and answered with no condition naming the problem; a product gap,
	// reported by the test (not failed); the hardware must not change all the same.
	gap string
}

func (e expect) String() string {
	switch {
	case e.admission != "":
		return "rejected at admission: " + e.admission
	case e.gap != "":
		return "GAP (no condition): " + e.gap
	}
	return fmt.Sprintf("%s=True %s: …%s…", e.cond, e.reason, e.msg)
}

func rejected(msg string) expect { return expect{admission: msg} }
func degraded(reason, msg string) expect {
	return expect{cond: v1alpha1.ConditionDegraded, reason: reason, msg: msg}
}

const (
	profileNames = "profile names look like 3g.40gb or 1g.10gb+me"
	counts17     = "profile counts must be between 1 and 7"
	// computeSlices: a rule's counts need more compute slices than any GPU has.
	computeSlices = "these counts need more than 7 compute slices"
)

func rules(n int, rule string) string {
	var b strings.Builder
	b.WriteString("rules:\n")
	for i := range n {
		fmt.Fprintf(&b, "- {name: r%d, %s}\n", i, rule)
	}
	return b.String()
}

func indices(n int) string {
	var s []string
	for i := range n {
		s = append(s, fmt.Sprint(i))
	}
	return strings.Join(s, ", ")
}

// corpus: name, how, the YAML spec (or a whole object for metadata cases), expected
// outcome.
var corpus = []struct {
	name string
	how  how
	spec string // under spec:, selector included where needed
	obj  string // a whole object instead (metadata cases)
	want expect
}{
	// ---- malformed and unknown profiles ----
	{"malformed profile in counts", both, selector + "rules: [{profiles: {3g.40: 1}}]", "", rejected(profileNames)},
	{"upper-case profile", both, selector + "rules: [{profiles: {3G.40GB: 1}}]", "", rejected(profileNames)},
	{"full-width digit in profile (unicode)", both, selector + "rules: [{profiles: {３g.40gb: 1}}]", "", rejected(profileNames)},
	{"zero-width space in profile (unicode)", both, selector + "rules: [{profiles: {\"3g.40gb\\u200b\": 1}}]", "", rejected(profileNames)},
	{"emoji profile (unicode)", both, selector + "rules: [{profiles: {\"🚀\": 1}}]", "", rejected(profileNames)},
	{"profile unknown on A100-80GB (40GB model's)", update, selector + "rules: [{productName: A100-SXM4-80GB, profiles: {1g.5gb: 2}}, {productName: H100-SXM5-80GB, profiles: {3g.40gb: 1, 2g.20gb: 1, 1g.10gb: 2}}]", "",
		degraded(v1alpha1.ReasonInvalidLayout, "1g.5gb")},
	{"profile of no model (8g.80gb)", both, selector + "rules: [{profiles: {8g.80gb: 1}}]", "", rejected(computeSlices)},
	{"H100-94GB profile on H100-80GB", update, selector + "rules: [{productName: H100-SXM5-80GB, profiles: {1g.12gb: 1}}, {productName: A100-SXM4-80GB, profiles: {3g.40gb: 2}}]", "",
		degraded(v1alpha1.ReasonInvalidLayout, "1g.12gb")},

	// ---- impossible counts per model ----
	{"count 0", both, selector + "rules: [{profiles: {3g.40gb: 0}}]", "", rejected(counts17)},
	{"count -1", both, selector + "rules: [{profiles: {1g.10gb: -1}}]", "", rejected(counts17)},
	{"count 8", both, selector + "rules: [{profiles: {1g.10gb: 8}}]", "", rejected(counts17)},
	{"count beyond int32", both, selector + "rules: [{profiles: {1g.10gb: 4294967297}}]", "", rejected("spec.rules[0].profiles")},
	// A key left empty in YAML is null: dropped by the API server, it would
	// destroy that profile's free devices.
	{"profile without a count (key left empty)", both, selector + "rules:\n- profiles:\n    3g.40gb:\n    1g.10gb: 1\n", "", rejected("profile 3g.40gb has no count")},
	{"count as a string", both, selector + "rules: [{profiles: {1g.10gb: two}}]", "", rejected("must be of type integer")},
	{"three 3g.40gb on an A100", both, selector + "rules: [{name: a100, productName: A100-SXM4-80GB, profiles: {3g.40gb: 3}}, {productName: H100-SXM5-80GB, profiles: {3g.40gb: 1, 2g.20gb: 1, 1g.10gb: 2}}]", "",
		rejected(computeSlices)},
	{"7g.80gb beside another device", both, selector + "rules: [{profiles: {7g.80gb: 1, 1g.10gb: 1}}]", "", rejected(computeSlices)},
	{"eight instances (7x 1g.10gb + 1g.10gb+me)", both, selector + "rules: [{profiles: {1g.10gb: 7, 1g.10gb+me: 1}}]", "", rejected(computeSlices)},
	{"compute slices over 7 (4g+3g+1g)", both, selector + "rules: [{profiles: {4g.40gb: 1, 3g.40gb: 1, 1g.10gb: 1}}]", "", rejected(computeSlices)},
	{"two 1g.10gb+me (max one)", both, selector + "rules: [{profiles: {1g.10gb+me: 2}}]", "", rejected("a GPU holds at most one device of a profile with media extensions (+me)")},
	{"two +me profiles (A30's, max one device)", both, selector + "rules: [{profiles: {1g.6gb+me: 1, 2g.12gb+me: 1}}]", "", rejected("these counts ask for devices of two such profiles")},

	// ---- explicit placements ----
	{"overlapping placements", update, selector + "rules: [{layout: '3g.40gb@0,2g.20gb@2'}]", "", degraded(v1alpha1.ReasonInvalidLayout, "2g.20gb@2")},
	{"placement the profile does not allow", update, selector + "rules: [{layout: '3g.40gb@2'}]", "", degraded(v1alpha1.ReasonInvalidLayout, "3g.40gb@2")},
	{"the same device twice", update, selector + "rules: [{layout: '1g.10gb@0,1g.10gb@0'}]", "", degraded(v1alpha1.ReasonInvalidLayout, "1g.10gb@0")},
	{"placement beyond the GPU", update, selector + "rules: [{layout: '1g.10gb@8'}]", "", degraded(v1alpha1.ReasonInvalidLayout, "1g.10gb@8")},
	{"7g.80gb not at 0", update, selector + "rules: [{layout: '7g.80gb@4'}]", "", degraded(v1alpha1.ReasonInvalidLayout, "7g.80gb@4")},
	{"layout without placement", both, selector + "rules: [{layout: 3g.40gb}]", "", rejected("spec.rules[0].layout: Invalid value")},
	{"layout with ';'", both, selector + "rules: [{layout: '3g.40gb@0;3g.40gb@4'}]", "", rejected("spec.rules[0].layout: Invalid value")},
	{"layout with a trailing comma", both, selector + "rules: [{layout: '3g.40gb@0,'}]", "", rejected("spec.rules[0].layout: Invalid value")},
	{"layout with a space", both, selector + "rules: [{layout: '3g.40gb@0, 3g.40gb@4'}]", "", rejected("spec.rules[0].layout: Invalid value")},
	{"layout placement of three digits", both, selector + "rules: [{layout: '1g.10gb@100'}]", "", rejected("spec.rules[0].layout: Invalid value")},
	{"layout negative placement", both, selector + "rules: [{layout: '1g.10gb@-1'}]", "", rejected("spec.rules[0].layout: Invalid value")},
	{"layout full-width digit (unicode)", both, selector + "rules: [{layout: '3g.40gb@０'}]", "", rejected("spec.rules[0].layout: Invalid value")},
	{"layout over 256 characters", both, selector + "rules: [{layout: '" + strings.Repeat("1g.10gb@0,", 30) + "1g.10gb@0'}]", "", rejected("spec.rules[0].layout: Too long")},
	{"profiles and layout in one rule", both, selector + "rules: [{profiles: {3g.40gb: 1}, layout: 3g.40gb@0}]", "", rejected("give either profiles (counts) or layout (explicit placements), not both")},
	{"MIG off with profiles", both, selector + "rules: [{migEnabled: false, profiles: {1g.10gb: 7}}]", "", rejected("profiles and layout need migEnabled: true")},
	{"MIG off with a layout", both, selector + "rules: [{migEnabled: false, layout: 7g.80gb@0}]", "", rejected("profiles and layout need migEnabled: true")},
	{"MIG on with nothing", both, selector + "rules: [{name: empty}]", "", rejected("a rule with MIG enabled needs profiles or layout")},

	// ---- huge lists and long strings ----
	{"17 rules", both, selector + rules(17, "profiles: {3g.40gb: 2}"), "", rejected("must have at most 16 items")},
	{"1000 rules", both, selector + rules(1000, "profiles: {3g.40gb: 2}"), "", rejected("must have at most 16 items")},
	{"16 impossible rules (15 A100, 1 H100)", both, selector + rules(15, "productName: A100-SXM4-80GB, profiles: {3g.40gb: 3}") + "- {productName: H100-SXM5-80GB, profiles: {7g.80gb: 2}}\n", "",
		rejected(computeSlices)},
	{"9 profiles in one rule", both, selector + "rules: [{profiles: {1g.10gb: 1, 1g.10gb+me: 1, 1g.20gb: 1, 2g.20gb: 1, 3g.40gb: 1, 4g.40gb: 1, 7g.80gb: 1, 1g.5gb: 1, 2g.10gb: 1}}]", "",
		rejected("must have at most 8 items")},
	{"17 GPU indices", both, selector + "rules: [{gpuIndices: [" + indices(17) + "], profiles: {3g.40gb: 2}}]", "", rejected("must have at most 16 items")},
	{"GPU index 64", both, selector + "rules: [{gpuIndices: [64], profiles: {3g.40gb: 2}}]", "", rejected("spec.rules[0].gpuIndices[0]")},
	{"GPU index -1", both, selector + "rules: [{gpuIndices: [-1], profiles: {3g.40gb: 2}}]", "", rejected("spec.rules[0].gpuIndices[0]")},
	{"GPU index twice", both, selector + "rules: [{gpuIndices: [0, 0], profiles: {3g.40gb: 2}}]", "", rejected("Duplicate value")},
	{"rule name of 64 characters", both, selector + "rules: [{name: " + strings.Repeat("n", 64) + ", profiles: {3g.40gb: 2}}]", "", rejected("spec.rules[0].name: Too long")},
	{"product name of 65 characters", both, selector + "rules: [{productName: " + strings.Repeat("p", 65) + ", profiles: {3g.40gb: 2}}]", "", rejected("spec.rules[0].productName: Too long")},
	{"rule name of 63 runes of 4 bytes (unicode)", update, selector + "rules: [{name: '" + strings.Repeat("🚀", 63) + "', profiles: {3g.40gb: 2, 1g.10gb: 1}}]", "",
		degraded(v1alpha1.ReasonInvalidLayout, "🚀🚀🚀")},

	// ---- unicode in names ----
	{"unicode rule name on an impossible rule", update, selector + "rules: [{name: 'règle-ünïcode-🚀', profiles: {3g.40gb: 2, 1g.10gb: 1}}]", "",
		degraded(v1alpha1.ReasonInvalidLayout, `rule "règle-ünïcode-🚀"`)},
	{"unicode object name", create, "", "metadata: {name: ml-ünïcode}\nspec: {" + strings.TrimSuffix(selector, "\n") + ", rules: [{profiles: {3g.40gb: 2}}]}", rejected("a lowercase RFC 1123 subdomain")},
	{"upper-case object name", create, "", "metadata: {name: ML-Upper}\nspec: {" + strings.TrimSuffix(selector, "\n") + ", rules: [{profiles: {3g.40gb: 2}}]}", rejected("a lowercase RFC 1123 subdomain")},
	{"object name of 254 characters", create, "", "metadata: {name: " + strings.Repeat("m", 254) + "}\nspec: {" + strings.TrimSuffix(selector, "\n") + ", rules: [{profiles: {3g.40gb: 2}}]}", rejected("must be no more than 253")},
	{"unicode product name (U+2010 hyphens)", update, selector + "rules: [{productName: 'A100‐SXM4‐80GB', profiles: {7g.80gb: 1}}]", "",
		degraded(v1alpha1.ReasonRuleMatchesNoGPU, "rules[0] matches no GPU (2 selected nodes; GPUs: ")},

	// ---- modes and Auto policy errors ----
	{"unknown mode", both, selector + "mode: Manual\nrules: [{profiles: {3g.40gb: 2}}]", "", rejected(`spec.mode: Unsupported value: "Manual"`)},
	{"empty mode", both, selector + "mode: ''\nrules: [{profiles: {3g.40gb: 2}}]", "", rejected(`spec.mode: Unsupported value: ""`)},
	{"Static without rules", both, selector + "mode: Static", "", rejected("Static mode needs at least one rule")},
	{"Static with an empty rule list", both, selector + "rules: []", "", rejected("Static mode needs at least one rule")},
	{"policy in Static mode", both, selector + "rules: [{profiles: {3g.40gb: 2}}]\npolicy: {maxGPUs: 2}", "", rejected("policy is only allowed in Auto mode")},
	{"rules in Auto mode", both, selector + "mode: Auto\nrules: [{profiles: {3g.40gb: 2}}]", "", rejected("rules are only allowed in Static mode; Auto mode takes a policy")},
	{"Auto: malformed allowed profile", both, selector + "mode: Auto\npolicy: {allowedProfiles: [3g40gb]}", "", rejected("spec.policy.allowedProfiles[0]: Invalid value")},
	{"Auto: allowed profile twice", both, selector + "mode: Auto\npolicy: {allowedProfiles: [1g.10gb, 1g.10gb]}", "", rejected("Duplicate value")},
	{"Auto: 65 allowed profiles", both, selector + "mode: Auto\npolicy: {allowedProfiles: [" + strings.Repeat("1g.10gb, ", 64) + "1g.10gb]}", "", rejected("must have at most 64 items")},
	{"Auto: negative spares", both, selector + "mode: Auto\npolicy: {spares: {1g.10gb: -1}}", "", rejected("spare counts must be between 0 and 112")},
	{"Auto: 113 spares", both, selector + "mode: Auto\npolicy: {spares: {1g.10gb: 113}}", "", rejected("spare counts must be between 0 and 112")},
	{"Auto: spare without a count (key left empty)", both, selector + "mode: Auto\npolicy:\n  spares:\n    1g.10gb:\n", "", rejected("spares: profile 1g.10gb has no count")},
	{"Auto: malformed spare profile", both, selector + "mode: Auto\npolicy: {spares: {big: 1}}", "", rejected(profileNames)},
	{"Auto: maxGPUsPerNode 0", both, selector + "mode: Auto\npolicy: {maxGPUsPerNode: 0}", "", rejected("spec.policy.maxGPUsPerNode")},
	{"Auto: maxGPUsPerNode 17", both, selector + "mode: Auto\npolicy: {maxGPUsPerNode: 17}", "", rejected("spec.policy.maxGPUsPerNode")},
	{"Auto: maxGPUs 0", both, selector + "mode: Auto\npolicy: {maxGPUs: 0}", "", rejected("spec.policy.maxGPUs")},
	{"Auto: maxGPUs 10001", both, selector + "mode: Auto\npolicy: {maxGPUs: 10001}", "", rejected("spec.policy.maxGPUs")},
	{"Auto: allowed profile of no model", update, selector + "mode: Auto\npolicy: {allowedProfiles: [8g.80gb]}", "",
		degraded(v1alpha1.ReasonProfileNotOffered, "allowed profile 8g.80gb is offered by no GPU model of the 2 selected nodes")},
	{"Auto: 7 spares of 7g.80gb per node", update, selector + "mode: Auto\npolicy: {spares: {7g.80gb: 7}}", "",
		degraded(v1alpha1.ReasonSparesNotHoldable, "spares of 7 7g.80gb per node: bad-a100 holds at most 2, bad-h100 holds at most 1")},
	{"Auto: spares that fit one by one but not together", update, selector + "mode: Auto\npolicy: {spares: {7g.80gb: 1, 4g.40gb: 1}}", "",
		degraded(v1alpha1.ReasonSparesNotHoldable, "spares 1× 4g.40gb + 1× 7g.80gb per node do not fit on the GPUs of bad-h100 all at once")},
	{"Auto: spares of a profile not allowed", both, selector + "mode: Auto\npolicy: {allowedProfiles: [3g.40gb], spares: {1g.10gb: 2}}", "",
		rejected("spares must name profiles in allowedProfiles")},
	{"unknown field (strict)", both, selector + "rulez: [{profiles: {3g.40gb: 2}}]\nrules: [{profiles: {3g.40gb: 2}}]", "", rejected(`unknown field "spec.rulez"`)},
	{"unknown field in a rule (strict)", both, selector + "rules: [{profile: {3g.40gb: 2}, profiles: {3g.40gb: 2}}]", "", rejected(`unknown field "spec.rules[0].profile"`)},

	// ---- selectors ----
	{"selector operator unknown", both, "nodeSelector: {matchExpressions: [{key: miglayout.test/group, operator: Near, values: [bad]}]}\nrules: [{profiles: {7g.80gb: 1}}]", "",
		rejected("matchExpressions operators are In, NotIn, Exists and DoesNotExist")},
	{"selector In without values", both, "nodeSelector: {matchExpressions: [{key: miglayout.test/group, operator: In, values: []}]}\nrules: [{profiles: {7g.80gb: 1}}]", "",
		rejected("matchExpressions with In or NotIn need values")},
	// The chart's selector policy (migLayoutSelectorPolicy) refuses these;
	// without it the controller reports them (Degraded, InvalidSelector:
	// pkg/controller's TestInvalidSelectorKeepsItsNodes).
	{"selector key with a space", both, "nodeSelector: {matchLabels: {'bad key': x}}\nrules: [{profiles: {7g.80gb: 1}}]", "",
		rejected(`key "bad key" is not a label key`)},
	{"selector value with unicode", both, "nodeSelector: {matchLabels: {miglayout.test/group: 'bäd'}}\nrules: [{profiles: {7g.80gb: 1}}]", "",
		rejected(`"bäd" is not a label value`)},
	{"selector expression value with a slash", both, "nodeSelector: {matchExpressions: [{key: miglayout.test/group, operator: In, values: [bad, a/b]}]}\nrules: [{profiles: {7g.80gb: 1}}]", "",
		rejected(`"a/b" is not a label value`)},
	// Dropped by the API server, a label key left without a value would
	// leave the selector selecting every node.
	{"selector label key left without a value", both, "nodeSelector:\n  matchLabels:\n    miglayout.test/group:\nrules: [{profiles: {7g.80gb: 1}}]", "",
		rejected("matchLabels miglayout.test/group has no value")},
	{"selector that selects no node", update, "nodeSelector: {matchLabels: {miglayout.test/group: typo}}\nrules: [{profiles: {7g.80gb: 1}}]", "",
		expect{cond: v1alpha1.ConditionDegraded, reason: v1alpha1.ReasonNoNodes, msg: "selects no node"}},
	{"overlapping MigLayout on one node", create, "nodeSelector: {matchLabels: {kubernetes.io/hostname: bad-h100}}\nrules: [{profiles: {7g.80gb: 1}}]", "",
		expect{cond: v1alpha1.ConditionConflict, reason: v1alpha1.ReasonOverlappingSelectors, msg: `MigLayout "bad-base" also selects node bad-h100`}},
	{"overlapping MigLayout by expression", create, "nodeSelector: {matchExpressions: [{key: miglayout.test/group, operator: In, values: [bad, other]}]}\nrules: [{profiles: {1g.10gb: 7}}]", "",
		expect{cond: v1alpha1.ConditionConflict, reason: v1alpha1.ReasonOverlappingSelectors, msg: "bad-a100, bad-h100"}},
	{"GPU index no node has", update, selector + "rules: [{gpuIndices: [5], profiles: {7g.80gb: 1}}]", "",
		degraded(v1alpha1.ReasonRuleMatchesNoGPU, "rules[0] matches no GPU (2 selected nodes; GPUs: ")},
	{"product no node has", update, selector + "rules: [{productName: Tesla-T4, profiles: {7g.80gb: 1}}]", "",
		degraded(v1alpha1.ReasonRuleMatchesNoGPU, "rules[0] matches no GPU (2 selected nodes; GPUs: ")},
}

// TestBadInputCorpus applies each case to the real API server with the agents running.
func TestBadInputCorpus(t *testing.T) {
	if len(corpus) < 40 {
		t.Fatalf("the corpus has %d cases, want at least 40", len(corpus))
	}
	ctx, cancel := context.WithTimeout(t.Context(), 8*time.Minute)
	defer cancel()
	base := setBaseline(t, ctx)
	before := snapshots(t)
	t.Logf("baseline: %v", layouts(before))

	var outcomes []string
	for i, tc := range corpus {
		name := fmt.Sprintf("%02d %s", i, tc.name)
		ok := t.Run(name, func(t *testing.T) {
			got := runCase(t, ctx, i, tc.how, tc.spec, tc.obj, tc.want, base)
			outcomes = append(outcomes, fmt.Sprintf("%s\t%s\t%s\t", name, tc.want, got))
		})
		if !ok {
			outcomes = append(outcomes, fmt.Sprintf("%s\t%s\tFAILED\t", name, tc.want))
		}
		if after := snapshots(t); !sameHardware(before, after) {
			t.Fatalf("case %q changed the simulated hardware: %v → %v", tc.name, layouts(before), layouts(after))
		}
	}
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 0, 1, ' ', tabwriter.Debug)
	fmt.Fprintln(tw, "case\texpected outcome\tgot\t")
	for _, o := range outcomes {
		fmt.Fprintln(tw, o)
	}
	tw.Flush()
	t.Logf("bad-input corpus (%d cases):\n%s", len(corpus), b.String())
	gaps := 0
	for _, tc := range corpus {
		if tc.want.gap != "" {
			gaps++
		}
	}
	t.Logf("%d cases are product gaps (accepted without a condition naming the problem; the hardware is untouched)", gaps)
}

// setBaseline applies the valid baseline and waits until both nodes hold it.
func setBaseline(t *testing.T, ctx context.Context) *v1alpha1.MigLayoutSpec {
	t.Helper()
	var spec v1alpha1.MigLayoutSpec
	if err := yaml.UnmarshalStrict([]byte(baseSpec), &spec); err != nil {
		t.Fatal(err)
	}
	spec.Mode = v1alpha1.ModeStatic
	gen, err := env.SetMigLayout(ctx, baseName, spec)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := env.WaitConverged(ctx, baseName, gen, []string{nodeA, nodeH}, false, 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	if res := env.Check(ctx, []string{nodeA, nodeH}, 3*time.Second); len(res.PoolMismatch)+len(res.Leaked) > 0 {
		t.Fatalf("baseline: %v %v", res.PoolMismatch, res.Leaked)
	}
	return &spec
}

// runCase applies one case and checks its outcome; it returns what happened, for the
// table. The hardware is compared by the caller.
func runCase(t *testing.T, ctx context.Context, i int, h how, spec, obj string, want expect, base *v1alpha1.MigLayoutSpec) string {
	t.Helper()
	hw := snapshots(t)
	var got []string
	if h == both || h == create {
		name := fmt.Sprintf("bad-%02d", i)
		err := createObject(ctx, name, spec, obj)
		if want.admission == "" && err == nil {
			t.Cleanup(func() { _ = env.DeleteMigLayout(context.Background(), name) })
			got = append(got, checkAccepted(t, ctx, name, want))
			if err := env.DeleteMigLayout(ctx, name); err != nil {
				t.Error(err)
			}
			restored(t, ctx, base)
		} else {
			got = append(got, checkRejected(t, "create", err, want))
			if err == nil {
				_ = env.DeleteMigLayout(ctx, name)
			}
		}
	}
	if h == both || h == update {
		err := updateBaseline(ctx, spec)
		if want.admission == "" && err == nil {
			got = append(got, checkAccepted(t, ctx, baseName, want))
			restore(t, ctx, base)
		} else {
			got = append(got, checkRejected(t, "update", err, want))
			if err == nil {
				restore(t, ctx, base)
			}
		}
	}
	if after := snapshots(t); !sameHardware(hw, after) {
		t.Errorf("the hardware changed: %v → %v", layouts(hw), layouts(after))
	}
	return strings.Join(got, "; ")
}

func checkRejected(t *testing.T, op string, err error, want expect) string {
	t.Helper()
	switch {
	case err == nil && want.admission != "":
		t.Errorf("%s: admission accepted the MigLayout; want an error with %q", op, want.admission)
		return op + " accepted"
	case err == nil:
		return op + " accepted"
	case want.admission == "":
		t.Errorf("%s: admission refused the MigLayout (%v); want it accepted and answered with %s", op, err, want)
	case !apierrors.IsInvalid(err) && !apierrors.IsBadRequest(err):
		t.Errorf("%s: admission error %v is not Invalid/BadRequest", op, err)
	case !strings.Contains(err.Error(), want.admission):
		t.Errorf("%s: admission error %q lacks %q", op, err, want.admission)
	}
	return op + " rejected: " + brief(err.Error())
}

// checkAccepted waits for the MigLayout's condition (or, for a gap, makes sure the status
// has caught up and says nothing of the problem), then holds for a second during which
// the hardware must not move.
func checkAccepted(t *testing.T, ctx context.Context, name string, want expect) string {
	t.Helper()
	hw := snapshots(t)
	var ml v1alpha1.MigLayout
	var last string
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 45*time.Second, true, func(ctx context.Context) (bool, error) {
		if err := env.CRC.Get(ctx, crclient.ObjectKey{Name: name}, &ml); err != nil {
			last = err.Error()
			return false, nil
		}
		last = fmt.Sprintf("observedGeneration %d/%d: %s", ml.Status.ObservedGeneration, ml.Generation, clustertest.ConditionsString(ml.Status.Conditions))
		if ml.Status.ObservedGeneration < ml.Generation {
			return false, nil
		}
		if want.gap != "" {
			// Settled: Ready or not, nothing changing.
			return meta.FindStatusCondition(ml.Status.Conditions, v1alpha1.ConditionProgressing) != nil &&
				meta.IsStatusConditionFalse(ml.Status.Conditions, v1alpha1.ConditionProgressing), nil
		}
		c := meta.FindStatusCondition(ml.Status.Conditions, want.cond)
		return c != nil && c.Status == metav1.ConditionTrue && c.Reason == want.reason && strings.Contains(c.Message, want.msg), nil
	})
	if err != nil {
		t.Errorf("MigLayout %s: want %s: %v; last: %s", name, want, err, last)
		return "no such condition: " + last
	}
	sleep(ctx, time.Second)
	if after := snapshots(t); !sameHardware(hw, after) {
		t.Errorf("MigLayout %s: the hardware changed after it was accepted: %v → %v", name, layouts(hw), layouts(after))
	}
	if want.gap != "" {
		t.Logf("GAP: %s; status: %s", want.gap, clustertest.ConditionsString(ml.Status.Conditions))
		return "accepted; " + briefConditions(ml.Status.Conditions)
	}
	c := meta.FindStatusCondition(ml.Status.Conditions, want.cond)
	return fmt.Sprintf("accepted; %s=True %s: %s", c.Type, c.Reason, brief(c.Message))
}

// restore puts the baseline's spec back and waits until the nodes hold it again.
func restore(t *testing.T, ctx context.Context, base *v1alpha1.MigLayoutSpec) {
	t.Helper()
	gen, err := env.SetMigLayout(ctx, baseName, *base)
	if err != nil {
		t.Fatal(err)
	}
	waitBaseline(t, ctx, gen)
}

// restored waits until the baseline is Ready again (after another MigLayout went away).
func restored(t *testing.T, ctx context.Context, base *v1alpha1.MigLayoutSpec) {
	t.Helper()
	var ml v1alpha1.MigLayout
	if err := env.CRC.Get(ctx, crclient.ObjectKey{Name: baseName}, &ml); err != nil {
		t.Fatal(err)
	}
	waitBaseline(t, ctx, ml.Generation)
}

func waitBaseline(t *testing.T, ctx context.Context, gen int64) {
	t.Helper()
	if _, err := env.WaitConverged(ctx, baseName, gen, []string{nodeA, nodeH}, false, time.Minute); err != nil {
		t.Fatalf("restoring the baseline: %v", err)
	}
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		var ml v1alpha1.MigLayout
		if err := env.CRC.Get(ctx, crclient.ObjectKey{Name: baseName}, &ml); err != nil {
			return false, nil
		}
		return meta.IsStatusConditionTrue(ml.Status.Conditions, v1alpha1.ConditionReady) &&
			meta.IsStatusConditionFalse(ml.Status.Conditions, v1alpha1.ConditionConflict) &&
			meta.IsStatusConditionFalse(ml.Status.Conditions, v1alpha1.ConditionDegraded), nil
	})
	if err != nil {
		t.Fatalf("the baseline is not Ready again: %v", err)
	}
}

func decodeSpec(spec string) (map[string]any, error) {
	var m map[string]any
	if err := yaml.Unmarshal([]byte(spec), &m); err != nil {
		return nil, fmt.Errorf("test bug: spec does not parse: %w", err)
	}
	return m, nil
}

// createObject creates a MigLayout from spec (or the whole object obj) with strict field
// validation.
func createObject(ctx context.Context, name, spec, obj string) error {
	u := &unstructured.Unstructured{Object: map[string]any{}}
	if obj != "" {
		if err := yaml.Unmarshal([]byte(obj), &u.Object); err != nil {
			return fmt.Errorf("test bug: object does not parse: %w", err)
		}
	} else {
		s, err := decodeSpec(spec)
		if err != nil {
			return err
		}
		u.Object["spec"] = s
		u.SetName(name)
	}
	u.SetAPIVersion(v1alpha1.GroupVersion.String())
	u.SetKind("MigLayout")
	return env.CRC.Create(ctx, u, crclient.FieldValidation("Strict"))
}

// updateBaseline replaces the baseline's spec with spec (strict field validation).
func updateBaseline(ctx context.Context, spec string) error {
	s, err := decodeSpec(spec)
	if err != nil {
		return err
	}
	// The controller writes the baseline's status meanwhile: a conflict
	// is read again and retried, as kubectl edit would.
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion(v1alpha1.GroupVersion.String())
		u.SetKind("MigLayout")
		if err := env.CRC.Get(ctx, crclient.ObjectKey{Name: baseName}, u); err != nil {
			return err
		}
		u.Object["spec"] = s
		return env.CRC.Update(ctx, u, crclient.FieldValidation("Strict"))
	})
}

// ---- simulated hardware ----

func snapshots(t *testing.T) map[string]nvmlsim.State {
	t.Helper()
	out := map[string]nvmlsim.State{}
	for _, n := range []string{nodeA, nodeH} {
		st, err := env.SimState(n)
		if err != nil {
			t.Fatal(err)
		}
		out[n] = st
	}
	return out
}

// sameHardware compares GPUs (MIG modes, GPU and compute instances with their IDs and
// UUIDs): any destroy or create shows.
func sameHardware(a, b map[string]nvmlsim.State) bool {
	for n := range a {
		if !reflect.DeepEqual(a[n].GPUs, b[n].GPUs) {
			return false
		}
	}
	return true
}

func layouts(s map[string]nvmlsim.State) map[string][]string {
	out := map[string][]string{}
	for n, st := range s {
		out[n] = clustertest.Layouts(st)
	}
	return out
}

func briefConditions(conds []metav1.Condition) string {
	var parts []string
	for _, c := range conds {
		parts = append(parts, fmt.Sprintf("%s=%s(%s)", c.Type, c.Status, c.Reason))
	}
	return strings.Join(parts, " ")
}

// brief cuts a message to 160 characters (runes, not bytes: the corpus has unicode).
func brief(s string) string {
	if r := []rune(s); len(r) > 160 {
		return string(r[:160]) + "…"
	}
	return s
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-time.After(d):
	case <-ctx.Done():
	}
}
