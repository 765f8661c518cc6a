package main

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/miglayout/miglayout/api/v1alpha1"
	"github.com/miglayout/miglayout/pkg/controller"
	"github.com/miglayout/miglayout/pkg/mig"
)

// TestImportMigPartedRefusesWhatWouldActOtherwise: an import that would
// make the controller do other than mig-parted is refused, naming why:
// devices of two profiles with media extensions (the API server refuses
// them), and GPUs the catalog lacks that an entry's device-filter names
// after an entry turning MIG off on every GPU (left out, they would get
// MIG off, their devices destroyed, where mig-parted gives them the later
// entry's layout).
func TestImportMigPartedRefusesWhatWouldActOtherwise(t *testing.T) {
	for name, tc := range map[string]struct{ entries, want string }{
		"two +me profiles": {
			"  - devices: all\n    mig-enabled: true\n    mig-devices: {\"1g.6gb+me\": 1, \"2g.12gb+me\": 1}\n",
			"1g.6gb+me and 2g.12gb+me: a GPU holds at most one device with media extensions"},
		"an uncatalogued GPU after MIG off for all": {
			"  - devices: all\n    mig-enabled: false\n" +
				"  - device-filter: [\"0x20B610DE\"]\n    devices: all\n    mig-enabled: true\n    mig-devices: {\"1g.12gb\": 7}\n",
			"entry 0 would turn MIG off on them"},
		"uncatalogued beside catalogued IDs after MIG off for all": {
			"  - devices: all\n    mig-enabled: false\n" +
				"  - device-filter: [\"0x20B610DE\", \"0x20B210DE\"]\n    devices: all\n    mig-enabled: true\n    mig-devices: {\"3g.40gb\": 2}\n",
			"entry 0 would turn MIG off on them"},
		// Some of the entry's GPUs fall to a MIG-off entry: judged per
		// GPU index, not for the entry's indices as a whole.
		"MIG off for all, MIG on for GPU 1, uncatalogued for all": {
			"  - devices: all\n    mig-enabled: false\n  - devices: [1]\n    mig-enabled: true\n    mig-devices: {}\n" +
				"  - device-filter: [\"0x20B610DE\"]\n    devices: all\n    mig-enabled: true\n    mig-devices: {\"1g.12gb\": 7}\n",
			"entry 0 would turn MIG off on them"},
		"MIG off for GPU 0, MIG on for GPU 1, uncatalogued for both": {
			"  - devices: [0]\n    mig-enabled: false\n  - devices: [1]\n    mig-enabled: true\n    mig-devices: {}\n" +
				"  - device-filter: [\"0x20B610DE\"]\n    devices: [0, 1]\n    mig-enabled: true\n    mig-devices: {\"1g.12gb\": 7}\n",
			"entry 0 would turn MIG off on them"},
		"devices as strings": {
			"  - devices: [\"0\"]\n    mig-enabled: false\n", `devices: "0" is not a GPU index`},
	} {
		t.Run(name, func(t *testing.T) {
			rules, notes, err := importRules(t, tc.entries)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("import: %v (rules %+v, notes %s), want an error saying %q", err, rules, notes, tc.want)
			}
		})
	}
	// An uncatalogued GPU after a catch-all that does not turn MIG off is
	// only noted: that rule reports such a GPU UnknownGPU, untouched.
	rules, notes, err := importRules(t, "  - devices: all\n    mig-enabled: true\n    mig-devices: {}\n"+
		"  - device-filter: [\"0x20B610DE\"]\n    devices: all\n    mig-enabled: true\n    mig-devices: {\"1g.12gb\": 7}\n")
	if err != nil || !strings.Contains(notes, "left out") || len(rules) != 1 {
		t.Errorf("import: %v, rules %+v, notes %q: want the catch-all, and a note", err, rules, notes)
	}
}

// TestImportMigPartedReadsSpellingsAsMigPartedDoes: a compute-instance
// profile spanning its GPU instance (7c.7g.80gb) is that GPU instance
// profile, as mig-parted reads it; an empty device-filter matches every
// GPU.
func TestImportMigPartedReadsSpellingsAsMigPartedDoes(t *testing.T) {
	for name, tc := range map[string]struct {
		entry string
		want  v1alpha1.LayoutRule
	}{
		"7c.7g.80gb": {
			"  - devices: all\n    mig-enabled: true\n    mig-devices: {\"7c.7g.80gb\": 1}\n",
			v1alpha1.LayoutRule{Name: "c-0", Profiles: map[string]int32{"7g.80gb": 1}}},
		"1c.1g.10gb beside 1g.10gb": {
			"  - devices: all\n    mig-enabled: true\n    mig-devices: {\"1c.1g.10gb\": 1, \"1g.10gb\": 2}\n",
			v1alpha1.LayoutRule{Name: "c-0", Profiles: map[string]int32{"1g.10gb": 3}}},
		"empty device-filter": {
			"  - device-filter: \"\"\n    devices: all\n    mig-enabled: true\n    mig-devices: {\"3g.40gb\": 2}\n",
			v1alpha1.LayoutRule{Name: "c-0", Profiles: map[string]int32{"3g.40gb": 2}}},
	} {
		t.Run(name, func(t *testing.T) {
			rules, notes, err := importRules(t, tc.entry)
			if err != nil {
				t.Fatalf("import: %v (notes %s)", err, notes)
			}
			if diff := cmp.Diff([]v1alpha1.LayoutRule{tc.want}, rules); diff != "" {
				t.Errorf("rules (-want +got):\n%s", diff)
			}
		})
	}
	// What the controller makes of the uncatalogued GPU the refused import
	// would have left to MIG off: MIG off needs no model.
	g := v1alpha1.GPUStatus{Index: 0, Product: "NVIDIA PG506-232", MIGEnabled: true, MIGPending: true, Phase: v1alpha1.PhaseReady}
	off := []v1alpha1.LayoutRule{{Name: "c-0", MIGEnabled: new(bool)}}
	if got, _ := controller.DesiredGPUs(mig.DefaultCatalog(), off, []v1alpha1.GPUStatus{g}, nil); len(got) != 1 || got[0].MIGEnabled {
		t.Errorf("desired %+v: want MIG off on the uncatalogued GPU (the reason the import refuses)", got)
	}
}

// TestImportMigPartedUncataloguedWithoutHarm: GPUs the catalog lacks are
// left out with a note, not refused, where that gives no GPU another layout
// than mig-parted's: an ID of another vendor (matching no GPU), an earlier
// MIG-off entry for other GPU indices, or one a later entry for every GPU
// overrides, and an entry that turns MIG off itself.
func TestImportMigPartedUncataloguedWithoutHarm(t *testing.T) {
	const pg506 = "  - device-filter: [\"0x20B610DE\"]\n    devices: [0]\n    mig-enabled: true\n    mig-devices: {\"1g.12gb\": 7}\n"
	for name, entries := range map[string]string{
		"another vendor's ID": "  - devices: all\n    mig-enabled: false\n" +
			"  - device-filter: [\"0x20B2\"]\n    devices: all\n    mig-enabled: true\n    mig-devices: {\"1g.12gb\": 7}\n",
		"MIG off on other GPUs":           "  - devices: [1]\n    mig-enabled: false\n" + pg506,
		"MIG off overridden for all GPUs": "  - devices: all\n    mig-enabled: false\n  - devices: all\n    mig-enabled: true\n    mig-devices: {}\n" + pg506,
		"an entry turning MIG off itself": "  - devices: all\n    mig-enabled: false\n" +
			"  - device-filter: [\"0x20B610DE\"]\n    devices: all\n    mig-enabled: false\n",
	} {
		t.Run(name, func(t *testing.T) {
			rules, notes, err := importRules(t, entries)
			if err != nil || len(rules) == 0 || !strings.Contains(notes, "left out") {
				t.Errorf("import: %v, rules %+v, notes %q: want the entries imported and a note", err, rules, notes)
			}
		})
	}
}
