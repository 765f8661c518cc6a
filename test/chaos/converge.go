package chaos

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/wait"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/miglayout/miglayout/api/v1alpha1"
	"github.com/miglayout/miglayout/pkg/agent"
	"github.com/miglayout/miglayout/pkg/mig"
	"github.com/miglayout/miglayout/pkg/mig/nvmlsim"
	migslices "github.com/miglayout/miglayout/pkg/slices"
	"github.com/miglayout/miglayout/test/cluster"
	"github.com/miglayout/miglayout/test/cluster/clustertest"
)

// WaitConverged waits until the product reports convergence for generation gen of
// MigLayout mlName on nodes: the MigLayout's status has seen the generation, each
// NodeMigLayout's status has seen its spec, the spec lists every GPU of the node, and
// every GPU is Ready with its desired layout — or, with allowBlocked, Blocked
// (DeviceInUse) on a change that would really destroy a device in use (a claim's
// allocation or a process, checked here, not taken from the agent). It returns how long
// that took, or an error describing the last state seen.
func (e *Env) WaitConverged(ctx context.Context, mlName string, gen int64, nodes []string, allowBlocked bool, timeout time.Duration) (time.Duration, error) {
	start := time.Now()
	var last string
	// The reads use ctx, not the poll's: one cut short at the timeout would
	// hide the last state seen.
	err := wait.PollUntilContextTimeout(ctx, 150*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		ok, detail := e.converged(ctx, mlName, gen, nodes, allowBlocked)
		last = detail
		return ok, nil
	})
	if err != nil {
		return time.Since(start), fmt.Errorf("not converged after %s: %s", timeout, last)
	}
	return time.Since(start), nil
}

func (e *Env) converged(ctx context.Context, mlName string, gen int64, nodes []string, allowBlocked bool) (bool, string) {
	var ml v1alpha1.MigLayout
	if err := e.CRC.Get(ctx, crclient.ObjectKey{Name: mlName}, &ml); err != nil {
		return false, err.Error()
	}
	if ml.Status.ObservedGeneration < gen {
		return false, fmt.Sprintf("MigLayout %s: observedGeneration %d < %d", mlName, ml.Status.ObservedGeneration, gen)
	}
	var inUse map[string]sets.Set[string] // node → device names in use (lazily)
	for _, node := range nodes {
		if e.Cluster.AgentPid(node) == 0 {
			return false, node + ": agent not running"
		}
		var nml v1alpha1.NodeMigLayout
		if err := e.CRC.Get(ctx, crclient.ObjectKey{Name: node}, &nml); err != nil {
			return false, node + ": " + err.Error()
		}
		if nml.Status.ObservedGeneration < nml.Generation {
			return false, fmt.Sprintf("%s: status observedGeneration %d < %d", node, nml.Status.ObservedGeneration, nml.Generation)
		}
		st, err := e.SimState(node)
		if err != nil {
			return false, err.Error()
		}
		lazy := func() (sets.Set[string], error) {
			if inUse == nil {
				if inUse, err = e.inUseDevices(ctx, nodes); err != nil {
					return nil, err
				}
			}
			return inUse[node], nil
		}
		if ok, why := gpusConverged(node, &nml, st, allowBlocked, lazy, ml.Status.Conditions); !ok {
			return false, why
		}
	}
	return true, ""
}

// gpusConverged is converged's verdict on one node: the spec lists every GPU NVML has,
// and every GPU is Ready with its desired layout or, with allowBlocked, Blocked
// (DeviceInUse) on a change that destroys a device inUse says is in use (read only
// then).
func gpusConverged(node string, nml *v1alpha1.NodeMigLayout, st nvmlsim.State, allowBlocked bool, inUse func() (sets.Set[string], error), mlConds []metav1.Condition) (bool, string) {
	if len(nml.Spec.GPUs) != len(st.GPUs) {
		return false, fmt.Sprintf("%s: spec lists %d of %d GPUs; MigLayout %s", node, len(nml.Spec.GPUs), len(st.GPUs), clustertest.ConditionsString(mlConds))
	}
	for _, spec := range nml.Spec.GPUs {
		g := gpuStatus(nml, spec.Index)
		switch {
		case g == nil:
			return false, fmt.Sprintf("%s gpu %d: no status", node, spec.Index)
		case g.Phase == v1alpha1.PhaseReady && statusHolds(g, spec):
		case allowBlocked && g.Phase == v1alpha1.PhaseBlocked && g.Reason == v1alpha1.ReasonDeviceInUse:
			used, err := inUse()
			if err != nil {
				return false, err.Error()
			}
			if why, legit := blockedLegitimately(st, int(spec.Index), spec, used); !legit {
				return false, fmt.Sprintf("%s gpu %d: Blocked, but %s", node, spec.Index, why)
			}
		default:
			return false, fmt.Sprintf("%s gpu %d: phase %s (%s: %s), status layout %q, desired %q", node, spec.Index, g.Phase, g.Reason, g.Message, g.Layout, specText(spec))
		}
	}
	return true, ""
}

func gpuStatus(nml *v1alpha1.NodeMigLayout, idx int32) *v1alpha1.GPUStatus {
	for i := range nml.Status.GPUs {
		if nml.Status.GPUs[i].Index == idx {
			return &nml.Status.GPUs[i]
		}
	}
	return nil
}

func statusHolds(g *v1alpha1.GPUStatus, spec v1alpha1.GPUSpec) bool {
	if g.MIGEnabled != spec.MIGEnabled || g.MIGPending != spec.MIGEnabled {
		return false
	}
	return !spec.MIGEnabled || g.Layout == spec.Layout
}

func specText(spec v1alpha1.GPUSpec) string {
	if !spec.MIGEnabled {
		return "-"
	}
	return spec.Layout
}

// inUseDevices returns, per node, the names of devices that a claim's allocation
// references or that run a simulated process.
func (e *Env) inUseDevices(ctx context.Context, nodes []string) (map[string]sets.Set[string], error) {
	states := map[string]nvmlsim.State{}
	for _, n := range nodes {
		st, err := e.SimState(n)
		if err != nil {
			return nil, err
		}
		states[n] = st
	}
	claims, err := e.Client.ResourceV1().ResourceClaims("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	return inUseFrom(states, claims.Items), nil
}

// inUseFrom is inUseDevices from the nodes' NVML states and the claims.
func inUseFrom(states map[string]nvmlsim.State, claims []resourceapi.ResourceClaim) map[string]sets.Set[string] {
	out := map[string]sets.Set[string]{}
	for n, st := range states {
		out[n] = sets.New[string]()
		byUUID := map[string]string{}
		for name, uuid := range clustertest.NVMLDevices(st) {
			byUUID[uuid] = name
		}
		for _, p := range st.Processes {
			if name, ok := byUUID[p.DeviceUUID]; ok {
				out[n].Insert(name)
			}
		}
	}
	for _, c := range claims {
		if c.Status.Allocation == nil {
			continue
		}
		for _, r := range c.Status.Allocation.Devices.Results {
			if s, ok := out[r.Pool]; ok && r.Driver == cluster.Driver {
				s.Insert(r.Device)
			}
		}
	}
	return out
}

// blockedLegitimately says whether reaching spec from NVML's state destroys a device in
// use: a GPU instance the desired layout lacks (every one where MIG goes off), or the
// whole GPU's device where MIG goes on.
func blockedLegitimately(st nvmlsim.State, idx int, spec v1alpha1.GPUSpec, inUse sets.Set[string]) (string, bool) {
	g := simGPU(st, idx)
	if g == nil {
		return "no such GPU in the simulator", false
	}
	var destroy []nvmlsim.GPUInstance
	if spec.MIGEnabled {
		want, err := mig.ParseLayout(spec.Layout)
		if err != nil {
			return err.Error(), false
		}
		for _, gi := range g.GPUInstances {
			if !want.Contains(mig.Device{Profile: gi.Profile, Start: gi.Placement.Start}) {
				destroy = append(destroy, gi)
			}
		}
	} else {
		destroy = g.GPUInstances
	}
	var names []string
	for _, gi := range destroy {
		name := migslices.MIGDeviceName(idx, gi.Profile, gi.ProfileID, gi.Placement.Start)
		if inUse.Has(name) {
			return "", true
		}
		names = append(names, name)
	}
	if spec.MIGEnabled && !g.MIGCurrent {
		// Turning MIG on takes the whole GPU's device away (the agent drains it).
		name := migslices.GPUDeviceName(idx)
		if inUse.Has(name) {
			return "", true
		}
		names = append(names, name)
	}
	return fmt.Sprintf("none of the devices it must destroy (%s) is allocated or runs a process (in use: %v)", strings.Join(names, ", "), sets.List(inUse)), false
}

func simGPU(st nvmlsim.State, idx int) *nvmlsim.GPU {
	for i := range st.GPUs {
		if st.GPUs[i].Index == idx {
			return &st.GPUs[i]
		}
	}
	return nil
}

// CheckResult is the independent check of a state the product reports converged.
type CheckResult struct {
	// PoolMismatch: devices published that NVML lacks (phantom), NVML devices not
	// published (missing), published with another UUID, or still tainted.
	PoolMismatch []string
	// Leaked: GPU instances without a compute instance, and instances of a Ready GPU
	// that its desired layout lacks (or desired instances NVML lacks).
	Leaked []string
	// JournalLeft: journal entries of GPUs that are Ready (work recorded as in flight
	// after it finished).
	JournalLeft []string
}

func (c CheckResult) clean() bool { return len(c.PoolMismatch)+len(c.Leaked) == 0 }

// Check compares, on each node, the published pool with NVML, NVML with the desired
// layouts of the GPUs the agent reports Ready, and looks for GPU instances without a
// compute instance. A mismatch must persist for settleFor to count (a republication may
// be in flight).
func (e *Env) Check(ctx context.Context, nodes []string, settleFor time.Duration) CheckResult {
	var res CheckResult
	_ = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, settleFor, true, func(context.Context) (bool, error) {
		res = e.checkOnce(ctx, nodes)
		return res.clean(), nil
	})
	return res
}

func (e *Env) checkOnce(ctx context.Context, nodes []string) CheckResult {
	var res CheckResult
	for _, node := range nodes {
		st, err := e.SimState(node)
		if err != nil {
			res.PoolMismatch = append(res.PoolMismatch, node+": "+err.Error())
			continue
		}
		got, err := e.PoolDevices(ctx, node)
		if err != nil {
			res.PoolMismatch = append(res.PoolMismatch, node+": "+err.Error())
			continue
		}
		var nml v1alpha1.NodeMigLayout
		nmlErr := e.CRC.Get(ctx, crclient.ObjectKey{Name: node}, &nml)
		var journal []agent.JournalEntry
		if nmlErr == nil {
			journal = e.Journal(node)
		}
		checkNode(&res, node, st, got, &nml, nmlErr, journal)
	}
	sort.Strings(res.PoolMismatch)
	sort.Strings(res.Leaked)
	return res
}

// checkNode is checkOnce's comparison on one node, from what it read: NVML's state st,
// the published pool got, the node's NodeMigLayout (nmlErr where it could not be read)
// and its agent's journal.
func checkNode(res *CheckResult, node string, st nvmlsim.State, got map[string]clustertest.PublishedDevice, nml *v1alpha1.NodeMigLayout, nmlErr error, journal []agent.JournalEntry) {
	want := clustertest.NVMLDevices(st)
	for name, uuid := range want {
		d, ok := got[name]
		switch {
		case !ok:
			res.PoolMismatch = append(res.PoolMismatch, fmt.Sprintf("%s: %s missing from the pool", node, name))
		case d.UUID != uuid:
			res.PoolMismatch = append(res.PoolMismatch, fmt.Sprintf("%s: %s published with uuid %s, NVML %s", node, name, d.UUID, uuid))
		case d.Tainted:
			res.PoolMismatch = append(res.PoolMismatch, fmt.Sprintf("%s: %s still tainted", node, name))
		}
	}
	for name := range got {
		if _, ok := want[name]; !ok {
			res.PoolMismatch = append(res.PoolMismatch, fmt.Sprintf("%s: phantom %s published, NVML lacks it", node, name))
		}
	}
	for _, g := range st.GPUs {
		for _, gi := range g.GPUInstances {
			if len(gi.ComputeInstances) == 0 {
				res.Leaked = append(res.Leaked, fmt.Sprintf("%s gpu %d: GI %d %s@%d has no compute instance", node, g.Index, gi.ID, gi.Profile, gi.Placement.Start))
			}
		}
	}
	if nmlErr != nil {
		res.Leaked = append(res.Leaked, node+": "+nmlErr.Error())
		return
	}
	ready := map[int]bool{}
	for _, spec := range nml.Spec.GPUs {
		s := gpuStatus(nml, spec.Index)
		g := simGPU(st, int(spec.Index))
		if s == nil || g == nil || s.Phase != v1alpha1.PhaseReady {
			continue
		}
		ready[int(spec.Index)] = true
		if g.MIGCurrent != spec.MIGEnabled || g.MIGPending != spec.MIGEnabled {
			res.Leaked = append(res.Leaked, fmt.Sprintf("%s gpu %d: Ready, but MIG mode %v/%v, desired %v", node, g.Index, g.MIGCurrent, g.MIGPending, spec.MIGEnabled))
			continue
		}
		if !spec.MIGEnabled {
			continue
		}
		want, err := mig.ParseLayout(spec.Layout)
		if err != nil {
			res.Leaked = append(res.Leaked, fmt.Sprintf("%s gpu %d: desired layout %q: %v", node, g.Index, spec.Layout, err))
			continue
		}
		have := g.Layout()
		for _, d := range have {
			if !want.Contains(d) {
				res.Leaked = append(res.Leaked, fmt.Sprintf("%s gpu %d: Ready, but holds %s, which the desired layout %s lacks", node, g.Index, d, spec.Layout))
			}
		}
		for _, d := range want {
			if !have.Contains(d) {
				res.Leaked = append(res.Leaked, fmt.Sprintf("%s gpu %d: Ready, but lacks desired %s (holds %s)", node, g.Index, d, have))
			}
		}
	}
	for _, j := range journal {
		if ready[j.GPU] {
			res.JournalLeft = append(res.JournalLeft, fmt.Sprintf("%s gpu %d: journal entry at step %s (desired %q, done %v) left after the GPU is Ready", node, j.GPU, j.Step, j.Desired, j.Done))
		}
	}
}
