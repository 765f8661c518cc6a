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
	"fmt"
	"net"
	"os"
	"testing"
	"time"

	"github.com/miglayout/miglayout/test/cluster"
	"github.com/miglayout/miglayout/test/cluster/clustertest"
)

// The nodes: two with two A100-SXM4-80GB each, selected by MigLayout e2e-auto, and
// one with one A100-SXM4-80GB whose agent drains for slowSettle, selected only by
// the MigLayout of TestAutoReclaimGivesWayToPod.
const (
	groupLabel = "miglayout.test/group"
	nodeA      = "auto-a100-a"
	nodeB      = "auto-a100-b"
	slowNode   = "auto-a100-slow"
)

// slowSettle is slowNode's settle period: long enough for a test to act while the
// agent drains.
const slowSettle = 20 * time.Second

// Batching windows of the controller's Auto planner and the agents' settle period: short,
// so that a repartition takes a few seconds.
const (
	batchIdle    = 500 * time.Millisecond
	batchMax     = 3 * time.Second
	settlePeriod = 500 * time.Millisecond
)

// unboundAfter is the controller's --auto-unbound-after: longer than kube-scheduler's
// longest backoff (10 s), so that no pod of the other tests, bound a few seconds after
// its device is made, has its node declined.
const unboundAfter = 20 * time.Second

// env is the cluster that serves the package, set up by TestMain.
var env *clustertest.Env

// metricsAddr holds the Prometheus endpoints of the controller, of node A's
// agent and (HTTPS, --metrics-secure) of slowNode's agent, on free loopback
// ports chosen by TestMain.
var metricsAddr = map[string]string{}

func TestMain(m *testing.M) {
	for _, who := range []string{"controller", nodeA, slowNode} {
		addr, err := freeAddr()
		if err != nil {
			fmt.Fprintln(os.Stderr, "choosing a metrics port:", err)
			os.Exit(1)
		}
		metricsAddr[who] = addr
	}
	os.Exit(clustertest.Main(m, "e2e/auto", cluster.Options{
		SettlePeriod: settlePeriod,
		// kube-scheduler renews its leader-election Lease, which the
		// controller reads before it declines a node for a pod
		// (TestAutoPlansElsewhereWhenSchedulerDeclines).
		SchedulerArgs: []string{"--leader-elect=true"},
		ControllerArgs: []string{
			"--auto-batch-idle=" + batchIdle.String(),
			"--auto-batch-max=" + batchMax.String(),
			"--auto-unbound-after=" + unboundAfter.String(),
			"--metrics-bind-address=" + metricsAddr["controller"],
		},
		Nodes: []cluster.NodeSpec{
			{Name: nodeA, GPUs: "2xA100-SXM4-80GB", Labels: map[string]string{groupLabel: "auto"},
				AgentArgs: []string{"--metrics-bind-address=" + metricsAddr[nodeA]}},
			// A short heartbeat, so that TestAutoFreezesLostNode sees its agent lost soon.
			{Name: nodeB, GPUs: "2xA100-SXM4-80GB", Labels: map[string]string{groupLabel: "auto"},
				AgentArgs: []string{"--lease-duration=" + nodeBLeaseDuration.String()}},
			{Name: slowNode, GPUs: "1xA100-SXM4-80GB", Labels: map[string]string{groupLabel: "slow"},
				AgentArgs: []string{"--settle-period=" + slowSettle.String(),
					// TestSecureMetricsEndpoint
					"--metrics-bind-address=" + metricsAddr[slowNode], "--metrics-secure"}},
		},
	}, 80, func(e *clustertest.Env) { env = e }))
}

// freeAddr returns a loopback address with a port nothing listens on now.
func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}
