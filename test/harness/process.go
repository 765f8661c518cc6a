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
	"syscall"
	"time"
)

// spawner starts child processes from one goroutine locked to its own OS thread.
//
// Linux delivers the parent-death signal (Pdeathsig) when the *thread* that forked the child
// exits, not the process; a Go runtime thread can exit under a goroutine that called
// LockOSThread and returned, which would kill a healthy control plane mid-test. Forking from
// a dedicated, locked thread that lives until Stop makes the signal mean "the test binary
// died" (or, as a last resort after Stop, "the harness is done").
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

func (s *spawner) start(cmd *exec.Cmd) error {
	errc := make(chan error, 1)
	s.reqs <- spawnReq{cmd: cmd, errc: errc}
	return <-errc
}

func (s *spawner) close() { close(s.quit) }

// process is one running control-plane component.
type process struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	logFile *os.File
	done    chan struct{} // closed when the process has exited
	waitErr error         // valid after done
}

func (s *spawner) run(name, bin, logPath string, args []string) (*process, error) {
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.Stdin = nil
	cmd.Env = childEnv()
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Setpgid:   true,            // own process group: Stop signals the whole group
		Pdeathsig: syscall.SIGKILL, // die with the test binary
	}
	fmt.Fprintf(logFile, "# %s %s\n", bin, strings.Join(args, " "))
	if err := s.start(cmd); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	p := &process{name: name, cmd: cmd, logPath: logPath, logFile: logFile, done: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		logFile.Close()
		close(p.done)
	}()
	return p, nil
}

// childEnv is the environment of the components: ours, without variables that would point
// them at another cluster or change the Go runtime under them.
func childEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "KUBECONFIG", "GODEBUG", "GOTRACEBACK", "GOMAXPROCS", "ETCDCTL_API":
			continue
		}
		if strings.HasPrefix(k, "ETCD_") { // etcd reads every ETCD_* variable as a flag
			continue
		}
		env = append(env, kv)
	}
	return env
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

// stop sends SIGTERM to the process group, then SIGKILL after grace.
func (p *process) stop(grace time.Duration) {
	if p.exited() {
		return
	}
	_ = syscall.Kill(-p.pid(), syscall.SIGTERM)
	select {
	case <-p.done:
		return
	case <-time.After(grace):
	}
	_ = syscall.Kill(-p.pid(), syscall.SIGKILL)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
	}
}

// exitError describes why the process ended, with the tail of its log.
func (p *process) exitError() error {
	err := fmt.Errorf("%s exited (%v); last lines of %s:\n%s", p.name, p.waitErr, p.logPath, tailFile(p.logPath, 30))
	if bytes.Contains(readTail(p.logPath, 64<<10), []byte("address already in use")) {
		err = errors.Join(errPortConflict, err)
	}
	return err
}

var errPortConflict = errors.New("port taken by another process between choosing and binding it")

// readTail returns up to the last max bytes of a file.
func readTail(path string, max int64) []byte {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil
	}
	off := st.Size() - max
	if off < 0 {
		off = 0
	}
	b, _ := io.ReadAll(io.NewSectionReader(f, off, st.Size()-off))
	return b
}

// tailFile returns the last n lines of a file, indented for error messages.
func tailFile(path string, n int) string {
	b := readTail(path, 64<<10)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return "    " + strings.Join(lines, "\n    ")
}
