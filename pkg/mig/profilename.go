package mig

import (
	"fmt"
	"strings"
)

// ProfileName is a parsed profile name.
type ProfileName struct {
	ComputeSlices int    // the "3" of "3g.40gb"
	MemoryGB      int    // the "40" of "3g.40gb" (marketing GB, not MiB)
	Suffix        string // "", "+me", "-me", "+me.all" or "+gfx"
}

// ProfileNamePattern matches MIG GPU-instance profile names as nvidia-smi
// prints them: "<compute slices>g.<memory GB>gb" with an optional
// media-extension or graphics suffix ("+me", "-me", "+me.all", "+gfx"). CEL
// validation rules use it: ParseProfileName accepts exactly the names it
// matches (TestParseProfileNameMatchesPattern).
const ProfileNamePattern = `^([1-8])g\.([1-9][0-9]{0,3})gb(\+me|-me|\+me\.all|\+gfx)?$`

// ParseProfileName parses a profile name such as "1g.10gb+me", one that
// ProfileNamePattern matches. The error wraps ErrSyntax.
//
// It matches by hand, not with the pattern's regexp, which was a quarter of
// the controller's work on a steady Static MigLayout of 1000 nodes (every
// device of every layout it reads is parsed).
func ParseProfileName(s string) (ProfileName, error) {
	n, ok := parseProfileName(s)
	if !ok {
		return ProfileName{}, fmt.Errorf("%w: profile name %q is not of the form <N>g.<M>gb[+me]", ErrSyntax, s)
	}
	return n, nil
}

func parseProfileName(s string) (ProfileName, bool) {
	// "<1-8>g." then 1 to 4 digits without a leading zero, "gb", a suffix.
	if len(s) < len("1g.1gb") || s[0] < '1' || s[0] > '8' || s[1] != 'g' || s[2] != '.' || s[3] < '1' || s[3] > '9' {
		return ProfileName{}, false
	}
	n := ProfileName{ComputeSlices: int(s[0] - '0')}
	i := 3
	for ; i < len(s) && i < 7 && s[i] >= '0' && s[i] <= '9'; i++ {
		n.MemoryGB = n.MemoryGB*10 + int(s[i]-'0')
	}
	rest, ok := strings.CutPrefix(s[i:], "gb")
	if !ok {
		return ProfileName{}, false
	}
	switch rest {
	case "", "+me", "-me", "+me.all", "+gfx":
		n.Suffix = rest
		return n, true
	}
	return ProfileName{}, false
}
