package harness

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// listensOn reports whether process pid holds a socket listening on TCP
// port of loopback or any address, read from procfs (/proc/PID/fd's
// socket inodes against /proc/PID/net/tcp and tcp6, LISTEN state 0A): a
// component's health check answered on its port proves nothing where
// another process took the port between freePorts choosing it and the
// component binding it (go test runs packages' control planes side by
// side). The error says what could not be read.
func listensOn(pid, port int) (bool, error) {
	inodes := map[string]bool{}
	fds, err := os.ReadDir(filepath.Join("/proc", strconv.Itoa(pid), "fd"))
	if err != nil {
		return false, fmt.Errorf("reading the sockets of process %d: %w", pid, err)
	}
	for _, fd := range fds {
		target, err := os.Readlink(filepath.Join("/proc", strconv.Itoa(pid), "fd", fd.Name()))
		if err == nil && strings.HasPrefix(target, "socket:[") {
			inodes[strings.TrimSuffix(strings.TrimPrefix(target, "socket:["), "]")] = true
		}
	}
	hexPort := fmt.Sprintf(":%04X", port)
	for _, table := range []string{"tcp", "tcp6"} {
		f, err := os.Open(filepath.Join("/proc", strconv.Itoa(pid), "net", table))
		if err != nil {
			continue // tcp6 where IPv6 is off
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			// sl local_address rem_address st tx:rx tr:tm retrnsmt uid timeout inode
			fields := strings.Fields(sc.Text())
			if len(fields) < 10 || fields[3] != "0A" || !strings.HasSuffix(fields[1], hexPort) {
				continue
			}
			if inodes[fields[9]] {
				f.Close()
				return true, nil
			}
		}
		f.Close()
	}
	return false, nil
}

// ownsPort wraps a health check of process p's port: the check passes only
// where p itself listens on the port.
func ownsPort(p *Process, port int, check func() error) error {
	return ownsPortOf(p, p.Pid(), port, check)
}

func ownsPortOf(p *Process, pid, port int, check func() error) error {
	if err := check(); err != nil {
		return err
	}
	ok, err := listensOn(pid, port)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("port %d answers, but %s (pid %d) does not listen on it: another process took it", port, p.Name(), pid)
	}
	return nil
}
