package main

import (
	"fmt"
	"io"
	"strings"
	"unicode"
	"unicode/utf8"
)

// printable is a writer that escapes, in what it is given, every control
// character but newline and tab ("\x1b" for ESC, "\u202e" for a
// right-to-left override) and every byte that is not UTF-8, before passing
// it on to w. Status messages, product names and reasons come from the
// agents, which write their NodeMigLayout's status: a node's agent, or
// whoever holds its credentials, must not be able to move the cursor,
// rewrite lines or set the clipboard of the terminal of an administrator
// reading `kubectl miglayout status`.
type printable struct{ w io.Writer }

func (p printable) Write(b []byte) (int, error) {
	if _, err := io.WriteString(p.w, escapeControls(string(b))); err != nil {
		return 0, err
	}
	return len(b), nil
}

// escapeControls is s with its control characters but newline and tab, its
// bidirectional formatting characters and its bytes that are not UTF-8
// written as Go escapes.
func escapeControls(s string) string {
	if !strings.ContainsFunc(s, needsEscape) && utf8.ValidString(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case needsEscape(r) && r < 0x80:
			fmt.Fprintf(&b, `\x%02x`, r)
		case needsEscape(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteRune(r)
		}
		i += size
	}
	return b.String()
}

func needsEscape(r rune) bool {
	return r != '\n' && r != '\t' && (unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r))
}
