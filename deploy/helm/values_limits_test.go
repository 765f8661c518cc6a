package helm

import (
	"strings"
	"testing"
)

// TestLeaderElectionTimingRefused: client-go's leader election refuses a
// lease duration that is not longer than the renew deadline, and a renew
// deadline not longer than 1.2 × the retry period
// (leaderelection.NewLeaderElector): the controller then exits at start and
// every replica crash-loops, while no MigLayout is reconciled. Like the
// port clash or the short heartbeat, the chart refuses such values with a
// message naming them.
func TestLeaderElectionTimingRefused(t *testing.T) {
	for name, le := range map[string]map[string]any{
		"lease duration equal to the renew deadline":     {"leaseDuration": "10s"},
		"lease duration shorter than the renew deadline": {"leaseDuration": "5s", "renewDeadline": "10s"},
		"renew deadline within the retry jitter":         {"renewDeadline": "2s", "retryPeriod": "2s"},
		"lease duration under a second":                  {"leaseDuration": "900ms", "renewDeadline": "600ms", "retryPeriod": "100ms"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Render(Options{Values: map[string]any{"controller": map[string]any{"leaderElection": le}}})
			if err == nil {
				t.Errorf("controller.leaderElection %v rendered: the controller's leader election refuses it at start (leaseDuration must be greater than renewDeadline, renewDeadline greater than retryPeriod*1.2), so every replica crash-loops", le)
			}
		})
	}
}

// TestAgentSettlePeriodWithinAPass: every pass that drains waits the
// settle period, holding the GPUs it changes; the chart refuses a
// settlePeriod of 10m or more (the agent gives a pass the settle period
// plus 5m before its liveness probe fails: cmd/miglayout-agent's
// TestParseOptionsMaxPass).
func TestAgentSettlePeriodWithinAPass(t *testing.T) {
	_, err := Render(Options{Values: map[string]any{"agent": map[string]any{"settlePeriod": "10m"}}})
	if err == nil {
		t.Error("agent.settlePeriod=10m rendered")
	}
}

// TestAgentUpdateStrategyNeverRunsTwoAgentsOnANode: a DaemonSet with
// rollingUpdate.maxSurge starts the new agent pod on a node before the old
// one stops. The agent does not support that: it starts the kubelet plugin
// helper without kubeletplugin.RollingUpdate (both pods would serve the
// same registration and DRA sockets), it takes no lock across processes on
// the GPUs, the repartitioning journal or the pool's ResourceSlices, so two
// agents would drain, repartition and publish the same GPUs at once. The
// chart refuses a surge.
func TestAgentUpdateStrategyNeverRunsTwoAgentsOnANode(t *testing.T) {
	_, err := Render(Options{Values: map[string]any{"agent": map[string]any{"updateStrategy": map[string]any{
		"type": "RollingUpdate", "rollingUpdate": map[string]any{"maxSurge": 1, "maxUnavailable": 1}}}}})
	if err == nil || !strings.Contains(err.Error(), "maxSurge") {
		t.Errorf("agent.updateStrategy.rollingUpdate.maxSurge=1: %v; want it refused: two agents would run on a node during a rollout, both repartitioning its GPUs and serving one kubelet plugin socket", err)
	}
}

// TestAgentUpdateStrategyShape: the values schema refuses an update
// strategy the API server would (maxUnavailable 0 without a surge, an
// unknown type or field) before anything is installed, and takes the
// forms it would.
func TestAgentUpdateStrategyShape(t *testing.T) {
	for name, tc := range map[string]struct {
		strategy map[string]any
		ok       bool
	}{
		"maxUnavailable 1":   {map[string]any{"type": "RollingUpdate", "rollingUpdate": map[string]any{"maxUnavailable": 1}}, true},
		"maxUnavailable 10%": {map[string]any{"type": "RollingUpdate", "rollingUpdate": map[string]any{"maxUnavailable": "10%"}}, true},
		"OnDelete":           {map[string]any{"type": "OnDelete"}, true},
		"maxUnavailable 0":   {map[string]any{"type": "RollingUpdate", "rollingUpdate": map[string]any{"maxUnavailable": 0}}, false},
		"maxUnavailable 0%":  {map[string]any{"type": "RollingUpdate", "rollingUpdate": map[string]any{"maxUnavailable": "0%"}}, false},
		"unknown type":       {map[string]any{"type": "Recreate"}, false},
		"unknown field":      {map[string]any{"type": "RollingUpdate", "rollingUpdate": map[string]any{"maxUnavailible": 1}}, false},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Render(Options{Values: map[string]any{"agent": map[string]any{"updateStrategy": tc.strategy}}})
			if tc.ok != (err == nil) {
				t.Errorf("agent.updateStrategy %v: %v, want accepted %t", tc.strategy, err, tc.ok)
			}
		})
	}
}

// TestControllerCriticalPriorityHasQuota: where critical PriorityClasses
// are limited by default (GKE), a pod of system-cluster-critical or
// system-node-critical outside kube-system is admitted only under a
// ResourceQuota scoped to its class: a controller given a critical class
// (the natural one for a cluster controller) is covered by the chart's
// quota as the agent is, or it gets no pod ("insufficient quota to match
// these scopes").
func TestControllerCriticalPriorityHasQuota(t *testing.T) {
	r := render(t, map[string]any{"controller": map[string]any{"priorityClassName": "system-cluster-critical"}})
	if quotaAdmits(t, r, "system-cluster-critical") {
		return
	}
	var quotas []string
	for _, o := range r.Objects {
		if o.GetKind() == "ResourceQuota" {
			quotas = append(quotas, o.GetName())
		}
	}
	t.Errorf("controller.priorityClassName=system-cluster-critical in namespace miglayout-system, but no ResourceQuota scoped to that class is rendered (quotas: %s): on GKE the controller's pods are refused", strings.Join(quotas, ", "))
}

// TestValuesTheBinariesRefuseAreRefused: values the schema's types admit
// but the controller or the agent refuses at start, so that every replica
// or every agent of the fleet would crash-loop after a successful install,
// fail the install instead, naming the value; and so does a value set to
// null (Helm then drops the chart's default), which would render a flag
// without a value, an object the API server refuses, or a template error
// that names no value.
func TestValuesTheBinariesRefuseAreRefused(t *testing.T) {
	for name, tc := range map[string]struct {
		values map[string]any
		says   string
	}{
		"retry period 0":                     {map[string]any{"controller": map[string]any{"leaderElection": map[string]any{"retryPeriod": "0s"}}}, "retryPeriod"},
		"retry period under 1ms":             {map[string]any{"controller": map[string]any{"leaderElection": map[string]any{"retryPeriod": "0.5ns"}}}, "retryPeriod"},
		"scheduler Lease name a..b":          {map[string]any{"controller": map[string]any{"schedulerLease": "kube-system/a..b"}}, "schedulerLease"},
		"scheduler Lease name a.-b":          {map[string]any{"controller": map[string]any{"schedulerLease": "kube-system/a.-b"}}, "schedulerLease"},
		"scheduler Lease namespace over 63":  {map[string]any{"controller": map[string]any{"schedulerLease": strings.Repeat("n", 64) + "/kube-scheduler"}}, "schedulerLease"},
		"scheduler Lease name over 253":      {map[string]any{"controller": map[string]any{"schedulerLease": "kube-system/" + strings.Repeat("a", 254)}}, "schedulerLease"},
		"grace over a Go duration":           {map[string]any{"agent": map[string]any{"orphanedClaimGrace": "3000000h"}}, "agent.orphanedClaimGrace"},
		"resync over a Go duration":          {map[string]any{"agent": map[string]any{"resyncPeriod": "2562048h"}}, "agent.resyncPeriod"},
		"health interval over a Go duration": {map[string]any{"agent": map[string]any{"deviceHealthInterval": "1000000h2000000h"}}, "agent.deviceHealthInterval"},
		"lease over a Go duration, unused":   {map[string]any{"controller": map[string]any{"replicas": 1, "leaderElection": map[string]any{"enabled": false, "leaseDuration": "3000000h"}}}, "controller.leaderElection.leaseDuration"},
		"heartbeat over a Lease's reach":     {map[string]any{"agent": map[string]any{"heartbeatLeaseDuration": "3000000000s"}}, "heartbeatLeaseDuration"},
		"settle period null":                 {map[string]any{"agent": map[string]any{"settlePeriod": nil}}, "settlePeriod"},
		"agent log verbosity null":           {map[string]any{"agent": map[string]any{"logVerbosity": nil}}, "logVerbosity"},
		"controller health port null":        {map[string]any{"controller": map[string]any{"healthPort": nil}}, "healthPort"},
		"host paths null":                    {map[string]any{"agent": map[string]any{"hostPaths": nil}}, "hostPaths"},
		"leader election null":               {map[string]any{"controller": map[string]any{"leaderElection": nil}}, "leaderElection"},
		"metrics null":                       {map[string]any{"metrics": nil}, "metrics"},
		"policy actions null":                {map[string]any{"agentNodePolicy": map[string]any{"validationActions": nil}}, "validationActions"},
		// The agent's ServiceAccount name is written into the node policy's CEL.
		"agent ServiceAccount name quoting CEL": {map[string]any{"agent": map[string]any{"serviceAccount": map[string]any{"create": false, "name": "x' || true || '"}}}, "/agent/serviceAccount/name"},
		"controller ServiceAccount name a..b":   {map[string]any{"controller": map[string]any{"serviceAccount": map[string]any{"name": "a..b"}}}, "/controller/serviceAccount/name"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Render(Options{Values: tc.values})
			if err == nil || !strings.Contains(err.Error(), tc.says) {
				t.Errorf("%v: error %v, want the install refused naming %s", tc.values, err, tc.says)
			}
		})
	}
	for name, values := range map[string]map[string]any{
		"scheduler Lease of a dotted name": {"controller": map[string]any{"schedulerLease": "kube-system/kube-scheduler.v2"}},
		"no scheduler Lease":               {"controller": map[string]any{"schedulerLease": ""}},
		"resources dropped":                {"agent": map[string]any{"resources": nil}, "controller": map[string]any{"resources": nil}},
		"OnDelete without rollingUpdate":   {"agent": map[string]any{"updateStrategy": map[string]any{"type": "OnDelete", "rollingUpdate": nil}}},
		"the longest Go duration":          {"agent": map[string]any{"orphanedClaimGrace": "2562047h47m16s"}},
		"pod annotations and labels null":  {"agent": map[string]any{"podAnnotations": nil, "podLabels": nil}, "controller": map[string]any{"podAnnotations": nil, "podLabels": nil}},
		"a dotted ServiceAccount name":     {"agent": map[string]any{"serviceAccount": map[string]any{"create": false, "name": "gpu.agents"}}},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := Render(Options{Values: values}); err != nil {
				t.Errorf("%v refused: %v", values, err)
			}
		})
	}
}

// TestAgentDurationsCutToNanoseconds: a duration the schema's pattern
// admits but time.ParseDuration reads as 0 (0.5ns, cut to whole
// nanoseconds) is refused where the agent refuses 0, rather than rendered
// for agents that exit at start.
func TestAgentDurationsCutToNanoseconds(t *testing.T) {
	if _, err := Render(Options{Values: map[string]any{"agent": map[string]any{"resyncPeriod": "0.5ns"}}}); err == nil {
		t.Error("agent.resyncPeriod=0.5ns rendered: the agent reads --resync-period=0s and exits")
	}
	if _, err := Render(Options{Values: map[string]any{"agent": map[string]any{"resyncPeriod": "1.5ns", "settlePeriod": "9m59.9999999999s"}}}); err != nil {
		t.Errorf("durations of whole nanoseconds refused: %v", err)
	}
}
