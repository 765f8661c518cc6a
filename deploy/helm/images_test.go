package helm

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

// dockerfile is deploy/images/Dockerfile read into its stages: no Docker
// engine runs where the tests do, so what the images hold is checked from
// the file and by building its build stage's commands in a tree holding only
// what the build stage copies.
type dockerfile struct {
	stages map[string][]instruction // by the name after AS
}

type instruction struct {
	cmd  string // upper case: FROM, COPY, RUN, USER, ENTRYPOINT, ...
	args string
}

func readDockerfile(t *testing.T) dockerfile {
	t.Helper()
	f, err := os.Open(filepath.Join(repoRoot, "deploy/images/Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	d := dockerfile{stages: map[string][]instruction{}}
	var stage, line string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		text := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(text, "#") || (text == "" && line == "") {
			continue
		}
		if cont, ok := strings.CutSuffix(text, `\`); ok {
			line += cont + " "
			continue
		}
		line += text
		cmd, args, _ := strings.Cut(line, " ")
		line = ""
		in := instruction{cmd: strings.ToUpper(cmd), args: strings.TrimSpace(args)}
		if in.cmd == "FROM" {
			fields := strings.Fields(in.args)
			if len(fields) != 3 || !strings.EqualFold(fields[1], "AS") {
				t.Fatalf("FROM %s: every stage must be named", in.args)
			}
			stage = fields[2]
		}
		if stage != "" {
			d.stages[stage] = append(d.stages[stage], in)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return d
}

// last is the argument of the stage's last instruction cmd ("" if none).
func (d dockerfile) last(stage, cmd string) string {
	var out string
	for _, in := range d.stages[stage] {
		if in.cmd == cmd {
			out = in.args
		}
	}
	return out
}

// TestImagesRunTheChartsContainers: each component's image runs the command
// of its name (the chart gives only args, so the image's ENTRYPOINT is the
// command), built from cmd/<name>, and the controller image's user is the one
// the chart's pod security context runs it as.
func TestImagesRunTheChartsContainers(t *testing.T) {
	d := readDockerfile(t)
	r := render(t, nil)
	dep := convert[appsv1.Deployment](t, find(t, r, "Deployment", "miglayout-controller"))
	ds := convert[appsv1.DaemonSet](t, find(t, r, "DaemonSet", "miglayout-agent"))
	build := d.last("build", "RUN")
	for stage, pod := range map[string]corev1.PodSpec{"controller": dep.Spec.Template.Spec, "agent": ds.Spec.Template.Spec} {
		name := "miglayout-" + stage
		c := pod.Containers[0]
		if !strings.Contains(c.Image, "/"+name+":") {
			t.Errorf("%s: chart image %q is not named %s", stage, c.Image, name)
		}
		if len(c.Command) != 0 {
			t.Errorf("%s: chart sets command %q; the image's ENTRYPOINT is the command", stage, c.Command)
		}
		var entry []string
		if err := json.Unmarshal([]byte(d.last(stage, "ENTRYPOINT")), &entry); err != nil || len(entry) != 1 || entry[0] != "/usr/bin/"+name {
			t.Errorf("%s stage: ENTRYPOINT %q (%v), want [\"/usr/bin/%s\"]", stage, d.last(stage, "ENTRYPOINT"), err, name)
		}
		if !strings.Contains(build, "./cmd/"+name) {
			t.Errorf("build stage does not build ./cmd/%s: %s", name, build)
		}
		if _, err := os.Stat(filepath.Join(repoRoot, "cmd", name, "main.go")); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	user, _, _ := strings.Cut(d.last("controller", "USER"), ":")
	uid, err := strconv.ParseInt(user, 10, 64)
	psc := dep.Spec.Template.Spec.SecurityContext
	if err != nil || psc == nil || psc.RunAsUser == nil || *psc.RunAsUser != uid || uid == 0 {
		t.Errorf("controller image USER %q; chart runs it as %+v: want the same non-root numeric user", user, psc)
	}
}

// TestImageBuildStageBuilds runs the build stage's go build in a directory
// holding only go.mod, go.sum and what the stage copies, so an image build
// cannot miss a package or an embedded file the commands need.
func TestImageBuildStageBuilds(t *testing.T) {
	if testing.Short() {
		t.Skip("builds both commands")
	}
	d := readDockerfile(t)
	b, err := os.ReadFile(filepath.Join(repoRoot, "deploy/images/Dockerfile.dockerignore"))
	if err != nil {
		t.Fatal(err)
	}
	// The ignore file excludes everything, then lets through what is built.
	var ignore []string
	for _, l := range strings.Split(string(b), "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			ignore = append(ignore, l)
		}
	}
	if len(ignore) == 0 || ignore[0] != "*" {
		t.Fatalf("Dockerfile.dockerignore %q: want * first, then the folders the build copies", ignore)
	}
	dir := t.TempDir()
	for _, in := range d.stages["build"] {
		if in.cmd != "COPY" {
			continue
		}
		fields := strings.Fields(in.args)
		for _, src := range fields[:len(fields)-1] {
			if strings.HasPrefix(src, "--") {
				t.Fatalf("COPY %s: the build stage copies from the context only", in.args)
			}
			if !slices.Contains(ignore, "!"+src) {
				t.Errorf("COPY %s: Dockerfile.dockerignore (%q) leaves it out of the build context", src, ignore)
			}
			if err := os.CopyFS(filepath.Join(dir, src), os.DirFS(filepath.Join(repoRoot, src))); err != nil {
				// a file, not a folder
				b, rerr := os.ReadFile(filepath.Join(repoRoot, src))
				if rerr != nil {
					t.Fatalf("copying %s: %v", src, err)
				}
				if err := os.WriteFile(filepath.Join(dir, src), b, 0o644); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	var pkgs []string
	for _, f := range strings.Fields(d.last("build", "RUN")) {
		if strings.HasPrefix(f, "./") {
			pkgs = append(pkgs, f)
		}
	}
	if len(pkgs) == 0 || !slices.Contains(pkgs, "./cmd/miglayout-agent") {
		t.Fatalf("no packages in the build stage's RUN: %s", d.last("build", "RUN"))
	}
	// Built as the stage builds them (cgo on), into the test's directory
	// rather than the image's /out.
	cmd := exec.Command("go", append([]string{"build", "-o", t.TempDir() + "/"}, pkgs...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=1", "CGO_CFLAGS=-Wno-deprecated-declarations", "GOFLAGS=-mod=readonly")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %s in a tree with only go.mod, go.sum and the copied folders: %v\n%s", pkgs, err, out)
	}
}
