package cluster

import (
	"os"
	"path/filepath"
	"testing"
)

func TestDecodeManifests(t *testing.T) {
	objs, err := decodeManifests([]byte("# comment only\n---\napiVersion: v1\nkind: Namespace\nmetadata:\n  name: a\n---\n---\n{\"apiVersion\": \"v1\", \"kind\": \"ConfigMap\", \"metadata\": {\"name\": \"b\", \"namespace\": \"a\"}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) != 2 || objs[0].GetKind() != "Namespace" || objs[1].GetName() != "b" || objs[1].GetNamespace() != "a" {
		t.Fatalf("decoded %d objects: %+v", len(objs), objs)
	}
	if _, err := decodeManifests([]byte("kind: [unclosed")); err == nil {
		t.Error("bad YAML decoded without an error")
	}
}

// The manifests every cluster applies exist and decode.
func TestDeployManifests(t *testing.T) {
	root, err := ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	objs, err := readManifestDirs(filepath.Join(root, "deploy", "crds"), filepath.Join(root, "deploy", "deviceclasses"))
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]int{}
	for _, o := range objs {
		kinds[o.GetKind()]++
	}
	if kinds["CustomResourceDefinition"] < 2 || kinds["DeviceClass"] < 2 {
		t.Errorf("kinds %v: want the MigLayout and NodeMigLayout CRDs and two DeviceClasses", kinds)
	}
	if _, err := os.Stat(filepath.Join(root, "cmd", AgentBinary)); err != nil {
		t.Errorf("ModuleRoot %s has no cmd/%s: %v", root, AgentBinary, err)
	}
}
