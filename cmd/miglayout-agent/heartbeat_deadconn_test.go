package main

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
)

// leaseServer is an HTTPS server speaking HTTP/2 with just enough of the
// API for the heartbeat: the Node, and one Lease (get, create, update).
// Once stall is called, requests on the connections it has seen so far
// are never answered, while the connections stay open and HTTP/2 pings on
// them are still answered: a path that lost requests but not the
// connection, which only a request timeout and a new connection get past.
type leaseServer struct {
	srv *httptest.Server

	mu       sync.Mutex
	lease    *coordinationv1.Lease
	version  int
	seen     map[string]bool // remote addresses of connections seen
	stalled  map[string]bool // those seen before stall
	renewals []string        // remote address of each update that stored
}

func newLeaseServer(t *testing.T) *leaseServer {
	ls := &leaseServer{seen: map[string]bool{}}
	ls.srv = httptest.NewUnstartedServer(http.HandlerFunc(ls.serve))
	ls.srv.EnableHTTP2 = true
	ls.srv.StartTLS()
	t.Cleanup(ls.srv.Close)
	return ls
}

func (ls *leaseServer) config() *rest.Config {
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ls.srv.Certificate().Raw})
	// The server speaks JSON only.
	return &rest.Config{Host: ls.srv.URL, TLSClientConfig: rest.TLSClientConfig{CAData: ca},
		ContentConfig: rest.ContentConfig{ContentType: "application/json", AcceptContentTypes: "application/json"}}
}

func (ls *leaseServer) stall() {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	ls.stalled = map[string]bool{}
	for a := range ls.seen {
		ls.stalled[a] = true
	}
}

const (
	testLeasePath = "/apis/coordination.k8s.io/v1/namespaces/miglayout-system/leases"
	testLeaseName = "miglayout-agent-gpu-node-1"
)

func (ls *leaseServer) serve(w http.ResponseWriter, r *http.Request) {
	ls.mu.Lock()
	ls.seen[r.RemoteAddr] = true
	if ls.stalled[r.RemoteAddr] {
		ls.mu.Unlock()
		<-r.Context().Done() // the client gives up, or the server closes
		return
	}
	defer ls.mu.Unlock()
	reply := func(code int, obj any) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		_ = json.NewEncoder(w).Encode(obj)
	}
	notFound := func() {
		reply(http.StatusNotFound, &metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
			Status: metav1.StatusFailure, Reason: metav1.StatusReasonNotFound, Code: http.StatusNotFound})
	}
	store := func() (*coordinationv1.Lease, bool) {
		var l coordinationv1.Lease
		body, err := io.ReadAll(r.Body)
		if err != nil || json.Unmarshal(body, &l) != nil {
			reply(http.StatusBadRequest, &metav1.Status{Status: metav1.StatusFailure, Code: http.StatusBadRequest})
			return nil, false
		}
		ls.version++
		l.TypeMeta = metav1.TypeMeta{Kind: "Lease", APIVersion: "coordination.k8s.io/v1"}
		l.ResourceVersion = strconv.Itoa(ls.version)
		ls.lease = &l
		return &l, true
	}
	switch {
	case r.Method == http.MethodGet && r.URL.Path == "/api/v1/nodes/gpu-node-1":
		reply(http.StatusOK, &corev1.Node{TypeMeta: metav1.TypeMeta{Kind: "Node", APIVersion: "v1"},
			ObjectMeta: metav1.ObjectMeta{Name: "gpu-node-1", UID: "5e1f0c2a-1b3d-4e5f-8a9b-0c1d2e3f4a5b"}})
	case r.Method == http.MethodGet && r.URL.Path == testLeasePath+"/"+testLeaseName:
		if ls.lease == nil {
			notFound()
			return
		}
		reply(http.StatusOK, ls.lease)
	case r.Method == http.MethodPost && r.URL.Path == testLeasePath:
		if l, ok := store(); ok {
			reply(http.StatusCreated, l)
		}
	case r.Method == http.MethodPut && r.URL.Path == testLeasePath+"/"+testLeaseName:
		if l, ok := store(); ok {
			ls.renewals = append(ls.renewals, r.RemoteAddr)
			reply(http.StatusOK, l)
		}
	default:
		notFound()
	}
}

// renewedFrom reports whether a renewal came on a connection opened after
// stall.
func (ls *leaseServer) renewedFrom() (fresh bool, renewals int) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	for _, a := range ls.renewals {
		if ls.stalled != nil && !ls.stalled[a] {
			fresh = true
		}
	}
	return fresh, len(ls.renewals)
}

// TestHeartbeatRenewsPastAStalledConnection: once the heartbeat's
// connection stops carrying requests (it stays open, and answers HTTP/2
// pings, so client-go's health check never closes it), the heartbeat's own
// client times its renewals out and, the second failing, opens a new
// connection, and the Lease is renewed within its duration: the
// controller never sees the agent lost. With the manager's client (no
// request timeout) the first renewal waits for ever.
func TestHeartbeatRenewsPastAStalledConnection(t *testing.T) {
	const duration = 16 * time.Second
	ls := newLeaseServer(t)
	kube, err := heartbeatClient(ls.config(), duration)
	if err != nil {
		t.Fatal(err)
	}
	ctx := runHeartbeat(t, kube, duration)
	// The heartbeat is under way: its Lease created and renewed once.
	if err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, n := ls.renewedFrom()
		return n > 0, nil
	}); err != nil {
		t.Fatalf("the Lease was never renewed: %v", err)
	}
	ls.stall()
	stalled := time.Now()
	if err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, duration, true, func(ctx context.Context) (bool, error) {
		fresh, _ := ls.renewedFrom()
		return fresh, nil
	}); err != nil {
		t.Errorf("no renewal on a new connection within the Lease's %v after the connection stalled (waited %v): the Lease expires", duration, time.Since(stalled).Round(time.Second))
	}
}

// TestHeartbeatCreatesItsLeasePastAStalledConnection: a connection that
// stalls before the Lease exists (the agent's start, where the lease
// controller reads and creates the Lease and never counts a failure) is
// left too: the heartbeat's client closes its connections once two
// requests in a row failed, and the Lease is created within its duration.
func TestHeartbeatCreatesItsLeasePastAStalledConnection(t *testing.T) {
	const duration = 16 * time.Second
	ls := newLeaseServer(t)
	kube, err := heartbeatClient(ls.config(), duration)
	if err != nil {
		t.Fatal(err)
	}
	// The client's connection, opened and then stalled before the
	// heartbeat starts.
	if _, err := kube.CoreV1().Nodes().Get(t.Context(), "gpu-node-1", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
	ls.stall()
	stalled := time.Now()
	ctx := runHeartbeat(t, kube, duration)
	if err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, duration, true, func(context.Context) (bool, error) {
		ls.mu.Lock()
		defer ls.mu.Unlock()
		return ls.lease != nil, nil
	}); err != nil {
		t.Errorf("no Lease created within %v of a connection that stalled before it existed (waited %v)", duration, time.Since(stalled).Round(time.Second))
	}
}
