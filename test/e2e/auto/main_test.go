// Package auto runs miglayout's Auto mode end to end (issue 6, "e2e on the real
// harness"): the real control plane (test/harness), miglayout-controller with short
// batching windows, one miglayout-agent process per node on simulated GPUs and the
// stand-in kubelets (test/cluster). Pending pods ask for MIG devices the nodes do not
// have; the controller's planner repartitions whole 7g.80gb GPUs for them.
//
// The control-plane binaries come from `make testbin`; without them every test here
// FAILS. Set MIGLAYOUT_E2E_STATE=DIR to keep the state and logs of a run in DIR/auto.
package auto

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

// The nodes: two with two A100-SXM4-80GB each, selected by MigLayout e2e-auto.
const (
	groupLabel = "miglayout.test/group"
	nodeA      = "auto-a100-a"
	nodeB      = "auto-a100-b"
)

// Batching windows of the controller's Auto planner and the agents' settle period: short,
// so that a repartition takes a few seconds.
const (
	batchIdle    = 500 * time.Millisecond
	batchMax     = 3 * time.Second
	settlePeriod = 500 * time.Millisecond
)

var (
	cl     *cluster.Cluster
	client kubernetes.Interface
	crc    crclient.Client
)

func TestMain(m *testing.M) { os.Exit(runMain(m)) }

func runMain(m *testing.M) int {
	if _, err := harness.BinDir(); err != nil {
		fmt.Fprintf(os.Stderr, "e2e/auto: %v\n", err)
		return 1
	}
	state := os.Getenv("MIGLAYOUT_E2E_STATE")
	if state != "" {
		state = filepath.Join(state, "auto")
	}
	// Generous: a cold Go build cache compiles the agent and the controller first.
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	var err error
	cl, err = cluster.Start(ctx, cluster.Options{
		StateDir:     state,
		Progress:     os.Stderr,
		SettlePeriod: settlePeriod,
		ControllerArgs: []string{
			"--auto-batch-idle=" + batchIdle.String(),
			"--auto-batch-max=" + batchMax.String(),
		},
		Nodes: []cluster.NodeSpec{
			{Name: nodeA, GPUs: "2xA100-SXM4-80GB", Labels: map[string]string{groupLabel: "auto"}},
			{Name: nodeB, GPUs: "2xA100-SXM4-80GB", Labels: map[string]string{groupLabel: "auto"}},
		},
	})
	if err != nil {
		fmt.Fprintf(os.Stderr, "e2e/auto: starting the cluster: %v\n", err)
		return 1
	}
	defer func() {
		if err := cl.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "e2e/auto: stopping the cluster: %v\n", err)
		}
	}()
	client = cl.Client()
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = v1alpha1.AddToScheme(scheme)
	if crc, err = crclient.New(cl.Config(), crclient.Options{Scheme: scheme}); err != nil {
		fmt.Fprintf(os.Stderr, "e2e/auto: %v\n", err)
		return 1
	}
	code := m.Run()
	if err := cl.Exited(); err != nil {
		fmt.Fprintf(os.Stderr, "e2e/auto: a process died during the tests: %v\n", err)
		code = 1
	}
	if code != 0 {
		cl.DumpLogs(os.Stderr, 80)
	}
	return code
}
