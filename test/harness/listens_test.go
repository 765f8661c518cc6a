package harness

import (
	"errors"
	"net"
	"os"
	"testing"
)

// TestListensOn: a port this process listens on is told from one it does
// not (another process's, or none).
func TestListensOn(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port
	if ok, err := listensOn(os.Getpid(), port); err != nil || !ok {
		t.Errorf("listensOn(self, %d) = %v, %v; want true", port, ok, err)
	}
	free, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	freePort := free.Addr().(*net.TCPAddr).Port
	free.Close()
	if ok, err := listensOn(os.Getpid(), freePort); err != nil || ok {
		t.Errorf("listensOn(self, %d), a port closed, = %v, %v; want false", freePort, ok, err)
	}
	// A health check that answers proves nothing of who listens.
	p := &Process{name: "stand-in"}
	if err := ownsPortOf(p, os.Getpid(), freePort, func() error { return nil }); err == nil {
		t.Error("ownsPort passed for a port the process does not listen on")
	}
	if err := ownsPortOf(p, os.Getpid(), port, func() error { return nil }); err != nil {
		t.Errorf("ownsPort failed for the process's own port: %v", err)
	}
	wantErr := errors.New("not healthy")
	if err := ownsPortOf(p, os.Getpid(), port, func() error { return wantErr }); !errors.Is(err, wantErr) {
		t.Errorf("ownsPort returned %v, want the check's error", err)
	}
}
