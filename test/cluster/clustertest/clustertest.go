// Package clustertest holds the helpers of the tests that run against a whole test cluster
// (test/cluster): the TestMain of a package that one cluster serves (Main), and waiting
// helpers, MigLayout, pool, namespace, claim and pod helpers that fail the test with what
// they waited for and what they saw last.
//
// The helpers that talk to the cluster are methods of Env; the ones that only look at
// objects or simulator snapshots are functions. Helpers that fail the test take a
// testing.TB and must run in the test's goroutine.
package clustertest

import (
	"context"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/klog/v2"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"
	crlog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/miglayout/miglayout/api/v1alpha1"
	"github.com/miglayout/miglayout/test/cluster"
	"github.com/miglayout/miglayout/test/harness"
)

// EnvStateDir names the environment variable that keeps the state and logs of a run: Main
// uses $MIGLAYOUT_E2E_STATE/<package> as the cluster's StateDir.
const EnvStateDir = "MIGLAYOUT_E2E_STATE"

// Env is a running test cluster with its clients.
type Env struct {
	Cluster *cluster.Cluster
	// Client is the cluster's typed client (admin).
	Client kubernetes.Interface
	// CRC is a controller-runtime client (admin) that knows the built-in types and
	// miglayout's API.
	CRC crclient.Client
}

// NewEnv makes the clients of a started cluster. The controller-runtime
// client logs through klog (the test binary's flags), as the components do.
func NewEnv(c *cluster.Cluster) (*Env, error) {
	crlog.SetLogger(klog.Background())
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = v1alpha1.AddToScheme(scheme)
	crc, err := crclient.New(c.Config(), crclient.Options{Scheme: scheme})
	if err != nil {
		return nil, err
	}
	return &Env{Cluster: c, Client: c.Client(), CRC: crc}, nil
}

// Main is the body of the TestMain of a test package that one cluster serves:
//
//	func TestMain(m *testing.M) {
//		os.Exit(clustertest.Main(m, "e2e/auto", cluster.Options{Nodes: ...}, 80,
//			func(e *clustertest.Env) { env = e }))
//	}
//
// Without the control-plane binaries (`make testbin`) the run fails. Main starts the
// cluster with opts (within 15 minutes, as a cold Go build cache compiles the agent and
// the controller first); unless opts says otherwise, its StateDir is
// $MIGLAYOUT_E2E_STATE/<last element of name> when that variable is set (a temporary
// directory otherwise) and its progress goes to stderr. Then it hands the cluster to setup
// and runs the tests. The run fails when a process died during the tests; a failed run
// writes the last dumpLines lines of every log to stderr. The cluster is stopped before
// Main returns the exit code. name ("e2e/auto") starts Main's messages.
func Main(m *testing.M, name string, opts cluster.Options, dumpLines int, setup func(*Env)) int {
	if _, err := harness.BinDir(); err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		return 1
	}
	if state := os.Getenv(EnvStateDir); state != "" && opts.StateDir == "" {
		opts.StateDir = filepath.Join(state, path.Base(name))
	}
	if opts.Progress == nil {
		opts.Progress = os.Stderr
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	cl, err := cluster.Start(ctx, opts)
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: starting the cluster: %v\n", name, err)
		return 1
	}
	defer func() {
		if err := cl.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "%s: stopping the cluster: %v\n", name, err)
		}
	}()
	env, err := NewEnv(cl)
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		return 1
	}
	setup(env)
	code := m.Run()
	if err := cl.Exited(); err != nil {
		fmt.Fprintf(os.Stderr, "%s: a process died during the tests: %v\n", name, err)
		code = 1
	}
	if code != 0 {
		cl.DumpLogs(os.Stderr, dumpLines)
	}
	return code
}

// Context is a context of the test that ends after d (or with the test).
func Context(t testing.TB, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), d)
	t.Cleanup(cancel)
	return ctx
}

// Poll calls cond every 100ms until it is true; on timeout (or when ctx ends) it fails
// the test with what and the last detail cond returned.
func Poll(t testing.TB, ctx context.Context, timeout time.Duration, what string, cond func(ctx context.Context) (bool, string)) {
	t.Helper()
	var last string
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		ok, detail := cond(ctx)
		last = detail
		return ok, nil
	})
	if err != nil {
		t.Fatalf("waiting for %s: %v; last: %s", what, err, last)
	}
}
