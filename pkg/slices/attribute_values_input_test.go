package slices

import (
	"strings"
	"testing"
	"unicode/utf8"

	resourceapi "k8s.io/api/resource/v1"
)

// A string that is not valid UTF-8 and has no rune start before the limit
// (a garbled NVML name) is cut to nothing rather than failing.
func TestStrTruncationWithoutRuneStart(t *testing.T) {
	garbled := strings.Repeat("\x80", resourceapi.DeviceAttributeMaxValueLength+1)
	var got string
	func() {
		defer func() {
			if r := recover(); r != nil {
				t.Fatalf("str of %d continuation bytes panicked: %v", len(garbled), r)
			}
		}()
		got = *str(garbled).StringValue
	}()
	if got != "" || !utf8.ValidString(got) {
		t.Errorf("str of %d continuation bytes = %q, want \"\"", len(garbled), got)
	}
}

// Versions are read with surrounding blanks (a line read from a driver
// file) ignored; build identifiers may hold capitals, as semantic versions
// allow; and a fifth component joins the fourth in the build metadata,
// dot-separated.
func TestNormalizeVersionInputForms(t *testing.T) {
	for in, want := range map[string]string{
		" 580.95.05\n":     "580.95.5",
		"\t13.0 ":          "13.0.0",
		"535.104.05.RC1":   "535.104.5+RC1",
		"535.104.5+Beta-2": "535.104.5+Beta-2",
		"535.104.05.01.02": "535.104.5+01.02",
	} {
		got, ok := NormalizeVersion(in)
		if !ok || got != want {
			t.Errorf("NormalizeVersion(%q) = %q, %v; want %q, true", in, got, ok, want)
		}
	}
}
