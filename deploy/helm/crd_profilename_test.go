package helm

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/miglayout/miglayout/pkg/mig"
)

// TestCRDProfilePatternsAsTheCatalog: every profile-name pattern of the
// MigLayout CRD's rules (profiles keys, layout devices, allowedProfiles,
// spares) admits exactly the names mig.ParseProfileName parses, so that
// admission and the controller never disagree on a name. The patterns are
// copied into the CRD markers by hand; this ties them to the Go grammar.
func TestCRDProfilePatternsAsTheCatalog(t *testing.T) {
	data, err := os.ReadFile("../crds/miglayout.io_miglayouts.yaml")
	if err != nil {
		t.Fatal(err)
	}
	// The profile part of each pattern: it starts at [1-8]g and runs to
	// the optional suffix group's "?".
	found := regexp.MustCompile(`\[1-8\]g\[\.\][^?\n]*\)\?`).FindAllString(string(data), -1)
	if len(found) < 4 {
		t.Fatalf("found %d profile patterns in the CRD, want those of profiles, layout, allowedProfiles and spares", len(found))
	}
	names := []string{
		"1g.10gb", "3g.40gb", "7g.80gb", "8g.80gb", "1g.10gb+me", "1g.45gb-me", "7g.80gb+me.all", "1g.12gb+gfx", "1g.1000gb", "2g.9999gb",
		"0g.10gb", "9g.10gb", "1g.0gb", "1g.10000gb", "1g.10gb+", "1g.10gb+me.", "1g.10gb+ME", "1G.10GB", "1g.10", "1g10gb", "1g.10gb-gfx",
		"1g.10gb+me+me", "10g.10gb", "1g.010gb", " 1g.10gb", "1c.1g.10gb", "1g.10gb.all", "",
	}
	for _, p := range unique(found) {
		re := regexp.MustCompile("^" + strings.ReplaceAll(p, `\\`, `\`) + "$")
		for _, name := range names {
			_, err := mig.ParseProfileName(name)
			if got, want := re.MatchString(name), err == nil; got != want {
				t.Errorf("CRD pattern %s admits %q: %v; ParseProfileName: %v", p, name, got, err)
			}
		}
	}
}

// unique is xs without repeats, in first-seen order.
func unique(xs []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, x := range xs {
		if !seen[x] {
			seen[x] = true
			out = append(out, x)
		}
	}
	return out
}

// TestCRDCountRulesHoldForTheCatalog: the MigLayout CRD refuses counts whose
// compute slices (each count times the number before g) exceed 7, and more
// than one device of a profile with media extensions (+me). Both hold for every catalog
// model, or admission would refuse a layout some GPU can take: the number
// before g is the profile's compute slices, no model has more than 7, and
// no +me profile allows two instances on one GPU.
func TestCRDCountRulesHoldForTheCatalog(t *testing.T) {
	for _, m := range mig.DefaultCatalog().Models() {
		if m.ComputeSlices > 7 {
			t.Errorf("%s has %d compute slices; the CRD refuses counts of more than 7", m.Name, m.ComputeSlices)
		}
		for _, p := range m.Profiles {
			if n, err := mig.ParseProfileName(p.Name); err != nil || n.ComputeSlices != p.ComputeSlices {
				t.Errorf("%s %s: the number before g (%v, %v) is not its %d compute slices", m.Name, p.Name, n.ComputeSlices, err, p.ComputeSlices)
			}
			if strings.Contains(p.Name, "+me") && p.MaxCount > 1 {
				t.Errorf("%s %s allows %d instances; the CRD refuses more than one +me device", m.Name, p.Name, p.MaxCount)
			}
		}
	}
}
