package fullstack

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// freeLocalAddr is a loopback address with a port no listener holds now.
func freeLocalAddr() string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// TestAgentReadyz: a running agent's /readyz passes both its checks: its
// first pass published the node's pool, and the node's kubelet (here the
// stand-in one, through the agent's registration socket) registered its DRA
// plugin.
func TestAgentReadyz(t *testing.T) {
	// The agent is ready once its first pass has returned, which is after
	// the pool it published is served.
	checkReadyz(t, "node "+nodeH+"'s agent", nodeHHealthAddr, "[+]readyz ok", "[+]kubelet-registration ok")
}

// TestControllerReadyz: the running controller's /readyz passes its check
// that the informer cache has synced (a controller not ready before it
// has).
func TestControllerReadyz(t *testing.T) {
	checkReadyz(t, "the controller", controllerHealthAddr, "[+]informer-cache ok")
}

// checkReadyz waits for what (serving at addr) to answer /readyz with
// 200 OK, and checks that its verbose answer lists each of checks.
func checkReadyz(t *testing.T, what, addr string, checks ...string) {
	t.Helper()
	var status string
	var body []byte
	err := wait.PollUntilContextTimeout(t.Context(), 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/readyz?verbose", nil)
		if err != nil {
			return false, err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			status = err.Error()
			return false, nil
		}
		defer resp.Body.Close()
		status = resp.Status
		body, err = io.ReadAll(resp.Body)
		return err == nil && resp.StatusCode == http.StatusOK, nil
	})
	if err != nil {
		t.Fatalf("/readyz of %s: %s, want 200 OK:\n%s", what, status, body)
	}
	for _, check := range checks {
		if !strings.Contains(string(body), check) {
			t.Errorf("/readyz?verbose of %s lacks %q:\n%s", what, check, body)
		}
	}
}
