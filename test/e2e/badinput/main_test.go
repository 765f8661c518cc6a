// Package badinput applies a corpus of invalid MigLayouts to the real API server of a
// test cluster whose agents run on simulated GPUs (test/cluster): each must be rejected
// at admission with a message naming the problem, or accepted and answered by the
// controller with a condition whose reason and message name it — and none may change the
// simulated hardware (invariant 5). The table in corpus_test.go has one case per entry
// with its expected outcome.
//
// The control-plane binaries come from `make testbin`; without them the tests FAIL. Set
// MIGLAYOUT_E2E_STATE=DIR to keep the state and logs of a run in DIR/badinput.
package badinput

import (
	"os"
	"testing"
	"time"

	"github.com/miglayout/miglayout/test/chaos"
	"github.com/miglayout/miglayout/test/cluster"
	"github.com/miglayout/miglayout/test/cluster/clustertest"
)

const (
	groupLabel = "miglayout.test/group"
	nodeA      = "bad-a100" // 2x A100-SXM4-80GB
	nodeH      = "bad-h100" // 1x H100-SXM5-80GB
)

// env has clustertest's clients and helpers and test/chaos's convergence and hardware
// checks.
var env *chaos.Env

func TestMain(m *testing.M) {
	os.Exit(clustertest.Main(m, "e2e/badinput", cluster.Options{
		// Short: an agent acting on a bad spec would act within the hold of each case.
		SettlePeriod: 200 * time.Millisecond,
		Nodes: []cluster.NodeSpec{
			{Name: nodeA, GPUs: "2xA100-SXM4-80GB", Labels: map[string]string{groupLabel: "bad"}},
			{Name: nodeH, GPUs: "1xH100-SXM5-80GB", Labels: map[string]string{groupLabel: "bad"}},
		},
	}, 60, func(e *clustertest.Env) { env = chaos.Wrap(e) }))
}
