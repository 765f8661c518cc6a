package main

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestCheckServed(t *testing.T) {
	all := func() *meta.DefaultRESTMapper {
		m := meta.NewDefaultRESTMapper(nil)
		for _, k := range served {
			m.Add(k.gk.WithVersion(k.version), meta.RESTScopeNamespace)
		}
		return m
	}
	if err := checkServed(all()); err != nil {
		t.Errorf("every kind served: %v", err)
	}
	for _, missing := range []string{"ResourceClaim", "MigLayout"} {
		m := meta.NewDefaultRESTMapper(nil)
		for _, k := range served {
			if k.gk.Kind != missing {
				m.Add(k.gk.WithVersion(k.version), meta.RESTScopeNamespace)
			}
		}
		err := checkServed(m)
		if err == nil || !strings.Contains(err.Error(), missing) {
			t.Errorf("%s not served: %v, want an error naming it", missing, err)
		}
	}
	// Served in another version only: refused too.
	old := meta.NewDefaultRESTMapper(nil)
	for _, k := range served {
		v := k.version
		if k.gk.Group == "resource.k8s.io" {
			v = "v1beta1"
		}
		old.Add(schema.GroupVersionKind{Group: k.gk.Group, Version: v, Kind: k.gk.Kind}, meta.RESTScopeNamespace)
	}
	if err := checkServed(old); err == nil || !strings.Contains(err.Error(), "resource.k8s.io/v1") {
		t.Errorf("DRA served in v1beta1 only: %v, want an error naming resource.k8s.io/v1", err)
	}
}
