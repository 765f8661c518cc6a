package harness

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Spawner starts child processes from one goroutine locked to its own OS thread. The
// control plane uses one, and so does test/cluster for the miglayout processes.
//
// Linux delivers the parent-death signal (Pdeathsig) when the *thread* that forked the child
// exits, not the process; a Go runtime thread can exit under a goroutine that called
// LockOSThread and returned, which would kill a healthy child mid-test. Forking from a
// dedicated, locked thread that lives until Close makes the signal mean "the test binary
// died" (or, as a last resort after Close, "the spawner's owner is done").
type Spawner struct {
	reqs      chan spawnReq
	quit      chan struct{}
	closeOnce sync.Once
}

type spawnReq struct {
	cmd  *exec.Cmd
	errc chan error
}

// ErrSpawnerClosed is the error of Start (and Run) after Close.
var ErrSpawnerClosed = errors.New("spawner closed")

// NewSpawner starts a spawner's thread. Close it when every child it started is stopped.
func NewSpawner() *Spawner {
	s := &Spawner{reqs: make(chan spawnReq), quit: make(chan struct{})}
	go func() {
		runtime.LockOSThread()
		// No UnlockOSThread: when this goroutine returns the thread exits, and the kernel
		// sends SIGKILL to any child still alive.
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

// Start starts cmd from the spawner's thread (cmd.Start there); after Close it returns
// ErrSpawnerClosed. A cmd whose SysProcAttr sets Pdeathsig dies with that thread.
func (s *Spawner) Start(cmd *exec.Cmd) error {
	errc := make(chan error, 1)
	select {
	case s.reqs <- spawnReq{cmd: cmd, errc: errc}:
	case <-s.quit:
		return ErrSpawnerClosed
	}
	return <-errc
}

// Close ends the spawner's thread; the kernel then kills (SIGKILL) every child it started
// with a parent-death signal that is still alive. Safe to call more than once.
func (s *Spawner) Close() { s.closeOnce.Do(func() { close(s.quit) }) }

// RunOptions are the optional settings of Spawner.Run.
type RunOptions struct {
	// Env is the child's environment; nil means ChildEnv().
	Env []string
	// Append keeps what the log file holds (a process started again appends to its log)
	// and starts each run's header line with the time; otherwise the log is truncated.
	Append bool
}

// Run starts bin with args from the spawner's thread, in its own process group (Stop
// signals the whole group) and with SIGKILL as its parent-death signal (it dies with the
// test binary). Its stdout and stderr go to logPath, after a "# bin args" header line;
// name names it in errors.
func (s *Spawner) Run(name, bin, logPath string, args []string, opts RunOptions) (*Process, error) {
	flags := os.O_CREATE | os.O_WRONLY | os.O_TRUNC
	if opts.Append {
		flags = os.O_CREATE | os.O_WRONLY | os.O_APPEND
	}
	logFile, err := os.OpenFile(logPath, flags, 0o644)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.Stdin = nil
	cmd.Env = opts.Env
	if cmd.Env == nil {
		cmd.Env = ChildEnv()
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Setpgid:   true,            // own process group: Stop signals the whole group
		Pdeathsig: syscall.SIGKILL, // die with the test binary
	}
	if opts.Append {
		fmt.Fprintf(logFile, "# %s %s %s\n", time.Now().Format(time.RFC3339Nano), bin, strings.Join(args, " "))
	} else {
		fmt.Fprintf(logFile, "# %s %s\n", bin, strings.Join(args, " "))
	}
	if err := s.Start(cmd); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	p := &Process{name: name, cmd: cmd, logPath: logPath, done: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		logFile.Close()
		close(p.done)
	}()
	return p, nil
}

// ChildEnv is the environment for a child process: ours, without the variables that would
// point it at another cluster or change the Go runtime under it (KUBECONFIG, GODEBUG,
// GOTRACEBACK, GOMAXPROCS) and without the variables named in drop; a name in drop that
// ends in "*" drops every variable with that prefix ("ETCD_*").
func ChildEnv(drop ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "KUBECONFIG", "GODEBUG", "GOTRACEBACK", "GOMAXPROCS":
			continue
		}
		if !dropped(k, drop) {
			env = append(env, kv)
		}
	}
	return env
}

func dropped(key string, drop []string) bool {
	for _, d := range drop {
		if prefix, ok := strings.CutSuffix(d, "*"); (ok && strings.HasPrefix(key, prefix)) || key == d {
			return true
		}
	}
	return false
}

// componentEnv is the environment of the control-plane components: ChildEnv, and no
// etcd settings (etcd reads every ETCD_* variable as a flag).
func componentEnv() []string { return ChildEnv("ETCDCTL_API", "ETCD_*") }

// Process is a child process started by Spawner.Run.
type Process struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	done    chan struct{} // closed when the process has exited
	waitErr error         // valid after done
	stopped atomic.Bool   // Stop was called
}

// Name is the name given to Run.
func (p *Process) Name() string { return p.name }

// Pid is the process id (also its process group id).
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// LogPath is the file that receives the process's output.
func (p *Process) LogPath() string { return p.logPath }

// Done is closed when the process has exited.
func (p *Process) Done() <-chan struct{} { return p.done }

// Exited reports whether the process has exited.
func (p *Process) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// WaitErr is how the process ended (exec.Cmd.Wait's error); nil while it runs.
func (p *Process) WaitErr() error {
	if !p.Exited() {
		return nil
	}
	return p.waitErr
}

// Stop sends SIGTERM to the process group, then SIGKILL after grace (grace <= 0: SIGKILL
// at once), and waits (up to 10s after the SIGKILL) for the exit. It marks the process
// Stopped even if it had already exited.
func (p *Process) Stop(grace time.Duration) {
	p.stopped.Store(true)
	if p.Exited() {
		return
	}
	if grace > 0 {
		_ = syscall.Kill(-p.Pid(), syscall.SIGTERM)
		select {
		case <-p.done:
			return
		case <-time.After(grace):
		}
	}
	_ = syscall.Kill(-p.Pid(), syscall.SIGKILL)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
	}
}

// Stopped reports whether Stop was called: an exit on purpose, not a crash.
func (p *Process) Stopped() bool { return p.stopped.Load() }

// ExitError describes why the process ended, with the last 30 lines of its log. Call it
// once the process has exited.
func (p *Process) ExitError() error {
	return fmt.Errorf("%s exited (%v); last lines of %s:\n%s", p.name, p.WaitErr(), p.logPath, TailFile(p.logPath, 30))
}

// exitError is ExitError, joined with errPortConflict when the component could not bind
// its port.
func exitError(p *Process) error {
	err := p.ExitError()
	if b, _ := readTail(p.logPath, 64<<10); bytes.Contains(b, []byte("address already in use")) {
		err = errors.Join(errPortConflict, err)
	}
	return err
}

var errPortConflict = errors.New("port taken by another process between choosing and binding it")

// readTail returns up to the last max bytes of a file.
func readTail(path string, max int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	off := st.Size() - max
	if off < 0 {
		off = 0
	}
	b, _ := io.ReadAll(io.NewSectionReader(f, off, st.Size()-off))
	return b, nil
}

// TailFile returns the last n lines of a file (within its last 256 KiB), each indented by
// four spaces, for error messages; "    (error)" when the file cannot be read.
func TailFile(path string, n int) string {
	b, err := readTail(path, 256<<10)
	if err != nil {
		return "    (" + err.Error() + ")"
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return "    " + strings.Join(lines, "\n    ")
}
