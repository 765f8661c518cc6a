package controller

import (
	"fmt"
	"slices"
	"strings"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// matchRule returns the first rule that applies to gpu: its GPUIndices are
// empty or hold the GPU's index, and its ProductName is empty or equals the
// GPU's product or catalog model name, ignoring case.
func matchRule(rules []v1alpha1.LayoutRule, gpu v1alpha1.GPUStatus) (int, *v1alpha1.LayoutRule, bool) {
	for i := range rules {
		if ruleMatches(&rules[i], gpu) {
			return i, &rules[i], true
		}
	}
	return -1, nil, false
}

func ruleMatches(r *v1alpha1.LayoutRule, gpu v1alpha1.GPUStatus) bool {
	if len(r.GPUIndices) > 0 && !slices.Contains(r.GPUIndices, gpu.Index) {
		return false
	}
	if r.ProductName == "" {
		// A rule for every GPU (no product, no index named) means every
		// GPU that supports MIG: one beside them that does not (an L4 in
		// an A100 node) is left alone, not reported of no known model.
		return len(r.GPUIndices) > 0 || gpu.MIGCapable == nil || *gpu.MIGCapable
	}
	return strings.EqualFold(r.ProductName, gpu.Product) || (gpu.Model != "" && strings.EqualFold(r.ProductName, gpu.Model))
}

// ruleName names a rule in messages: its Name, else its position.
func ruleName(i int, r *v1alpha1.LayoutRule) string {
	if r.Name != "" {
		return fmt.Sprintf("rule %q", r.Name)
	}
	return fmt.Sprintf("rules[%d]", i)
}

// migEnabled is the MIG mode a rule asks for; MIG is on unless turned off.
func migEnabled(r *v1alpha1.LayoutRule) bool { return r.MIGEnabled == nil || *r.MIGEnabled }
