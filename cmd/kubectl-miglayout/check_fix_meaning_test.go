package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCheckKeepsMeaning: check finds, and --fix rewrites, only what it can
// rewrite without changing what the manifest asks for.
func TestCheckKeepsMeaning(t *testing.T) {
	const claim = `apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: c}
spec:
  devices:
    requests:
    - name: r
`
	tests := map[string]struct {
		in string
		// fix: run with --fix (the output is the fixed manifest).
		fix bool
		// want and notWant are in the output; problems is how many check
		// reports (0: it exits 0).
		want, notWant []string
		problems      int
	}{
		"all in lower case means All": {
			in: claim + "      exactly: {deviceClassName: mig.miglayout.io, allocationMode: all}\n", fix: true,
			want: []string{"allocationMode: All"}, notWant: []string{"ExactCount"}, problems: 1,
		},
		"all in lower case with a count is left to the user": {
			in: claim + "      exactly: {deviceClassName: mig.miglayout.io, allocationMode: all, count: 2}\n", fix: true,
			want: []string{"allocationMode: all", "count: 2"}, problems: 1,
		},
		"exactcount in lower case means ExactCount": {
			in: claim + "      exactly: {deviceClassName: mig.miglayout.io, allocationMode: exactcount, count: 2}\n", fix: true,
			want: []string{"allocationMode: ExactCount", "count: 2"}, problems: 1,
		},
		"a mode of unclear meaning is not rewritten": {
			in: claim + "      exactly: {deviceClassName: mig.miglayout.io, allocationMode: Some}\n", fix: true,
			want: []string{"allocationMode: Some"}, problems: 1,
		},
		"flat values that clash with exactly are not rewritten": {
			in: claim + "      allocationMode: Count\n      exactly: {deviceClassName: mig.miglayout.io, allocationMode: All}\n", fix: true,
			want: []string{"allocationMode: All", "allocationMode: Count"}, notWant: []string{"ExactCount"}, problems: 2,
		},
		"pod-level claims keep their request": {
			in: `apiVersion: v1
kind: Pod
metadata: {name: p}
spec:
  resourceClaims: [{name: gpu, resourceClaimTemplateName: t}]
  resources: {claims: [{name: gpu, request: small}, {name: gpu, request: big}]}
  containers:
  - {name: app, image: x}
`, fix: true,
			want: []string{"request: small", "request: big"}, problems: 1,
		},
		"an attribute tested with has() is not read blindly": {
			in: claim + `      exactly:
        deviceClassName: mig.miglayout.io
        selectors:
        - cel: {expression: "!has(device.attributes['mig.miglayout.io'].addressingMode) || device.attributes['mig.miglayout.io'].addressingMode == 'HMM'"}
`,
			want: []string{"No problems found"},
		},
		"a misspelt attribute tested with has() is reported": {
			in: claim + `      exactly:
        deviceClassName: mig.miglayout.io
        selectors:
        - cel: {expression: "has(device.attributes['mig.miglayout.io'].profle) && device.attributes['mig.miglayout.io'].profle == '1g.10gb'"}
`,
			want: []string{"has() of it is false on every device", "device.attributes['mig.miglayout.io'].profile"}, problems: 1,
		},
		"an attribute read without has() is reported": {
			in: claim + `      exactly:
        deviceClassName: mig.miglayout.io
        selectors:
        - cel: {expression: "device.attributes['mig.miglayout.io'].addressingMode == 'HMM'"}
`,
			want: []string{"addressingMode"}, problems: 1,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			f := filepath.Join(t.TempDir(), "in.yaml")
			if err := os.WriteFile(f, []byte(tc.in), 0o600); err != nil {
				t.Fatal(err)
			}
			args := []string{"check", "--offline", "-f", f}
			if tc.fix {
				args = append(args, "--fix")
			}
			out, errOut, err := runWith(t, nil, args...)
			all := out + errOut
			for _, w := range tc.want {
				if !strings.Contains(all, w) {
					t.Errorf("output lacks %q:\n%s", w, all)
				}
			}
			for _, w := range tc.notWant {
				if strings.Contains(out, w) {
					t.Errorf("output has %q:\n%s", w, out)
				}
			}
			switch {
			case tc.problems == 0 && err != nil:
				t.Errorf("check failed: %v\n%s", err, all)
			case tc.problems > 0 && (err == nil || !strings.HasPrefix(err.Error(), plural(tc.problems, "problem"))):
				t.Errorf("check returned %v, want %d problem(s)\n%s", err, tc.problems, all)
			}
		})
	}
}
