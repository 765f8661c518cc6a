package mig

import (
	"errors"
	"regexp"
	"strconv"
	"testing"
)

var profileNamePatternRE = regexp.MustCompile(ProfileNamePattern)

// checkAgainstPattern fails t where ParseProfileName and ProfileNamePattern
// (which CEL validation uses) disagree on s: whether it is a profile name,
// or what its parts are.
func checkAgainstPattern(t *testing.T, s string) bool {
	t.Helper()
	got, err := ParseProfileName(s)
	m := profileNamePatternRE.FindStringSubmatch(s)
	switch {
	case m == nil && err == nil:
		t.Errorf("ParseProfileName(%q) = %+v; the pattern does not match it", s, got)
		return false
	case m != nil && err != nil:
		t.Errorf("ParseProfileName(%q): %v; the pattern matches it", s, err)
		return false
	case err != nil && !errors.Is(err, ErrSyntax):
		t.Errorf("ParseProfileName(%q): %v, not wrapping ErrSyntax", s, err)
		return false
	case m == nil:
		return true
	}
	c, _ := strconv.Atoi(m[1])
	g, _ := strconv.Atoi(m[2])
	if want := (ProfileName{ComputeSlices: c, MemoryGB: g, Suffix: m[3]}); got != want {
		t.Errorf("ParseProfileName(%q) = %+v, the pattern's parts %+v", s, got, want)
		return false
	}
	return true
}

// TestParseProfileNameMatchesPattern: ParseProfileName, which matches by
// hand, accepts exactly the names ProfileNamePattern matches and gives
// their parts, on every string made of near misses of each part.
func TestParseProfileNameMatchesPattern(t *testing.T) {
	computes := []string{"", "0", "1", "3", "8", "9", "12", "a"}
	gs := []string{"", "g", "G", "gg"}
	dots := []string{"", ".", ","}
	memories := []string{"", "0", "01", "1", "5", "10", "96", "141", "999", "1000", "9999", "10000", "12345", "1a"}
	gbs := []string{"", "g", "gb", "GB", "gbb", "b"}
	suffixes := []string{"", "+me", "-me", "+me.all", "+gfx", "+mex", "+me.al", "+me.", "+", "me", "+ME", "-gfx", "+gfx+me", " "}
	accepted, total := 0, 0
	for _, c := range computes {
		for _, g := range gs {
			for _, d := range dots {
				for _, mem := range memories {
					for _, gb := range gbs {
						for _, suf := range suffixes {
							s := c + g + d + mem + gb + suf
							if !checkAgainstPattern(t, s) {
								return
							}
							total++
							if profileNamePatternRE.MatchString(s) {
								accepted++
							}
						}
					}
				}
			}
		}
	}
	if accepted == 0 || accepted == total {
		t.Fatalf("%d of %d strings are profile names; want some of each", accepted, total)
	}
}

func FuzzParseProfileName(f *testing.F) {
	for _, s := range []string{"1g.10gb", "3g.40gb+me", "7g.141gb", "1g.12gb+me.all", "2g.20gb+gfx", "1g.10gb-me", "9g.1gb", "1g.01gb", "1g.12345gb", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) { checkAgainstPattern(t, s) })
}
