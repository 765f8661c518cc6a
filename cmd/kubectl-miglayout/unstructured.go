package main

import (
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// migLayoutUnstructured is ml as import writes it out: apiVersion and kind
// set, status and a zero
// creationTimestamp left out, and a rule's empty profiles map (MIG on, no
// device) kept, which the typed field's omitempty would drop (the API
// server refuses a rule with MIG on and neither profiles nor layout).
func migLayoutUnstructured(ml *v1alpha1.MigLayout) (*unstructured.Unstructured, error) {
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(ml)
	if err != nil {
		return nil, fmt.Errorf("converting MigLayout %q: %w", ml.Name, err)
	}
	delete(obj, "status")
	unstructured.RemoveNestedField(obj, "metadata", "creationTimestamp")
	if rules, ok, _ := unstructured.NestedSlice(obj, "spec", "rules"); ok {
		for i, r := range ml.Spec.Rules {
			if r.Profiles != nil && len(r.Profiles) == 0 {
				rules[i].(map[string]any)["profiles"] = map[string]any{}
			}
		}
		if err := unstructured.SetNestedSlice(obj, rules, "spec", "rules"); err != nil {
			return nil, fmt.Errorf("converting MigLayout %q: %w", ml.Name, err)
		}
	}
	u := &unstructured.Unstructured{Object: obj}
	u.SetGroupVersionKind(v1alpha1.GroupVersion.WithKind("MigLayout"))
	return u, nil
}
