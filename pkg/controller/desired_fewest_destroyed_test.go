package controller

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/miglayout/miglayout/api/v1alpha1"
	"github.com/miglayout/miglayout/pkg/mig"
)

// TestDesiredGPUsKeepingMostInUseDestroysFewest: when counts cannot keep
// every device in use, the layout keeps as many of them as it can and, of
// the ways to keep that many, the one that destroys the fewest devices in
// all (free ones too); between equally good ways, the devices in use
// earliest in canonical order are the ones kept, so the choice is stable.
func TestDesiredGPUsKeepingMostInUseDestroysFewest(t *testing.T) {
	tests := map[string]struct {
		rules     []v1alpha1.LayoutRule
		inventory []v1alpha1.GPUStatus
		want      []v1alpha1.GPUSpec
	}{
		// 3g.40gb needs slices 0-3 or 4-7, each holding a device in use.
		// Keeping 1g.10gb@0 destroys only 1g.10gb@4; keeping 1g.10gb@4
		// destroys 1g.10gb@0 and the free 1g.10gb@1 beside it.
		"keeping one device in use destroys fewer free devices than keeping the other": {
			rules:     rules(rule("r").counts("3g.40gb", 1).counts("1g.10gb", 2)),
			inventory: inventory(a100(0).layout("1g.10gb@0,1g.10gb@1,1g.10gb@4").inUse("1g.10gb@0,1g.10gb@4")),
			want: []v1alpha1.GPUSpec{specGPU(0, "1g.10gb@0,1g.10gb@1,3g.40gb@4",
				`rule "r": profiles 1g.10gb:2,3g.40gb:1; destroys 1g.10gb@4, in use now`)},
		},
		// Keeping 1g.10gb@1 or 1g.10gb@5 destroys two devices either way:
		// the first in use in canonical order stays.
		"equally good: the first device in use stays": {
			rules:     rules(rule("r").counts("3g.40gb", 1).counts("1g.10gb", 1)),
			inventory: inventory(a100(0).layout("1g.10gb@0,1g.10gb@1,1g.10gb@5").inUse("1g.10gb@1,1g.10gb@5")),
			want: []v1alpha1.GPUSpec{specGPU(0, "1g.10gb@1,3g.40gb@4",
				`rule "r": profiles 1g.10gb:1,3g.40gb:1; destroys 1g.10gb@5, in use now`)},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, problems := DesiredGPUs(mig.DefaultCatalog(), tc.rules, tc.inventory, nil)
			if len(problems) != 0 {
				t.Errorf("problems %+v, want none", problems)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("desired GPUs (-want +got):\n%s", diff)
			}
		})
	}
}
