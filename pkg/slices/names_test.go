package slices

import "testing"

// TestIsMIGDeviceNameTellsMediaVariantsApart: "1g.10gb+me" (a catalog
// profile, GI profile ID 20 on an A100) and "1g.10gb-me" (the variant
// without a media engine newer drivers offer, under another GI profile ID,
// published under nvidia-smi's name) have names that differ in more than
// the GI profile ID, which IsMIGDeviceName ignores: neither is taken for the
// other (the controller tells by name which device a claim holds).
func TestIsMIGDeviceNameTellsMediaVariantsApart(t *testing.T) {
	plus := MIGDeviceName(0, "1g.10gb+me", 20, 6)
	minus := MIGDeviceName(0, "1g.10gb-me", 21, 6)
	if plus == minus {
		t.Fatalf("both variants are named %q", plus)
	}
	if IsMIGDeviceName(plus, 0, "1g.10gb-me", 6) {
		t.Errorf("IsMIGDeviceName(%q, 0, 1g.10gb-me, 6) = true: the +me device is taken for a -me one", plus)
	}
	if IsMIGDeviceName(minus, 0, "1g.10gb+me", 6) {
		t.Errorf("IsMIGDeviceName(%q, 0, 1g.10gb+me, 6) = true: the -me device is taken for a +me one", minus)
	}
}
