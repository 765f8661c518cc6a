package main

import (
	"strings"
	"testing"
)

// TestImportMigPartedNamesTheGPUInstanceOfACIProfile: a compute-instance
// profile (1c.3g.40gb: one compute slice of a 3g.40gb) is refused with the
// GPU instance profile to write instead, since miglayout makes one compute
// instance spanning each GPU instance.
func TestImportMigPartedNamesTheGPUInstanceOfACIProfile(t *testing.T) {
	_, notes, err := importRules(t, "  - devices: all\n    mig-enabled: true\n    mig-devices: {\"1c.3g.40gb\": 2}\n")
	if err == nil || !strings.Contains(err.Error(), `"1c.3g.40gb" is a compute-instance profile`) || !strings.Contains(err.Error(), "(e.g. 3g.40gb)") {
		t.Errorf("import: %v (notes: %s), want the compute-instance profile refused naming 3g.40gb", err, notes)
	}
}
