package cluster

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"syscall"
	"time"
)

// spawner starts child processes from one goroutine locked to its own OS thread, like
// test/harness: Linux delivers the parent-death signal when the thread that forked the
// child exits, so forking from a dedicated thread that lives until Stop makes SIGKILL reach
// the children exactly when the test binary (or demo) dies.
type spawner struct {
	reqs chan spawnReq
	quit chan struct{}
}

type spawnReq struct {
	cmd  *exec.Cmd
	errc chan error
}

func newSpawner() *spawner {
	s := &spawner{reqs: make(chan spawnReq), quit: make(chan struct{})}
	go func() {
		runtime.LockOSThread()
		// No UnlockOSThread: the thread exits with this goroutine, killing the children.
		for {
			select {
			case r := <-s.reqs:
				r.errc <- r.cmd.Start()
			case <-s.quit:
				return
			}
		}
	}()
	return s
}

func (s *spawner) start(cmd *exec.Cmd) error {
	errc := make(chan error, 1)
	select {
	case s.reqs <- spawnReq{cmd: cmd, errc: errc}:
	case <-s.quit:
		return fmt.Errorf("cluster stopped")
	}
	return <-errc
}

func (s *spawner) close() { close(s.quit) }

// process is one miglayout process (an agent or the controller).
type process struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	done    chan struct{} // closed when the process has exited
	waitErr error         // valid after done
	killed  bool          // stopped on purpose (Stop, KillAgent)
}

// run starts bin with args; its output is appended to logPath.
func (s *spawner) run(name, bin, logPath string, args, env []string) (*process, error) {
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.Env = env
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Setpgid:   true,            // own process group: stop signals the whole group
		Pdeathsig: syscall.SIGKILL, // die with the test binary
	}
	fmt.Fprintf(logFile, "# %s %s %s\n", time.Now().Format(time.RFC3339Nano), bin, strings.Join(args, " "))
	if err := s.start(cmd); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	p := &process{name: name, cmd: cmd, logPath: logPath, done: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		logFile.Close()
		close(p.done)
	}()
	return p, nil
}

func (p *process) pid() int { return p.cmd.Process.Pid }

func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stop sends SIGTERM to the process group, then SIGKILL after grace (0: SIGKILL at once),
// and waits for the exit.
func (p *process) stop(grace time.Duration) {
	p.killed = true
	if p.exited() {
		return
	}
	if grace > 0 {
		_ = syscall.Kill(-p.pid(), syscall.SIGTERM)
		select {
		case <-p.done:
			return
		case <-time.After(grace):
		}
	}
	_ = syscall.Kill(-p.pid(), syscall.SIGKILL)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
	}
}

func (p *process) exitError() error {
	return fmt.Errorf("%s exited (%v); last lines of %s:\n%s", p.name, p.waitErr, p.logPath, tailFile(p.logPath, 30))
}

// childEnv is our environment without variables that would point the child at another
// cluster or change its Go runtime, plus extra.
func childEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "KUBECONFIG", "GODEBUG", "GOTRACEBACK", "GOMAXPROCS", "NODE_NAME":
			continue
		}
		env = append(env, kv)
	}
	return append(env, extra...)
}

// tailFile returns the last n lines of a file, indented.
func tailFile(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return "    (" + err.Error() + ")"
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return "    (" + err.Error() + ")"
	}
	const max = 256 << 10
	off := max64(st.Size()-max, 0)
	b, _ := io.ReadAll(io.NewSectionReader(f, off, st.Size()-off))
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return "    " + strings.Join(lines, "\n    ")
}

func max64(a, b int64) int64 {
	if a > b {
		return a
	}
	return b
}
