package mig

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestCatalogModelLookupNames: a model is found by its name, product name or
// alias, ignoring case, surrounding space and an "NVIDIA " prefix.
func TestCatalogModelLookupNames(t *testing.T) {
	tests := map[string]struct {
		name string
		want string
	}{
		"model name":                {name: "H100-SXM5-80GB", want: "H100-SXM5-80GB"},
		"product name":              {name: "NVIDIA H100 80GB HBM3", want: "H100-SXM5-80GB"},
		"model name with NVIDIA":    {name: "NVIDIA H100-SXM5-80GB", want: "H100-SXM5-80GB"},
		"alias with nvidia, spaces": {name: "  nvidia h100-sxm5 ", want: "H100-SXM5-80GB"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			m, err := DefaultCatalog().Model(tc.name)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, m.Name); diff != "" {
				t.Errorf("Model(%q) (-want +got):\n%s", tc.name, diff)
			}
		})
	}
}
