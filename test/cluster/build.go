package cluster

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"time"
)

// Binary names of the miglayout commands a cluster runs, and of the kubectl
// plugin its Kubectl finds.
const (
	AgentBinary      = "miglayout-agent"
	ControllerBinary = "miglayout-controller"
	PluginBinary     = "kubectl-miglayout"
)

// ModuleRoot returns the directory of miglayout's go.mod, found from the working
// directory upwards (tests run in their package directory, the demo in the repository).
func ModuleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && bytes.Contains(data, []byte("module github.com/miglayout/miglayout\n")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no miglayout go.mod above the working directory; set Options.ModuleRoot")
		}
		dir = parent
	}
}

// goBinary finds the go command: on PATH, else next to the toolchain that built us.
func goBinary() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	// The binary runs where it was built (go run, go test), so the root it
	// was built with is still there.
	//lint:ignore SA1019 see above
	return filepath.Join(runtime.GOROOT(), "bin", "go")
}

// buildBinaries builds the agent, the controller and the kubectl plugin into dir with one
// go build (the Go build cache makes a rebuild of unchanged sources take about a second).
func buildBinaries(ctx context.Context, moduleRoot, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 15*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, goBinary(), "build", "-o", dir+string(filepath.Separator),
		"./cmd/"+AgentBinary, "./cmd/"+ControllerBinary, "./cmd/"+PluginBinary)
	cmd.Dir = moduleRoot
	cmd.Env = append(os.Environ(), "CGO_ENABLED=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("go build ./cmd/%s ./cmd/%s ./cmd/%s: %w\n%s", AgentBinary, ControllerBinary, PluginBinary, err, out)
	}
	return nil
}

func executable(path string) bool {
	st, err := os.Stat(path)
	return err == nil && !st.IsDir() && st.Mode()&0o111 != 0
}
