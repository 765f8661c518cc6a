// Package e2e runs miglayout scenarios against a real control plane (test/harness): one
// etcd + kube-apiserver + kube-scheduler + kube-controller-manager per package run, started
// in TestMain. The binaries come from `make testbin`; without them every test here FAILS.
//
// Set MIGLAYOUT_E2E_STATE=DIR to keep the state and logs of a run in DIR.
package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/miglayout/miglayout/test/harness"
)

var (
	cp     *harness.ControlPlane
	client kubernetes.Interface
)

func TestMain(m *testing.M) { os.Exit(runMain(m)) }

func runMain(m *testing.M) int {
	bin, err := harness.BinDir()
	if err != nil {
		fmt.Fprintf(os.Stderr, "e2e: %v\n", err)
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cp, err = harness.Start(ctx, harness.Options{
		BinDir:   bin,
		StateDir: os.Getenv("MIGLAYOUT_E2E_STATE"),
		// MIGLAYOUT_E2E_GATES runs the package against other feature
		// gates, e.g. DRAResourceClaimGranularStatusAuthorization=false
		// to have the agent admission policy, not the API server's
		// authorizer, confine the agents' claim status writes.
		FeatureGates: os.Getenv("MIGLAYOUT_E2E_GATES"),
		Progress:     os.Stderr,
	})
	if err != nil {
		fmt.Fprintf(os.Stderr, "e2e: starting control plane: %v\n", err)
		return 1
	}
	defer func() {
		if err := cp.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "e2e: stopping control plane: %v\n", err)
		}
	}()
	client, err = kubernetes.NewForConfig(cp.Config())
	if err != nil {
		fmt.Fprintf(os.Stderr, "e2e: %v\n", err)
		return 1
	}
	code := m.Run()
	if pluginBin != "" {
		_ = os.RemoveAll(filepath.Dir(pluginBin)) // the kubectl plugin runPlugin built
	}
	if err := cp.Exited(); err != nil {
		fmt.Fprintf(os.Stderr, "e2e: a control-plane component died during the tests: %v\n", err)
		code = 1
	}
	if code != 0 {
		cp.DumpLogs(os.Stderr, 40)
	}
	return code
}
