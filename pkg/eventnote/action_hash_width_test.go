package eventnote

import (
	"fmt"
	"strings"
	"testing"
)

// Action always ends in "-" and exactly 8 hex digits, hashes that begin
// with zeros included (among 256 notes, some do), so actions keep one
// length and one form whatever the note.
func TestActionHashAlwaysEightHexDigits(t *testing.T) {
	short := 0
	for i := range 256 {
		note := fmt.Sprintf("gpu %d is blocked", i)
		a := Action("Plan", note)
		hash, ok := strings.CutPrefix(a, "Plan-")
		if !ok || len(hash) != 8 || strings.Trim(hash, "0123456789abcdef") != "" {
			t.Errorf("Action(Plan, %q) = %q, want Plan- and 8 lower-case hex digits", note, a)
		}
		if strings.HasPrefix(hash, "0") {
			short++
		}
	}
	if short == 0 {
		t.Errorf("no note of 256 hashed to a leading zero; the width of the hash went untested")
	}
}
