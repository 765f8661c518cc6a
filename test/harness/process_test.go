package harness

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestChildEnvDropsNamesAndPrefixes(t *testing.T) {
	t.Setenv("KUBECONFIG", "/elsewhere")
	t.Setenv("ETCD_NAME", "x")
	t.Setenv("NODE_NAME", "n1")
	t.Setenv("MIGLAYOUT_KEEP", "1")
	env := ChildEnv("NODE_NAME", "ETCD_*")
	for _, kv := range env {
		if k, _, _ := strings.Cut(kv, "="); k == "KUBECONFIG" || k == "ETCD_NAME" || k == "NODE_NAME" {
			t.Errorf("ChildEnv kept %s", kv)
		}
	}
	if !slices.Contains(env, "MIGLAYOUT_KEEP=1") {
		t.Errorf("ChildEnv dropped MIGLAYOUT_KEEP")
	}
}

func TestSpawnerRunStopAndTail(t *testing.T) {
	s := NewSpawner()
	defer s.Close()
	log := filepath.Join(t.TempDir(), "sleep.log")
	for i := range 2 { // Append: the second run keeps the first one's output
		p, err := s.Run("sleep", "/bin/sh", log, []string{"-c", "echo hello; exec sleep 60"}, RunOptions{Append: true})
		if err != nil {
			t.Fatal(err)
		}
		if p.Exited() || p.Stopped() || p.Pid() <= 0 || p.Name() != "sleep" || p.LogPath() != log {
			t.Fatalf("fresh process: exited %v stopped %v pid %d", p.Exited(), p.Stopped(), p.Pid())
		}
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			if data, _ := os.ReadFile(log); strings.Count(string(data), "hello\n") == i+1 {
				break
			} else if time.Now().After(deadline) {
				t.Fatalf("no hello from run %d:\n%s", i, data)
			}
		}
		p.Stop(0)
		if !p.Exited() || !p.Stopped() || p.WaitErr() == nil {
			t.Fatalf("after Stop(0): exited %v stopped %v wait error %v", p.Exited(), p.Stopped(), p.WaitErr())
		}
		if err := p.ExitError(); !strings.Contains(err.Error(), "sleep exited") {
			t.Errorf("ExitError = %v", err)
		}
	}
	data, _ := os.ReadFile(log)
	if n := strings.Count(string(data), "# "); n != 2 || strings.Count(string(data), "hello\n") != 2 {
		t.Errorf("log has %d header lines, want 2, and two hellos:\n%s", n, data)
	}
	if got := TailFile(log, 1); got != "    hello" {
		t.Errorf("TailFile(log, 1) = %q", got)
	}
	if got := TailFile(filepath.Join(t.TempDir(), "none"), 3); !strings.HasPrefix(got, "    (open ") {
		t.Errorf("TailFile of a missing file = %q", got)
	}
	s.Close()
	s.Close()
	if _, err := s.Run("late", "/bin/true", log, nil, RunOptions{}); !errors.Is(err, ErrSpawnerClosed) {
		t.Errorf("Run after Close: %v, want ErrSpawnerClosed", err)
	}
}
