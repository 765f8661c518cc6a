package main

import "testing"

// TestNearestName: the suggestion for a misspelt name is a candidate equal
// but for case, else the first of the closest candidates within an edit
// distance of 3; none beyond.
func TestNearestName(t *testing.T) {
	for _, tc := range []struct {
		s          string
		candidates []string
		want       string
	}{
		{"Profile", []string{"profiles", "profile"}, "profile"},
		{"profle", []string{"parentUUID", "profile"}, "profile"},
		{"abc", []string{"abx", "aby"}, "abx"},
		{"abcdefgh", []string{"abcdexyz"}, "abcdexyz"},
		{"abcdefgh", []string{"abcdwxyz"}, ""},
		{"x", nil, ""},
	} {
		if got := nearest(tc.s, tc.candidates); got != tc.want {
			t.Errorf("nearest(%q, %q) = %q, want %q", tc.s, tc.candidates, got, tc.want)
		}
	}
}
