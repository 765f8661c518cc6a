package controller

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/miglayout/miglayout/api/v1alpha1"
	"github.com/miglayout/miglayout/pkg/mig"
)

// problemWant is a Problem with the message checked by substrings: the
// message embeds pkg/mig's wording, which is pkg/mig's to test.
type problemWant struct {
	GPU      int32
	Reason   string
	Contains []string
}

func TestDesiredGPUs(t *testing.T) {
	tests := map[string]struct {
		rules     []v1alpha1.LayoutRule
		inventory []v1alpha1.GPUStatus
		current   []v1alpha1.GPUSpec
		want      []v1alpha1.GPUSpec
		problems  []problemWant
	}{
		"no inventory yet: nothing to write": {
			rules: rules(rule("halves").counts("3g.40gb", 2)),
		},
		"counts fit on an empty A100": {
			rules:     rules(rule("halves").counts("3g.40gb", 2)),
			inventory: inventory(a100(0)),
			want:      []v1alpha1.GPUSpec{specGPU(0, "3g.40gb@0,3g.40gb@4", `rule "halves": profiles 3g.40gb:2`)},
		},
		"counts of several profiles": {
			rules:     rules(rule("mixed").counts("3g.40gb", 1).counts("1g.10gb", 4)),
			inventory: inventory(a100(0)),
			want: []v1alpha1.GPUSpec{specGPU(0, "1g.10gb@0,1g.10gb@1,1g.10gb@2,1g.10gb@3,3g.40gb@4",
				`rule "mixed": profiles 1g.10gb:4,3g.40gb:1`)},
		},
		"counts keep the devices already there": {
			rules:     rules(rule("halves").counts("3g.40gb", 1).counts("2g.20gb", 1)),
			inventory: inventory(a100(0).layout("2g.20gb@0,3g.40gb@4,1g.10gb@2")),
			want:      []v1alpha1.GPUSpec{specGPU(0, "2g.20gb@0,3g.40gb@4", `rule "halves": profiles 2g.20gb:1,3g.40gb:1`)},
		},
		"explicit layout": {
			rules:     rules(rule("explicit").layout("3g.40gb@0,2g.20gb@4,1g.10gb@6")),
			inventory: inventory(a100(0).layout("7g.80gb@0")),
			want: []v1alpha1.GPUSpec{specGPU(0, "3g.40gb@0,2g.20gb@4,1g.10gb@6",
				`rule "explicit": layout 3g.40gb@0,2g.20gb@4,1g.10gb@6`)},
		},
		"no profile: MIG on, no device": {
			rules:     []v1alpha1.LayoutRule{{Name: "empty", Profiles: map[string]int32{}}},
			inventory: inventory(a100(0).layout("7g.80gb@0")),
			want:      []v1alpha1.GPUSpec{specGPU(0, "", `rule "empty": no profile: MIG on, no device`)},
		},
		"MIG off": {
			rules:     rules(rule("whole").migOff()),
			inventory: inventory(a100(0).layout("7g.80gb@0")),
			want:      []v1alpha1.GPUSpec{specMIGOff(0, `rule "whole": MIG off`)},
		},
		"MIG off under devices in use": {
			rules:     rules(rule("whole").migOff()),
			inventory: inventory(a100(0).layout("3g.40gb@0,3g.40gb@4").inUse("3g.40gb@4")),
			want:      []v1alpha1.GPUSpec{specMIGOff(0, `rule "whole": MIG off; destroys 3g.40gb@4, in use now`)},
		},
		"MIG on from off": {
			rules:     rules(rule("halves").counts("3g.40gb", 2)),
			inventory: inventory(a100(0).migOff()),
			want:      []v1alpha1.GPUSpec{specGPU(0, "3g.40gb@0,3g.40gb@4", `rule "halves": profiles 3g.40gb:2`)},
		},
		"product name matches the NVML product name, ignoring case": {
			rules:     rules(rule("a100").product("nvidia a100-sxm4-80gb").counts("7g.80gb", 1)),
			inventory: inventory(a100(0), h100(1)),
			want:      []v1alpha1.GPUSpec{specGPU(0, "7g.80gb@0", `rule "a100": profiles 7g.80gb:1`)},
		},
		"product name matches the catalog model name, ignoring case": {
			rules:     rules(rule("h100").product("h100-sxm5-80gb").counts("7g.80gb", 1)),
			inventory: inventory(a100(0), h100(1)),
			want:      []v1alpha1.GPUSpec{specGPU(1, "7g.80gb@0", `rule "h100": profiles 7g.80gb:1`)},
		},
		"first matching rule wins; unnamed rules are named by position": {
			rules: rules(
				rule("").indices(1).migOff(),
				rule("").counts("7g.80gb", 1),
			),
			inventory: inventory(a100(0), a100(1), a100(2)),
			want: []v1alpha1.GPUSpec{
				specGPU(0, "7g.80gb@0", "rules[1]: profiles 7g.80gb:1"),
				specMIGOff(1, "rules[0]: MIG off"),
				specGPU(2, "7g.80gb@0", "rules[1]: profiles 7g.80gb:1"),
			},
		},
		"GPUs no rule matches are left out": {
			rules:     rules(rule("only-1").indices(1).counts("7g.80gb", 1)),
			inventory: inventory(a100(0), a100(1)),
			want:      []v1alpha1.GPUSpec{specGPU(1, "7g.80gb@0", `rule "only-1": profiles 7g.80gb:1`)},
		},
		"unknown GPU model": {
			rules:     rules(rule("all").counts("1g.10gb", 2)),
			inventory: inventory(unknownGPU(0), a100(1)),
			want:      []v1alpha1.GPUSpec{specGPU(1, "1g.10gb@4,1g.10gb@5", `rule "all": profiles 1g.10gb:2`)},
			problems:  []problemWant{{0, v1alpha1.ReasonUnknownGPU, []string{"gpu 0 (Tesla T4)", `rule "all"`, "unknown GPU model"}}},
		},
		"MIG off on a GPU of no catalogued model: no model needed": {
			rules:     rules(rule("off").migOff()),
			inventory: inventory(unknownGPU(0)),
			want:      []v1alpha1.GPUSpec{specMIGOff(0, `rule "off": MIG off`)},
		},
		"a GPU the agent reports but NVML does not show is not inventory": {
			rules:     rules(rule("all").counts("7g.80gb", 1)),
			inventory: []v1alpha1.GPUStatus{{Index: 3, Phase: v1alpha1.PhaseFailed, Reason: v1alpha1.ReasonInvalidLayout}},
		},
		"three 3g.40gb do not fit on an A100": {
			rules:     rules(rule("three-halves").counts("3g.40gb", 3)),
			inventory: inventory(a100(0).layout("7g.80gb@0")),
			problems: []problemWant{{0, v1alpha1.ReasonInvalidLayout,
				[]string{"gpu 0 (NVIDIA A100-SXM4-80GB)", `rule "three-halves"`, "3g.40gb"}}},
		},
		"unknown profile on the model": {
			rules:     rules(rule("a100-40gb-names").counts("3g.20gb", 2)),
			inventory: inventory(a100(0)),
			problems:  []problemWant{{0, v1alpha1.ReasonInvalidLayout, []string{"gpu 0", "unknown profile", "3g.20gb"}}},
		},
		"overlapping explicit placements": {
			rules:     rules(rule("overlap").layout("3g.40gb@0,4g.40gb@0")),
			inventory: inventory(a100(0), a100(1)),
			problems: []problemWant{
				{0, v1alpha1.ReasonInvalidLayout, []string{`gpu 0 (NVIDIA A100-SXM4-80GB), rule "overlap": invalid layout: layout "3g.40gb@0,4g.40gb@0"`, "overlaps"}},
				{1, v1alpha1.ReasonInvalidLayout, []string{"gpu 1", "overlaps"}},
			},
		},
		"explicit layout at a placement the profile lacks": {
			rules:     rules(rule("bad-start").layout("3g.40gb@2")),
			inventory: inventory(a100(0)),
			problems:  []problemWant{{0, v1alpha1.ReasonInvalidLayout, []string{"not a valid placement"}}},
		},
		// 3g.40gb@0 would cover the device in use: the 3g goes to 4, which
		// also takes 1g.10gb@6's slice.
		"a device in use is kept where it is": {
			rules:     rules(rule("mixed").counts("3g.40gb", 1).counts("1g.10gb", 3)),
			inventory: inventory(a100(0).layout("1g.20gb@0,1g.10gb@2,1g.20gb@4,1g.10gb@6").inUse("1g.10gb@2")),
			want: []v1alpha1.GPUSpec{specGPU(0, "1g.10gb@0,1g.10gb@1,1g.10gb@2,3g.40gb@4",
				`rule "mixed": profiles 1g.10gb:3,3g.40gb:1`)},
		},
		"counts that cannot keep a device in use are written, and say so": {
			rules:     rules(rule("whole").counts("7g.80gb", 1)),
			inventory: inventory(a100(0).layout("1g.10gb@1,1g.10gb@6").inUse("1g.10gb@1")),
			want: []v1alpha1.GPUSpec{specGPU(0, "7g.80gb@0",
				`rule "whole": profiles 7g.80gb:1; destroys 1g.10gb@1, in use now`)},
		},
		"an explicit layout that destroys a device in use is written, and says so": {
			rules:     rules(rule("explicit").layout("3g.40gb@0,3g.40gb@4")),
			inventory: inventory(a100(0).layout("1g.10gb@1,1g.10gb@6").inUse("1g.10gb@6")),
			want: []v1alpha1.GPUSpec{specGPU(0, "3g.40gb@0,3g.40gb@4",
				`rule "explicit": layout 3g.40gb@0,3g.40gb@4; destroys 1g.10gb@6, in use now`)},
		},
		// A fresh fit puts a lone 3g.40gb at 4 (see "not stable when the
		// counts changed"); the layout written before has it at 0.
		"stable: the layout written before is kept while it holds the counts": {
			rules:     rules(rule("one-half").counts("3g.40gb", 1)),
			inventory: inventory(a100(0).layout("").phase(v1alpha1.PhaseRepartitioning, "", "")),
			current:   []v1alpha1.GPUSpec{specGPU(0, "3g.40gb@0", "old reason")},
			want:      []v1alpha1.GPUSpec{specGPU(0, "3g.40gb@0", `rule "one-half": profiles 3g.40gb:1`)},
		},
		"stable: a profile counted zero does not unsettle the layout written before": {
			rules:     rules(rule("one-half").counts("3g.40gb", 1).counts("1g.10gb", 0)),
			inventory: inventory(a100(0).layout("").phase(v1alpha1.PhaseRepartitioning, "", "")),
			current:   []v1alpha1.GPUSpec{specGPU(0, "3g.40gb@0", "old reason")},
			want:      []v1alpha1.GPUSpec{specGPU(0, "3g.40gb@0", `rule "one-half": profiles 1g.10gb:0,3g.40gb:1`)},
		},
		"not stable when the counts changed": {
			rules:     rules(rule("halves").counts("3g.40gb", 2)),
			inventory: inventory(a100(0)),
			current:   []v1alpha1.GPUSpec{specGPU(0, "3g.40gb@4", "")},
			want:      []v1alpha1.GPUSpec{specGPU(0, "3g.40gb@0,3g.40gb@4", `rule "halves": profiles 3g.40gb:2`)},
		},
		"not stable when the layout written before loses a device in use": {
			rules:     rules(rule("mixed").counts("3g.40gb", 1).counts("1g.10gb", 1)),
			inventory: inventory(a100(0).layout("1g.10gb@5").inUse("1g.10gb@5")),
			current:   []v1alpha1.GPUSpec{specGPU(0, "3g.40gb@0,1g.10gb@4", "")},
			want:      []v1alpha1.GPUSpec{specGPU(0, "3g.40gb@0,1g.10gb@5", `rule "mixed": profiles 1g.10gb:1,3g.40gb:1`)},
		},
		"not stable when MIG was off in the spec before": {
			rules:     rules(rule("whole").counts("7g.80gb", 1)),
			inventory: inventory(a100(0)),
			current:   []v1alpha1.GPUSpec{specMIGOff(0, "")},
			want:      []v1alpha1.GPUSpec{specGPU(0, "7g.80gb@0", `rule "whole": profiles 7g.80gb:1`)},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, problems := DesiredGPUs(mig.DefaultCatalog(), tc.rules, tc.inventory, tc.current)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("desired GPUs (-want +got):\n%s", diff)
			}
			var gotProblems []problemWant
			for _, p := range problems {
				w := problemWant{GPU: p.GPU, Reason: p.Reason}
				for _, want := range tc.problems {
					if want.GPU == p.GPU {
						for _, s := range want.Contains {
							if strings.Contains(p.Message, s) {
								w.Contains = append(w.Contains, s)
							}
						}
					}
				}
				gotProblems = append(gotProblems, w)
			}
			if diff := cmp.Diff(tc.problems, gotProblems); diff != "" {
				t.Errorf("problems (-want +got, Contains lists the substrings found):\n%s\nmessages: %v", diff, problems)
			}
		})
	}
}

// TestStaticFitKeepsInUseNextToUncataloguedGI: a profile rule on a GPU
// that holds a GPU instance of a profile the catalog lacks still fits
// around the devices in use, as it does when the extra device is a
// catalogued one: only free devices are to go.
func TestStaticFitKeepsInUseNextToUncataloguedGI(t *testing.T) {
	rules := []v1alpha1.LayoutRule{{Profiles: map[string]int32{"1g.10gb": 1}}}
	inUse := mig.Device{Profile: "1g.10gb", Start: 5}
	for name, layout := range map[string]string{
		"free catalogued 1g.10gb@6":    "3g.40gb@0,1g.10gb@5,1g.10gb@6",
		"free uncatalogued 1g.10gb-me": "3g.40gb@0,1g.10gb@5,1g.10gb-me@6",
	} {
		inv := []v1alpha1.GPUStatus{{Index: 0, Model: "A100-SXM4-80GB", MIGEnabled: true, MIGPending: true,
			Layout: layout, InUse: inUse.String()}}
		specs, problems := DesiredGPUs(mig.DefaultCatalog(), rules, inv, nil)
		if len(problems) != 0 || len(specs) != 1 {
			t.Fatalf("%s: specs %+v problems %+v", name, specs, problems)
		}
		if got := mig.MustParseLayout(specs[0].Layout); !got.Contains(inUse) {
			t.Errorf("%s: desired %q (reason %q) destroys %s, which is in use", name, specs[0].Layout, specs[0].Reason, inUse)
		}
	}
}

// TestDesiredGPUsInIndexOrder: the spec lists GPUs by index whatever the
// order of the agent's report, so that the same layouts compare equal
// (sameLayouts) and are not written again.
func TestDesiredGPUsInIndexOrder(t *testing.T) {
	got, problems := DesiredGPUs(mig.DefaultCatalog(), rules(rule("all").layout("7g.80gb@0")),
		inventory(a100(1).layout("7g.80gb@0"), a100(0).layout("7g.80gb@0")), nil)
	if len(problems) != 0 || len(got) != 2 || got[0].Index != 0 || got[1].Index != 1 {
		t.Errorf("desired %+v (problems %v), want GPUs 0 then 1", got, problems)
	}
}
