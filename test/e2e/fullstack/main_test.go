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
	"os"
	"testing"
	"time"

	"github.com/miglayout/miglayout/test/cluster"
	"github.com/miglayout/miglayout/test/cluster/clustertest"
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
	// Binding conditions (binding_test.go): devices published with binding conditions,
	// a settle period long enough to write an allocation during the drain.
	nodeBind = "bind-a100" // 1x A100-SXM4-80GB, --device-binding-conditions, settle 3s
	// The seed walkthrough (seed_test.go): MigLayout e2e-seed selects group=seed.
	seedA = "seed-a100" // 2x A100-SXM4-80GB
	seedH = "seed-h100" // 1x H100-SXM5-80GB
	// A GPU falling off the bus (lostgpu_test.go): MigLayout e2e-lostgpu selects
	// group=lostgpu; a short resync, so that the agent reads NVML again soon.
	nodeLost = "lost-a100" // 2x A100-SXM4-80GB, resync 3s
	// A claim the kubelet never unprepares (orphan_test.go): MigLayout e2e-orphan selects
	// group=orphan; the agent releases such a preparation after 5s. The test stops this
	// node's stand-in kubelet for good.
	nodeOrphan = "orphan-a100" // 1x A100-SXM4-80GB, orphaned-claim grace 5s
	// A device held by an NVML client that runs no process (nvmlclient_test.go):
	// MigLayout e2e-held selects group=held; a short resync, so that the agent tries
	// again soon once the client lets go.
	nodeHeld = "held-a100" // 1x A100-SXM4-80GB, resync 3s
	// A GPU reset under a running pod (reset_test.go): MigLayout e2e-reset selects
	// group=reset; a short resync, so that the agent sees the reset soon.
	nodeReset = "reset-a100" // 1x A100-SXM4-80GB, resync 3s
	// The same on Hopper (reset_test.go), whose reset turns MIG mode off:
	// MigLayout e2e-reset-reset-h100 selects group=reset-h100.
	nodeResetH = "reset-h100" // 1x H100-SXM5-80GB, resync 3s
	// The kubelet deleting the node's ResourceSlices (wipe_test.go): MigLayout e2e-wipe-*
	// selects group=wipe; its stand-in kubelet deletes them after wipeDelay without the
	// agent instead of the kubelet's 30 s; a resync period longer than the tests, so that
	// only the agent's watch of its pool can publish it again soon; a settle period long
	// enough to restart the kubelet while it drains.
	// The shared claim (shared_test.go, MigLayout e2e-shared) uses it too.
	nodeWipe = "wipe-a100" // 1x A100-SXM4-80GB, slice wipe delay 3s, resync 10m, settle 3s
)

// wipeDelay is how long nodeWipe's stand-in kubelet waits before it deletes the
// ResourceSlices of an agent that went away.
const wipeDelay = 3 * time.Second

// env is the cluster that serves the package, set up by TestMain.
var env *clustertest.Env

// nodeHHealthAddr is where nodeH's agent serves /healthz and /readyz.
var nodeHHealthAddr = freeLocalAddr()

// controllerHealthAddr is where the controller serves /healthz and /readyz.
var controllerHealthAddr = freeLocalAddr()

func TestMain(m *testing.M) {
	os.Exit(clustertest.Main(m, "e2e/fullstack", cluster.Options{
		Nodes: []cluster.NodeSpec{
			{Name: nodeA, GPUs: "2xA100-SXM4-80GB", Labels: map[string]string{groupLabel: "static"}},
			// Its agent serves /readyz (readyz_test.go).
			{Name: nodeH, GPUs: "1xH100-SXM5-80GB", Labels: map[string]string{groupLabel: "static"},
				AgentArgs: []string{"--health-probe-bind-address=" + nodeHHealthAddr}},
			// A short heartbeat, so that TestAgentLost sees its agent lost soon.
			{Name: nodeRace, GPUs: "1xA100-SXM4-80GB", Labels: map[string]string{groupLabel: "race"},
				AgentArgs: []string{"--settle-period=3s", "--lease-duration=" + raceLeaseDuration.String()}},
			{Name: nodeBind, GPUs: "1xA100-SXM4-80GB", Labels: map[string]string{groupLabel: "bind"},
				AgentArgs: []string{"--device-binding-conditions", "--settle-period=3s"}},
			{Name: seedA, GPUs: "2xA100-SXM4-80GB", Labels: map[string]string{groupLabel: "seed"}},
			{Name: seedH, GPUs: "1xH100-SXM5-80GB", Labels: map[string]string{groupLabel: "seed"}},
			{Name: nodeLost, GPUs: "2xA100-SXM4-80GB", Labels: map[string]string{groupLabel: "lostgpu"},
				AgentArgs: []string{"--resync-period=3s"}},
			{Name: nodeOrphan, GPUs: "1xA100-SXM4-80GB", Labels: map[string]string{groupLabel: "orphan"},
				AgentArgs: []string{"--orphaned-claim-grace=5s"}},
			{Name: nodeHeld, GPUs: "1xA100-SXM4-80GB", Labels: map[string]string{groupLabel: "held"},
				AgentArgs: []string{"--resync-period=3s"}},
			{Name: nodeReset, GPUs: "1xA100-SXM4-80GB", Labels: map[string]string{groupLabel: "reset"},
				AgentArgs: []string{"--resync-period=3s"}},
			{Name: nodeResetH, GPUs: "1xH100-SXM5-80GB", Labels: map[string]string{groupLabel: "reset-h100"},
				AgentArgs: []string{"--resync-period=3s"}},
			{Name: nodeWipe, GPUs: "1xA100-SXM4-80GB", Labels: map[string]string{groupLabel: "wipe"},
				AgentArgs: []string{"--resync-period=10m", "--settle-period=3s"}, SliceWipeDelay: wipeDelay},
		},
		// It serves /readyz (readyz_test.go).
		ControllerArgs: []string{"--health-probe-bind-address=" + controllerHealthAddr},
	}, 60, func(e *clustertest.Env) { env = e }))
}
