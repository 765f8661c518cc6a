package main

import (
	"strings"
	"testing"
)

// TestConvertTakesAKindWithoutAPIVersionForTheBuiltIn: a Pod or a
// Deployment written without apiVersion is taken for the built-in kind and
// converted.
func TestConvertTakesAKindWithoutAPIVersionForTheBuiltIn(t *testing.T) {
	out := convertStdin(t, `kind: Pod
metadata: {name: p, namespace: ml}
spec:
  containers:
  - {name: c, image: x, resources: {limits: {nvidia.com/gpu: 1}}}
---
kind: Deployment
metadata: {name: d, namespace: ml}
spec:
  template:
    spec:
      containers:
      - {name: c, image: x, resources: {limits: {nvidia.com/gpu: 1}}}
`)
	for _, want := range []string{"resourceClaimTemplateName: p-gpu", "resourceClaimTemplateName: d-gpu"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "nvidia.com/gpu") {
		t.Errorf("output still asks for device-plugin GPUs:\n%s", out)
	}
}
