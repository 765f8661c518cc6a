package main

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/miglayout/miglayout/api/v1alpha1"
)

func TestEscapeControls(t *testing.T) {
	tests := map[string]struct{ in, want string }{
		"plain":              {"GPU 0: in use\n\tnext", "GPU 0: in use\n\tnext"},
		"ANSI":               {"\x1b[2K\x1b[1AReady", `\x1b[2K\x1b[1AReady`},
		"OSC 52 clipboard":   {"\x1b]52;c;ZWNobw==\x07", `\x1b]52;c;ZWNobw==\x07`},
		"carriage return":    {"Failed\rReady ", `Failed\x0dReady `},
		"C1 control":         {"a\u009bb", `a\u009bb`},
		"bidi override":      {"x\u202ey", `x\u202ey`},
		"not UTF-8":          {"a\xffb", `a\xffb`},
		"other letters kept": {"Größe 3g.40gb", "Größe 3g.40gb"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var b strings.Builder
			if _, err := (printable{&b}).Write([]byte(tc.in)); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, b.String()); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestStatusEscapesAgentText: what an agent writes into its NodeMigLayout's
// status (a catalog mismatch here) reaches the terminal with its control
// characters escaped.
func TestStatusEscapesAgentText(t *testing.T) {
	objs := cluster(t)
	for _, o := range objs {
		if nml, ok := o.(*v1alpha1.NodeMigLayout); ok && nml.Name == "gpu-node-2" {
			nml.Status.GPUs[1].CatalogMismatches = []string{"\x1b[2K\x1b[1Aall Ready"}
		}
	}
	out, _, err := runWith(t, objs, "status", "gpu-node-2")
	if err != nil {
		t.Fatal(err)
	}
	if strings.ContainsRune(out, 0x1b) || !strings.Contains(out, `\x1b[2K\x1b[1Aall Ready`) {
		t.Errorf("status output carries the agent's escape sequence unescaped:\n%q", out)
	}
}
