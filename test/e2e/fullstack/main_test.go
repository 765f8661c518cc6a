// Package fullstack runs miglayout end to end on one machine: the real control plane
// (test/harness), miglayout-controller and one miglayout-agent process per node on
// simulated GPUs, and the stand-in kubelets that prepare claims through the agents' DRA
// gRPC sockets (test/cluster). One cluster serves the whole package; the tests run one
// after the other and each owns its nodes (see the node constants).
//
// The control-plane binaries come from `make testbin`; without them every test here
// FAILS. Set MIGLAYOUT_E2E_STATE=DIR to keep the state and logs of a run in DIR/fullstack.
package fullstack

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/miglayout/miglayout/api/v1alpha1"
	"github.com/miglayout/miglayout/test/cluster"
	"github.com/miglayout/miglayout/test/harness"
)

// The nodes, by the tests that use them. Pods are pinned to their test's nodes.
const (
	groupLabel = "miglayout.test/group"

	// Static-layout scenarios (static_test.go): MigLayout e2e-static selects group=static.
	nodeA = "static-a100" // 2x A100-SXM4-80GB
	nodeH = "static-h100" // 1x H100-SXM5-80GB
	// The drain race (static_test.go): its own node, with a longer settle period so
	// that claims are created while its devices are tainted.
	nodeRace = "race-a100" // 1x A100-SXM4-80GB, settle 3s
	// The seed walkthrough (seed_test.go): MigLayout e2e-seed selects group=seed.
	seedA = "seed-a100" // 2x A100-SXM4-80GB
	seedH = "seed-h100" // 1x H100-SXM5-80GB
)

var (
	cl     *cluster.Cluster
	client kubernetes.Interface
	crc    crclient.Client
)

func TestMain(m *testing.M) { os.Exit(runMain(m)) }

func runMain(m *testing.M) int {
	if _, err := harness.BinDir(); err != nil {
		fmt.Fprintf(os.Stderr, "e2e/fullstack: %v\n", err)
		return 1
	}
	state := os.Getenv("MIGLAYOUT_E2E_STATE")
	if state != "" {
		state = filepath.Join(state, "fullstack")
	}
	// Generous: a cold Go build cache compiles the agent and the controller first.
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	var err error
	cl, err = cluster.Start(ctx, cluster.Options{
		StateDir: state,
		Progress: os.Stderr,
		Nodes: []cluster.NodeSpec{
			{Name: nodeA, GPUs: "2xA100-SXM4-80GB", Labels: map[string]string{groupLabel: "static"}},
			{Name: nodeH, GPUs: "1xH100-SXM5-80GB", Labels: map[string]string{groupLabel: "static"}},
			{Name: nodeRace, GPUs: "1xA100-SXM4-80GB", Labels: map[string]string{groupLabel: "race"},
				AgentArgs: []string{"--settle-period=3s"}},
			{Name: seedA, GPUs: "2xA100-SXM4-80GB", Labels: map[string]string{groupLabel: "seed"}},
			{Name: seedH, GPUs: "1xH100-SXM5-80GB", Labels: map[string]string{groupLabel: "seed"}},
		},
	})
	if err != nil {
		fmt.Fprintf(os.Stderr, "e2e/fullstack: starting the cluster: %v\n", err)
		return 1
	}
	defer func() {
		if err := cl.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "e2e/fullstack: stopping the cluster: %v\n", err)
		}
	}()
	client = cl.Client()
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = v1alpha1.AddToScheme(scheme)
	if crc, err = crclient.New(cl.Config(), crclient.Options{Scheme: scheme}); err != nil {
		fmt.Fprintf(os.Stderr, "e2e/fullstack: %v\n", err)
		return 1
	}
	code := m.Run()
	if err := cl.Exited(); err != nil {
		fmt.Fprintf(os.Stderr, "e2e/fullstack: a process died during the tests: %v\n", err)
		code = 1
	}
	if code != 0 {
		cl.DumpLogs(os.Stderr, 60)
	}
	return code
}
