package controller

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/miglayout/miglayout/api/v1alpha1"
	"github.com/miglayout/miglayout/pkg/mig"
)

// TestDesiredGPUsInUseFallbackDestroysFewestInUse: counts that cannot keep
// every device in use are fitted without them, and the agent then blocks
// until each in-use device the layout destroys is released. Of the layouts
// that hold the counts, one that destroys fewer devices in use must be
// written: the GPU then waits for fewer workloads to end, and devices in use
// are never destroyed where a free one can go instead.
func TestDesiredGPUsInUseFallbackDestroysFewestInUse(t *testing.T) {
	tests := map[string]struct {
		rules     []v1alpha1.LayoutRule
		inventory []v1alpha1.GPUStatus
		// wantInUseDestroyed is how many in-use devices the layout written
		// destroys: the fewest any layout holding the counts destroys.
		wantInUseDestroyed int
	}{
		// One 1g.10gb is wanted, two are in use: one of them has to go.
		// 1g.10gb@1 or 1g.10gb@5 can stay beside 3g.40gb@4 or @0, but the
		// fit without the devices in use keeps the free 1g.10gb@0 and
		// destroys both devices in use.
		"one 1g.10gb wanted, two in use, one free": {
			rules:              rules(rule("r").counts("3g.40gb", 1).counts("1g.10gb", 1)),
			inventory:          inventory(a100(0).layout("1g.10gb@0,1g.10gb@1,1g.10gb@5").inUse("1g.10gb@1,1g.10gb@5")),
			wantInUseDestroyed: 1,
		},
		// 4g.40gb@0 must take 1g.10gb@0 (in use); of the other three
		// 1g.10gb two stay. Keeping the in-use 1g.10gb@6 costs headroom
		// (slices 6-7 no longer hold a 1g.20gb), and the fit without the
		// devices in use trades the device in use for it.
		"headroom is not worth a device in use": {
			rules:              rules(rule("r").counts("4g.40gb", 1).counts("1g.10gb", 2)),
			inventory:          inventory(a100(0).layout("1g.10gb@0,1g.10gb@4,1g.10gb@5,1g.10gb@6").inUse("1g.10gb@0,1g.10gb@6")),
			wantInUseDestroyed: 1,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, problems := DesiredGPUs(mig.DefaultCatalog(), tc.rules, tc.inventory, nil)
			if len(problems) != 0 || len(got) != 1 {
				t.Fatalf("desired %+v, problems %+v; want one GPU spec", got, problems)
			}
			desired := mig.MustParseLayout(got[0].Layout)
			var destroyed mig.Layout
			for _, d := range mig.MustParseLayout(tc.inventory[0].InUse) {
				if !desired.Contains(d) {
					destroyed = append(destroyed, d)
				}
			}
			if diff := cmp.Diff(tc.wantInUseDestroyed, len(destroyed)); diff != "" {
				t.Errorf("desired %q (reason %q) destroys the devices in use %q (-want +got count):\n%s",
					got[0].Layout, got[0].Reason, destroyed.String(), diff)
			}
		})
	}
}

// TestDesiredGPUsCountsHeldAlreadyNotMoved: the layout written before is
// kept while the hardware moves towards it, but not where the GPU already
// holds the counts as it stands: an operator who tries an explicit layout
// and puts the counts back before the agent acted expects the GPU left
// alone, not every device destroyed and made again elsewhere.
func TestDesiredGPUsCountsHeldAlreadyNotMoved(t *testing.T) {
	tests := map[string]struct {
		rules     []v1alpha1.LayoutRule
		inventory []v1alpha1.GPUStatus
		current   []v1alpha1.GPUSpec
		want      []v1alpha1.GPUSpec
	}{
		"explicit layout reverted to counts the GPU holds": {
			rules:     rules(rule("mixed").counts("3g.40gb", 1).counts("2g.20gb", 1).counts("1g.10gb", 1)),
			inventory: inventory(a100(0).layout("1g.10gb@0,2g.20gb@2,3g.40gb@4")),
			current:   []v1alpha1.GPUSpec{specGPU(0, "3g.40gb@0,2g.20gb@4,1g.10gb@6", `rule "mixed": layout 3g.40gb@0,2g.20gb@4,1g.10gb@6`)},
			want: []v1alpha1.GPUSpec{specGPU(0, "1g.10gb@0,2g.20gb@2,3g.40gb@4",
				`rule "mixed": profiles 1g.10gb:1,2g.20gb:1,3g.40gb:1`)},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, problems := DesiredGPUs(mig.DefaultCatalog(), tc.rules, tc.inventory, tc.current)
			if len(problems) != 0 {
				t.Fatalf("problems %+v", problems)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("desired GPUs (-want +got):\n%s", diff)
			}
		})
	}
}
