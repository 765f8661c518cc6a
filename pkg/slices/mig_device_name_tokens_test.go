package slices

import "testing"

// A device of a profile whose GI profile ID is 0 (7g.80gb on A100 and
// H100) is told by its name like any other.
func TestIsMIGDeviceNameProfileIDZero(t *testing.T) {
	name := MIGDeviceName(1, "7g.80gb", 0, 0)
	if name != "gpu-1-mig-7g80gb-0-0" {
		t.Fatalf("MIGDeviceName(1, 7g.80gb, 0, 0) = %q, want gpu-1-mig-7g80gb-0-0", name)
	}
	if !IsMIGDeviceName(name, 1, "7g.80gb", 0) {
		t.Errorf("IsMIGDeviceName(%q, 1, 7g.80gb, 0) = false, want true", name)
	}
}

// Every letter and digit of a profile name is kept in device names, capitals
// lower-cased, only punctuation dropped.
func TestMIGDeviceNameKeepsEveryLetterAndDigit(t *testing.T) {
	const profile = "abcdefghijklm.NOPQRSTUVWXYZ+0123456789-z"
	want := "gpu-0-mig-abcdefghijklmnopqrstuvwxyz0123456789z-7-1"
	if got := MIGDeviceName(0, profile, 7, 1); got != want {
		t.Errorf("MIGDeviceName(0, %q, 7, 1) = %q, want %q", profile, got, want)
	}
}
