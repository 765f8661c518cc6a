package controller

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/miglayout/miglayout/api/v1alpha1"
	"github.com/miglayout/miglayout/pkg/mig"
)

// TestDesiredGPUsKeepsTheLayoutTheGPUHolds: a GPU whose current layout
// already holds the rule's counts keeps that layout, even where the fit on
// an empty GPU, or the layout written before, would place the devices
// elsewhere. This holds when the agent's in-use text does not parse (the
// layout itself is still known) and when the rule lists a profile with
// count 0 (which asks for none of it).
func TestDesiredGPUsKeepsTheLayoutTheGPUHolds(t *testing.T) {
	const held = "1g.10gb@0,2g.20gb@2,3g.40gb@4"
	tests := map[string]struct {
		rules     []v1alpha1.LayoutRule
		inventory []v1alpha1.GPUStatus
		current   []v1alpha1.GPUSpec
		want      []v1alpha1.GPUSpec
	}{
		"in-use text that does not parse": {
			rules:     rules(rule("mixed").counts("3g.40gb", 1).counts("2g.20gb", 1).counts("1g.10gb", 1)),
			inventory: inventory(a100(0).layout(held).inUse("not a layout")),
			want:      []v1alpha1.GPUSpec{specGPU(0, held, `rule "mixed": profiles 1g.10gb:1,2g.20gb:1,3g.40gb:1`)},
		},
		"a profile listed with count 0": {
			rules:     rules(rule("mixed").counts("3g.40gb", 1).counts("2g.20gb", 1).counts("1g.10gb", 1).counts("4g.40gb", 0)),
			inventory: inventory(a100(0).layout(held)),
			current:   []v1alpha1.GPUSpec{specGPU(0, "3g.40gb@0,2g.20gb@4,1g.10gb@6", `rule "mixed": layout 3g.40gb@0,2g.20gb@4,1g.10gb@6`)},
			want:      []v1alpha1.GPUSpec{specGPU(0, held, `rule "mixed": profiles 1g.10gb:1,2g.20gb:1,3g.40gb:1,4g.40gb:0`)},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, problems := DesiredGPUs(mig.DefaultCatalog(), tc.rules, tc.inventory, tc.current)
			if len(problems) != 0 {
				t.Errorf("problems %+v, want none", problems)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("desired GPUs (-want +got):\n%s", diff)
			}
		})
	}
}

// TestFitKeepingMostInUseTieBreakIgnoresInputOrder: between equally good
// ways to keep devices in use, the one kept is the first in canonical
// order, whatever order the devices in use are given in.
func TestFitKeepingMostInUseTieBreakIgnoresInputOrder(t *testing.T) {
	m, err := mig.DefaultCatalog().Model("A100-SXM4-80GB")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int{"3g.40gb": 1, "1g.10gb": 1}
	current := mig.MustParseLayout("1g.10gb@0,1g.10gb@1,1g.10gb@5")
	for name, pinned := range map[string]mig.Layout{
		"canonical order": {{Profile: "1g.10gb", Start: 1}, {Profile: "1g.10gb", Start: 5}},
		"reverse order":   {{Profile: "1g.10gb", Start: 5}, {Profile: "1g.10gb", Start: 1}},
	} {
		t.Run(name, func(t *testing.T) {
			got, ok := fitKeepingMostInUse(m, want, current, pinned)
			if !ok {
				t.Fatalf("no fit keeping a device in use")
			}
			if diff := cmp.Diff("1g.10gb@1,3g.40gb@4", got.String()); diff != "" {
				t.Errorf("layout (-want +got):\n%s", diff)
			}
		})
	}
}
