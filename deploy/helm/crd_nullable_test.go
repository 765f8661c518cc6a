package helm

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

// nullableMapValues are the maps of the CRDs in deploy/crds whose values
// are nullable, by file and path of JSON field names under the served
// version's openAPIV3Schema (an array is passed through to its items). The
// API server drops a null it is not allowed to keep before CEL runs: a
// key left empty in YAML (`pool:`) would vanish from a node selector, which
// then selects more nodes, or from a rule's profiles, whose free devices
// are then destroyed. Kept, the null reaches the CEL rules of
// api/v1alpha1, which refuse it. controller-gen has no marker for the
// values of a map, so `make generate` sets them here (-update).
var nullableMapValues = map[string][][]string{
	"miglayout.io_miglayouts.yaml": {
		{"spec", "nodeSelector", "matchLabels"},
		{"spec", "rules", "profiles"},
		{"spec", "policy", "spares"},
	},
}

// TestCRDNullableMapValues: the maps of nullableMapValues have nullable
// values in deploy/crds; with -update it makes them so in place, the rest of
// each file as controller-gen wrote it.
func TestCRDNullableMapValues(t *testing.T) {
	for file, paths := range nullableMapValues {
		path := filepath.Join(repoRoot, "deploy/crds", file)
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var crd apiextensionsv1.CustomResourceDefinition
		if err := yaml.Unmarshal(data, &crd); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		for i := range crd.Spec.Versions {
			v := &crd.Spec.Versions[i]
			if v.Schema == nil || v.Schema.OpenAPIV3Schema == nil {
				t.Fatalf("%s: version %s has no schema", file, v.Name)
			}
			for _, p := range paths {
				if err := setNullableValues(v.Schema.OpenAPIV3Schema, p); err != nil {
					t.Fatalf("%s, version %s: %v", file, v.Name, err)
				}
			}
		}
		want, err := crdYAML(&crd)
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		if bytes.Equal(want, data) {
			continue
		}
		if *update {
			if err := os.WriteFile(path, want, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		t.Errorf("%s: map values that must be nullable are not: run make generate", path)
	}
}

// setNullableValues makes the values of the map at path under s nullable.
func setNullableValues(s *apiextensionsv1.JSONSchemaProps, path []string) error {
	if s.Type == "array" && s.Items != nil && s.Items.Schema != nil {
		return setNullableValues(s.Items.Schema, path)
	}
	if len(path) == 0 {
		if s.AdditionalProperties == nil || s.AdditionalProperties.Schema == nil {
			return fmt.Errorf("not a map of values")
		}
		s.AdditionalProperties.Schema.Nullable = true
		return nil
	}
	child, ok := s.Properties[path[0]]
	if !ok {
		return fmt.Errorf("no field %s", path[0])
	}
	if err := setNullableValues(&child, path[1:]); err != nil {
		return fmt.Errorf("%s: %w", path[0], err)
	}
	s.Properties[path[0]] = child
	return nil
}

// crdYAML writes crd as controller-gen does: a document marker, keys
// sorted, no status.
func crdYAML(crd *apiextensionsv1.CustomResourceDefinition) ([]byte, error) {
	j, err := json.Marshal(crd)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(j, &m); err != nil {
		return nil, err
	}
	delete(m, "status")
	if meta, ok := m["metadata"].(map[string]any); ok {
		delete(meta, "creationTimestamp")
	}
	out, err := yaml.Marshal(m)
	if err != nil {
		return nil, err
	}
	return append([]byte("---\n"), out...), nil
}
