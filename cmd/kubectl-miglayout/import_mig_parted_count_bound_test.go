package main

import (
	"strings"
	"testing"
)

// TestImportMigPartedRefusesEightOfAProfileOnEveryGPU: a count no GPU
// holds (more than 7 of a profile) is refused also in an entry without a
// device-filter, where no model's fit would catch it: imported, every GPU
// of the selected nodes would report InvalidLayout.
func TestImportMigPartedRefusesEightOfAProfileOnEveryGPU(t *testing.T) {
	rules, notes, err := importRules(t, "  - devices: all\n    mig-enabled: true\n    mig-devices: {\"1g.10gb\": 8}\n")
	if err == nil || !strings.Contains(err.Error(), "a GPU holds 0 to 7 devices of a profile") {
		t.Errorf("imported %+v (notes: %s), err %v: want 8 × 1g.10gb refused", rules, notes, err)
	}
}
