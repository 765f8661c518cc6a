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

// TestCheckServedNamesEachKindTheControllerNeeds: checkServed wants each of
// the kinds the controller reads and writes, each in the version it uses,
// and names the one a cluster lacks (the list is written out here, not
// taken from served, so that a kind dropped from it or moved to another
// version is seen).
func TestCheckServedNamesEachKindTheControllerNeeds(t *testing.T) {
	needed := []schema.GroupVersionKind{
		{Group: "resource.k8s.io", Version: "v1", Kind: "ResourceClaim"},
		{Group: "resource.k8s.io", Version: "v1", Kind: "ResourceSlice"},
		{Group: "miglayout.io", Version: "v1alpha1", Kind: "MigLayout"},
		{Group: "miglayout.io", Version: "v1alpha1", Kind: "NodeMigLayout"},
	}
	mapper := func(missing string) meta.RESTMapper {
		m := meta.NewDefaultRESTMapper(nil)
		for _, gvk := range needed {
			if gvk.Kind != missing {
				m.Add(gvk, meta.RESTScopeNamespace)
			}
		}
		return m
	}
	if err := checkServed(mapper("")); err != nil {
		t.Errorf("every kind served: %v", err)
	}
	for _, gvk := range needed {
		if err := checkServed(mapper(gvk.Kind)); err == nil || !strings.Contains(err.Error(), gvk.Kind+" "+gvk.Group+"/"+gvk.Version) {
			t.Errorf("%s not served: %v, want an error naming it", gvk, err)
		}
	}
}
