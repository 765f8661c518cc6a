// Command testcluster runs the test control plane by hand, for debugging and demos.
//
//	go run ./test/harness/cmd/testcluster up --state DIR   # foreground until SIGINT/SIGTERM
//	go run ./test/harness/cmd/testcluster down --state DIR # stops the one running from DIR
//
// `up` writes DIR/kubeconfig (admin), DIR/testcluster.pid and DIR/logs/<component>.log.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/miglayout/miglayout/pkg/managerrun"
	"github.com/miglayout/miglayout/test/harness"
)

const pidFile = "testcluster.pid"

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	fs := flag.NewFlagSet(os.Args[1], flag.ExitOnError)
	state := fs.String("state", "test/.state/testcluster", "state directory (kubeconfig, logs, pids)")
	bin := fs.String("bin", "", "directory with the control-plane binaries (default: $"+harness.EnvBinDir+" or the make testbin cache)")
	_ = fs.Parse(os.Args[2:])
	if err := managerrun.NoArgs(fs.Args()); err != nil {
		fmt.Fprintf(os.Stderr, "testcluster %s: %v\n", os.Args[1], err)
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "up":
		err = up(*state, *bin)
	case "down":
		err = down(*state)
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "testcluster:", err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: testcluster up|down [--state DIR] [--bin DIR]")
	os.Exit(2)
}

func up(state, bin string) error {
	state, err := filepath.Abs(state)
	if err != nil {
		return err
	}
	if pid, ok := runningPid(state); ok {
		return fmt.Errorf("already running from %s (pid %d); run: testcluster down --state %s", state, pid, state)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cp, err := harness.Start(ctx, harness.Options{BinDir: bin, StateDir: state, Progress: os.Stderr})
	if err != nil {
		return err
	}
	defer cp.Stop()
	if err := os.WriteFile(filepath.Join(state, pidFile), []byte(strconv.Itoa(os.Getpid())+"\n"), 0o644); err != nil {
		return err
	}
	defer os.Remove(filepath.Join(state, pidFile))
	fmt.Printf("export KUBECONFIG=%s\n", cp.Kubeconfig())
	fmt.Fprintf(os.Stderr, "testcluster: logs in %s; Ctrl-C or `go run ./test/harness/cmd/testcluster down --state %s` stops it\n", cp.LogDir(), state)
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			fmt.Fprintln(os.Stderr, "testcluster: stopping")
			return cp.Stop()
		case <-tick.C:
			if err := cp.Exited(); err != nil {
				return err
			}
		}
	}
}

func down(state string) error {
	state, err := filepath.Abs(state)
	if err != nil {
		return err
	}
	if pid, ok := runningPid(state); ok {
		if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
			return err
		}
		for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
			if _, ok := runningPid(state); !ok {
				break
			}
		}
	}
	// Whatever is left (the up process was SIGKILLed, say): stop the components directly.
	var errs []error
	for name, pid := range harness.LivePids(state) {
		fmt.Fprintf(os.Stderr, "testcluster: killing leftover %s (pid %d)\n", name, pid)
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
			errs = append(errs, err)
		}
	}
	if len(errs) == 0 {
		_ = os.Remove(filepath.Join(state, harness.PidsFile))
		_ = os.Remove(filepath.Join(state, pidFile))
	}
	return errors.Join(errs...)
}

// runningPid returns the pid of the `up` process serving state, if it is still alive.
func runningPid(state string) (int, bool) {
	b, err := os.ReadFile(filepath.Join(state, pidFile))
	if err != nil {
		return 0, false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return 0, false
	}
	if err := syscall.Kill(pid, 0); err != nil {
		return 0, false
	}
	cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	return pid, strings.Contains(string(cmdline), "testcluster")
}
