package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/miglayout/miglayout/api/v1alpha1"
	"github.com/miglayout/miglayout/pkg/mig"
)

// TestCheckFixMakesV1alpha3ClaimsServable: snippets written for Kubernetes
// 1.31 and 1.32 use resource.k8s.io/v1alpha3, whose requests carry
// deviceClassName, allocationMode and count directly, as v1beta1 does.
// From 1.33 on the API server serves no ResourceClaim in v1alpha3 (k8s.io/api
// v0.37 registers only DeviceTaintRule and ResourcePoolStatusRequest there),
// so check --fix, which moves the fields under exactly:, must also make the
// object resource.k8s.io/v1; exactly: under v1alpha3 is refused twice over.
func TestCheckFixMakesV1alpha3ClaimsServable(t *testing.T) {
	for _, kind := range []string{"ResourceClaim", "ResourceClaimTemplate"} {
		t.Run(kind, func(t *testing.T) {
			spec := `spec:
  devices:
    requests:
    - name: half
      deviceClassName: mig.miglayout.io
      allocationMode: ExactCount
      count: 1
`
			if kind == "ResourceClaimTemplate" {
				spec = "spec:\n  " + strings.ReplaceAll(strings.TrimSuffix(spec, "\n"), "\n", "\n  ") + "\n"
			}
			input := "apiVersion: resource.k8s.io/v1alpha3\nkind: " + kind + "\nmetadata: {name: half, namespace: ml}\n" + spec
			cmd := newRootCommandEnv(&env{stdin: strings.NewReader(input)})
			var out, errOut strings.Builder
			cmd.SetOut(&out)
			cmd.SetErr(&errOut)
			cmd.SetArgs([]string{"check", "--offline", "--fix", "-f", "-"})
			_ = cmd.Execute()
			if !strings.Contains(out.String(), "exactly:") {
				t.Fatalf("check --fix did not move the request's fields under exactly:\nreport:\n%s\noutput:\n%s", errOut.String(), out.String())
			}
			if !strings.Contains(out.String(), "apiVersion: resource.k8s.io/v1\n") {
				t.Errorf("check --fix left a %s the API server does not serve (exactly: under resource.k8s.io/v1alpha3):\n%s", kind, out.String())
			}
		})
	}
}

// TestImportMigPartedKnowsCatalogedHopperIDs: mig-parted's stock
// all-balanced entry selects the H200 NVL by PCI device ID 0x233B and the
// GH200 (H100 96GB) by 0x2342; the miglayout catalog has both models
// (H200-NVL-141GB, GH200-96GB), so the import must write a rule for each,
// not drop them as GPUs "the miglayout catalog does not know".
func TestImportMigPartedKnowsCatalogedHopperIDs(t *testing.T) {
	const config = `version: v1
mig-configs:
  all-balanced:
    # H200 141GB, H200 NVL
    - device-filter: ["0x233510DE", "0x233B10DE"]
      devices: all
      mig-enabled: true
      mig-devices:
        "1g.18gb": 2
        "2g.35gb": 1
        "3g.71gb": 1
    # H100-96GB, PG506-96GB, GH200, H20
    - device-filter: ["0x234210DE", "0x233D10DE", "0x20B610DE", "0x232910DE"]
      devices: all
      mig-enabled: true
      mig-devices:
        "1g.12gb": 2
        "2g.24gb": 1
        "3g.48gb": 1
`
	f := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(f, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	out, notes, err := runWith(t, nil, "import", "mig-parted", "-f", f, "--config", "all-balanced")
	if err != nil {
		t.Fatalf("import: %v\n%s", err, notes)
	}
	var ml v1alpha1.MigLayout
	if err := yaml.UnmarshalStrict([]byte(out), &ml); err != nil {
		t.Fatal(err)
	}
	var products []string
	for _, r := range ml.Spec.Rules {
		products = append(products, r.ProductName)
	}
	for _, want := range []string{"H200-SXM5-141GB", "H200-NVL-141GB", "GH200-96GB"} {
		if !slices.Contains(products, want) {
			t.Errorf("no rule for %s (rules for %q); notes:\n%s", want, products, notes)
		}
	}
}

// TestPCIModelsAreCatalogued: every GPU model the mig-parted import maps a
// PCI device ID to is one the catalog has.
func TestPCIModelsAreCatalogued(t *testing.T) {
	cat := mig.DefaultCatalog()
	for id, model := range pciModels {
		if _, err := cat.Model(model); err != nil {
			t.Errorf("PCI device %s: %v", id, err)
		}
	}
}
