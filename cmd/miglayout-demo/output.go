package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/miglayout/miglayout/pkg/mig"
	"github.com/miglayout/miglayout/pkg/mig/nvmlsim"
)

// printLayouts prints each GPU's layout before and after (only the GPUs that changed
// when changedOnly), with note's text, if any, in a last column; it returns how many GPUs
// changed.
func (d *demo) printLayouts(before, after map[string]nvmlsim.State, changedOnly bool, note func(node string, gpu int, before, after string) string) int {
	tw := tabwriter.NewWriter(indent(d.out, "    "), 0, 2, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tGPU\tBEFORE\tAFTER\t")
	changed := 0
	for _, node := range []string{nodeA100, nodeH100} {
		for i, g := range after[node].GPUs {
			b, a := before[node].GPUs[i].Layout().String(), g.Layout().String()
			if a != b {
				changed++
			} else if changedOnly {
				continue
			}
			text := ""
			if note != nil {
				text = note(node, g.Index, b, a)
			}
			fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\n", node, g.Index, b, a, text)
		}
	}
	_ = tw.Flush()
	return changed
}

func (d *demo) snapshots() (map[string]nvmlsim.State, error) {
	out := map[string]nvmlsim.State{}
	for _, n := range []string{nodeA100, nodeH100} {
		sim, err := d.c.Sim(n)
		if err != nil {
			return nil, err
		}
		out[n] = sim.Snapshot()
	}
	return out, nil
}

func findDevice(st nvmlsim.State, uuid string) (mig.Device, bool) {
	for _, g := range st.GPUs {
		for _, gi := range g.GPUInstances {
			for _, ci := range gi.ComputeInstances {
				if ci.UUID == uuid {
					return mig.Device{Profile: gi.Profile, Start: gi.Placement.Start}, true
				}
			}
		}
	}
	return mig.Device{}, false
}

func layoutsOf(st nvmlsim.State) []string {
	var out []string
	for _, g := range st.GPUs {
		out = append(out, g.Layout().String())
	}
	return out
}

// kubectl runs the control plane's kubectl against the cluster and prints the command and
// its output.
func (d *demo) kubectl(ctx context.Context, args ...string) error {
	shown := make([]string, len(args))
	for i, a := range args {
		shown[i] = a
		if strings.ContainsAny(a, " {}[]\"'") {
			shown[i] = "'" + a + "'"
		}
	}
	d.printf("\n  $ kubectl %s\n", strings.Join(shown, " "))
	out, err := d.c.Kubectl(ctx, args...)
	for _, l := range strings.Split(strings.TrimRight(string(out), "\n"), "\n") {
		d.printf("    %s\n", l)
	}
	return err
}

func (d *demo) printYAML(s string) {
	for _, l := range strings.Split(strings.TrimRight(s, "\n"), "\n") {
		if strings.HasPrefix(l, "#") {
			continue
		}
		d.printf("    %s\n", l)
	}
}

func (d *demo) printf(format string, args ...any) { fmt.Fprintf(d.out, format, args...) }

// workloadDocs returns the documents of workload.yaml whose kind or name is one of keys.
func workloadDocs(keys ...string) string {
	var out []string
	for _, doc := range strings.Split(workload, "\n---\n") {
		for _, k := range keys {
			if strings.Contains(doc, "\nkind: "+k+"\n") || strings.Contains(doc, "\n  name: "+k+"\n") {
				out = append(out, strings.TrimSpace(stripComments(doc)))
				break
			}
		}
	}
	return strings.Join(out, "\n---\n") + "\n"
}

func stripComments(doc string) string {
	var keep []string
	for _, l := range strings.Split(doc, "\n") {
		if !strings.HasPrefix(l, "#") {
			keep = append(keep, l)
		}
	}
	return strings.Join(keep, "\n")
}

func strAttr(a map[resourceapi.QualifiedName]resourceapi.DeviceAttribute, name resourceapi.QualifiedName) string {
	if v, ok := a[name]; ok && v.StringValue != nil {
		return *v.StringValue
	}
	return ""
}

func intAttr(a map[resourceapi.QualifiedName]resourceapi.DeviceAttribute, name resourceapi.QualifiedName) string {
	if v, ok := a[name]; ok && v.IntValue != nil {
		return fmt.Sprint(*v.IntValue)
	}
	return ""
}

func executable(path string) bool {
	st, err := os.Stat(path)
	return err == nil && !st.IsDir() && st.Mode()&0o111 != 0
}

func joinPIDs(pids []uint32) string {
	var s []string
	for _, p := range pids {
		s = append(s, fmt.Sprint(p))
	}
	return strings.Join(s, ", ")
}

func since(t time.Time) string { return time.Since(t).Round(100 * time.Millisecond).String() }

func indentRest(s string) string { return strings.ReplaceAll(s, "\n", "\n  ") }

// indent returns a writer that prefixes every line written to w.
func indent(w io.Writer, prefix string) io.Writer { return &indenter{w: w, prefix: prefix, bol: true} }

type indenter struct {
	mu     sync.Mutex
	w      io.Writer
	prefix string
	bol    bool
}

func (in *indenter) Write(p []byte) (int, error) {
	in.mu.Lock()
	defer in.mu.Unlock()
	var b strings.Builder
	for _, c := range string(p) {
		if in.bol {
			b.WriteString(in.prefix)
			in.bol = false
		}
		b.WriteRune(c)
		if c == '\n' {
			in.bol = true
		}
	}
	if _, err := io.WriteString(in.w, b.String()); err != nil {
		return 0, err
	}
	return len(p), nil
}
