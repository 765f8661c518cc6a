package controller

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/miglayout/miglayout/api/v1alpha1"
	"github.com/miglayout/miglayout/pkg/mig"
)

// TestDesiredGPUsIgnoresDevicesReportedWithMIGDisabled: a GPU whose MIG
// mode is disabled holds no MIG devices, whatever layout or in-use text the
// agent's report still carries. The layout is fitted as on an empty GPU,
// and no reason names devices in use as destroyed.
func TestDesiredGPUsIgnoresDevicesReportedWithMIGDisabled(t *testing.T) {
	migOffWith := func(layout, inUse string) []v1alpha1.GPUStatus {
		g := a100(0).migOff().build()
		g.Layout, g.InUse = layout, inUse
		return []v1alpha1.GPUStatus{g}
	}
	tests := map[string]struct {
		rules     []v1alpha1.LayoutRule
		inventory []v1alpha1.GPUStatus
		want      []v1alpha1.GPUSpec
	}{
		"MIG off rule": {
			rules:     rules(rule("whole").migOff()),
			inventory: migOffWith("3g.40gb@0,3g.40gb@4", "3g.40gb@4"),
			want:      []v1alpha1.GPUSpec{specMIGOff(0, `rule "whole": MIG off`)},
		},
		"counts: the reported layout is not kept": {
			rules:     rules(rule("mixed").counts("3g.40gb", 1).counts("2g.20gb", 1).counts("1g.10gb", 1)),
			inventory: migOffWith("1g.10gb@0,2g.20gb@2,3g.40gb@4", "2g.20gb@2"),
			want: []v1alpha1.GPUSpec{specGPU(0, "2g.20gb@0,1g.10gb@2,3g.40gb@4",
				`rule "mixed": profiles 1g.10gb:1,2g.20gb:1,3g.40gb:1`)},
		},
		"counts: an uncatalogued device reported in use is not named": {
			rules:     rules(rule("halves").counts("3g.40gb", 2)),
			inventory: migOffWith("3g.40gb@0,1g.10gb-me@6", "1g.10gb-me@6"),
			want:      []v1alpha1.GPUSpec{specGPU(0, "3g.40gb@0,3g.40gb@4", `rule "halves": profiles 3g.40gb:2`)},
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
