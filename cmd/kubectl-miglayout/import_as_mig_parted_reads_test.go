package main

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/miglayout/miglayout/api/v1alpha1"
	"sigs.k8s.io/yaml"
)

// TestImportMigPartedRefusesWhatMigPartedRefuses: entries mig-parted's own
// parser refuses are refused, naming the entry, not imported as something
// else: mig-enabled forgotten beside the devices wanted would become a rule
// turning MIG off (every free device destroyed), mig-devices forgotten a
// rule with MIG on and no device.
func TestImportMigPartedRefusesWhatMigPartedRefuses(t *testing.T) {
	for name, tc := range map[string]struct{ entry, want string }{
		"mig-enabled missing": {
			"  - devices: all\n    mig-devices: {\"3g.40gb\": 2}\n", "mig-enabled is missing"},
		"mig-enabled missing, no devices": {
			"  - devices: all\n", "mig-enabled is missing"},
		"MIG on, mig-devices missing": {
			"  - devices: all\n    mig-enabled: true\n", "mig-devices is missing"},
		"MIG on, mig-devices null": {
			"  - devices: all\n    mig-enabled: true\n    mig-devices: null\n", "mig-devices is missing"},
		"MIG off with devices": {
			"  - devices: all\n    mig-enabled: false\n    mig-devices: {\"3g.40gb\": 2}\n", "mig-enabled is false and mig-devices names devices"},
	} {
		t.Run(name, func(t *testing.T) {
			rules, notes, err := importRules(t, tc.entry)
			if err == nil {
				t.Fatalf("imported %+v (notes: %s)", rules, notes)
			}
			if !strings.Contains(err.Error(), "entry 0") || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q, want it to name entry 0 and say %q", err, tc.want)
			}
		})
	}
	// What mig-parted takes stays taken: MIG on with no device, MIG off
	// with mig-devices: {}.
	for _, entry := range []string{
		"  - devices: all\n    mig-enabled: true\n    mig-devices: {}\n",
		"  - devices: all\n    mig-enabled: false\n    mig-devices: {}\n",
		"  - devices: all\n    mig-enabled: false\n",
	} {
		if _, notes, err := importRules(t, entry); err != nil {
			t.Errorf("%q refused: %v (notes: %s)", entry, err, notes)
		}
	}
}

// TestImportMigPartedReadsDeviceIDsAsMigPartedDoes: mig-parted reads a
// device-filter ID as one number, the device in its upper 16 bits and the
// vendor in the lower: 0x20B2 is device 0 of vendor 0x20B2, a filter that
// matches no GPU, so the entry is left out with a note, not made a rule
// for every A100-SXM4-80GB. The vendor's hexadecimal digits may be in
// either case; a subsystem ID (boards of a model) is refused.
func TestImportMigPartedReadsDeviceIDsAsMigPartedDoes(t *testing.T) {
	entry := func(id string) string {
		return "  - device-filter: \"" + id + "\"\n    devices: all\n    mig-enabled: true\n    mig-devices: {\"3g.40gb\": 2}\n"
	}
	rules, notes, err := importRules(t, entry("0x20B2")+entry("0x20B510DE"))
	if err != nil {
		t.Fatalf("%v (notes: %s)", err, notes)
	}
	for _, r := range rules {
		if r.ProductName != "A100-PCIE-80GB" {
			t.Errorf("rule %s for %q, want only the A100-PCIE-80GB's (0x20B2 names no NVIDIA GPU)", r.Name, r.ProductName)
		}
	}
	if !strings.Contains(notes, "0x20B2 (vendor 0x20B2") {
		t.Errorf("notes %q do not say why 0x20B2 is left out", notes)
	}
	rules, notes, err = importRules(t, entry("0x20B210De"))
	if err != nil || len(rules) != 1 || rules[0].ProductName != "A100-SXM4-80GB" {
		t.Errorf("0x20B210De imported as %+v, %v (notes: %s); want one A100-SXM4-80GB rule", rules, err, notes)
	}
	if rules, _, err := importRules(t, entry("0x20B210DE:0x147E10DE")); err == nil || !strings.Contains(err.Error(), "subsystem") {
		t.Errorf("a subsystem ID imported as %+v, %v; want it refused", rules, err)
	}
}

// TestImportMigPartedOnlyTheNodesModels: --models keeps the rules of the
// models the selected nodes have: an entry for a GPU none of them has (a
// GB200 whose profile names the catalog does not know) is left out, not
// refused, and a filter of many models makes a rule for those given only;
// an entry without a device-filter, for every GPU, is kept.
func TestImportMigPartedOnlyTheNodesModels(t *testing.T) {
	const entries = `  - devices: [7]
    mig-enabled: true
    mig-devices: {"1g.10gb": 1}
  - device-filter: ["0x294110DE"]
    devices: all
    mig-enabled: true
    mig-devices: {"1g.24gb": 2, "2g.47gb": 1, "3g.95gb": 1}
  - device-filter: ["0x233010DE", "0x233110DE", "0x20B210DE", "0x20B510DE"]
    devices: all
    mig-enabled: true
    mig-devices: {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}
  - device-filter: "0x20B710DE"
    devices: all
    mig-enabled: true
    mig-devices: {"1g.6gb": 2, "2g.12gb": 1}
`
	file := writeMigParted(t, entries)
	if _, _, err := runWith(t, nil, "import", "mig-parted", "-f", file, "--config", "c"); err == nil {
		t.Fatal("imported every model, the GB200's profile names too: the test shows nothing")
	}
	out, notes, err := runWith(t, nil, "import", "mig-parted", "-f", file, "--config", "c", "--models", "A100-SXM4-80GB,h100-sxm5-80gb")
	if err != nil {
		t.Fatalf("%v (notes: %s)", err, notes)
	}
	var ml v1alpha1.MigLayout
	if err := yaml.UnmarshalStrict([]byte(out), &ml); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range ml.Spec.Rules {
		got = append(got, r.ProductName)
	}
	if diff := cmp.Diff([]string{"A100-SXM4-80GB", "H100-SXM5-80GB", ""}, got); diff != "" {
		t.Errorf("rules' models (-want +got):\n%s", diff)
	}
	if _, _, err := runWith(t, nil, "import", "mig-parted", "-f", file, "--config", "c", "--models", "A100-SXM9"); err == nil || !strings.Contains(err.Error(), "--models") {
		t.Errorf("an unknown model imported, or refused without naming --models: %v", err)
	}
}
