package controller

import (
	"fmt"
	"slices"
	"strings"

	"github.com/miglayout/miglayout/api/v1alpha1"
	"github.com/miglayout/miglayout/pkg/mig"
	"github.com/miglayout/miglayout/pkg/planner"
	migslices "github.com/miglayout/miglayout/pkg/slices"
)

// unneededCandidates are the changes in flight that UnneededChanges may
// cancel, one cancel each (back to the actual layout): on a node of the
// snapshot that is not Frozen, a GPU whose desired layout an Auto plan made
// for pods (GPUSpec.ServedPods) and whose agent has destroyed nothing of it
// yet (undestroyed). The planner runs while there is one, pending pods or
// not.
func unneededCandidates(in AutoInputs, snap planner.Snapshot) []planner.Change {
	var out []planner.Change
	for _, n := range snap.Nodes {
		nml := in.NodeMigLayouts[n.Node.Name]
		if nml == nil || n.Frozen {
			continue
		}
		for _, g := range n.GPUs {
			if c, ok := undestroyed(nml, g.Info.Index); ok {
				out = append(out, c)
			}
		}
	}
	return out
}

// undestroyed is the change that cancels GPU idx's change in flight on nml
// while that change was planned for pods and nothing of it is destroyed
// yet: the agent reports the GPU Pending, Draining (waiting out the settle
// period with the devices to destroy tainted) or still Ready on the layout
// before the change. Once it reports Repartitioning, Blocked or Failed the
// change is carried out, cancelled as blocked (BlockedChanges) or retried.
func undestroyed(nml *v1alpha1.NodeMigLayout, idx int) (planner.Change, bool) {
	i := slices.IndexFunc(nml.Status.GPUs, func(st v1alpha1.GPUStatus) bool { return int(st.Index) == idx })
	j := slices.IndexFunc(nml.Spec.GPUs, func(sp v1alpha1.GPUSpec) bool { return int(sp.Index) == idx })
	if i < 0 || j < 0 {
		return planner.Change{}, false
	}
	st, spec := nml.Status.GPUs[i], nml.Spec.GPUs[j]
	switch st.Phase {
	case v1alpha1.PhasePending, v1alpha1.PhaseDraining, v1alpha1.PhaseReady:
	default:
		return planner.Change{}, false
	}
	if !spec.MIGEnabled || !st.MIGEnabled || len(spec.ServedPods) == 0 {
		return planner.Change{}, false
	}
	actual, err1 := mig.ParseLayout(st.Layout)
	desired, err2 := mig.ParseLayout(spec.Layout)
	if err1 != nil || err2 != nil || desired.Equal(actual) {
		return planner.Change{}, false
	}
	return planner.Change{Node: nml.Name, GPU: idx, From: desired, To: actual,
		Reason: truncate(fmt.Sprintf("cancels the change to %s before anything is destroyed: none of the pods it was for (%s) waits for its devices any more",
			desired.String(), strings.Join(firstPods(spec.ServedPods, 5), ", ")), 1024)}, true
}

// UnneededChanges are the candidates (unneededCandidates) whose new devices
// no pod of the plan res waits for: the pods they were for were deleted or
// got devices elsewhere before anything was destroyed. Carrying such a
// change out would destroy free devices for nobody (and perhaps the very
// devices the next pod needs); cancelling it sets the GPU's desired layout
// back to the actual one.
func UnneededChanges(in AutoInputs, candidates []planner.Change, res planner.Result) []planner.Change {
	waited := map[string]bool{}
	for _, s := range res.Served {
		for _, d := range s.Devices {
			idx, isMIG, ok := migslices.DeviceGPUIndex(d)
			if ok && isMIG && !exists(in, s.Node, idx, d) {
				waited[fmt.Sprintf("%s/%d", s.Node, idx)] = true
			}
		}
	}
	var out []planner.Change
	for _, c := range candidates {
		if !waited[fmt.Sprintf("%s/%d", c.Node, c.GPU)] {
			out = append(out, c)
		}
	}
	return out
}

// firstPods is the first n of pods, with how many more there are.
func firstPods(pods []string, n int) []string {
	if len(pods) <= n {
		return pods
	}
	return append(slices.Clone(pods[:n]), fmt.Sprintf("and %d more", len(pods)-n))
}

// stillCancels reports whether cancel x still holds on nml as read for the
// write: the GPU is still blocked on the layout x keeps (BlockedChanges), or
// its change, still the one x cancels, has destroyed nothing yet
// (UnneededChanges).
func stillCancels(nml *v1alpha1.NodeMigLayout, x planner.Change) bool {
	for _, now := range []func(*v1alpha1.NodeMigLayout, int) (planner.Change, bool){cancelOf, undestroyed} {
		if c, ok := now(nml, x.GPU); ok && c.From.Equal(x.From) && c.To.Equal(x.To) {
			return true
		}
	}
	return false
}
