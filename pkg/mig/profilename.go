package mig

import (
	"fmt"
	"regexp"
	"strconv"
)

// profileNameRE matches MIG GPU-instance profile names as nvidia-smi prints
// them: "<compute slices>g.<memory GB>gb" with an optional media-extension or
// graphics suffix ("+me", "-me", "+me.all", "+gfx").
var profileNameRE = regexp.MustCompile(`^([1-8])g\.([1-9][0-9]{0,3})gb(\+me|-me|\+me\.all|\+gfx)?$`)

// ProfileName is a parsed profile name.
type ProfileName struct {
	ComputeSlices int    // the "3" of "3g.40gb"
	MemoryGB      int    // the "40" of "3g.40gb" (marketing GB, not MiB)
	Suffix        string // "", "+me", "-me", "+me.all" or "+gfx"
}

// ProfileNamePattern is profileNameRE's source, for CEL validation rules that
// must accept exactly the names ParseProfileName accepts.
const ProfileNamePattern = `^([1-8])g\.([1-9][0-9]{0,3})gb(\+me|-me|\+me\.all|\+gfx)?$`

// ParseProfileName parses a profile name such as "1g.10gb+me". The error
// wraps ErrSyntax.
func ParseProfileName(s string) (ProfileName, error) {
	m := profileNameRE.FindStringSubmatch(s)
	if m == nil {
		return ProfileName{}, fmt.Errorf("%w: profile name %q is not of the form <N>g.<M>gb[+me]", ErrSyntax, s)
	}
	c, _ := strconv.Atoi(m[1])
	g, _ := strconv.Atoi(m[2])
	return ProfileName{ComputeSlices: c, MemoryGB: g, Suffix: m[3]}, nil
}
