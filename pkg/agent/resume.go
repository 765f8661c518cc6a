package agent

import (
	"slices"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// resumedNote begins the message of a GPU whose change resumeUnasked
// carries on.
const resumedNote = "finishing a change begun earlier (no spec asks for this GPU any more, and half done it publishes no device): "

// resumeUnasked returns desired with a spec added for each GPU it does not
// list whose journal entry records a change the agent began and did not
// finish (its devices destroyed or MIG mode set, its creates or the MIG
// mode off still to come), where the GPU now publishes nothing: in MIG
// mode, no change of mode pending, and no GPU instance at all. Call it
// after rollbackOrphans, which destroys the agent's own half-made GPU
// instance; one left (another tool's, or one whose rollback failed, named
// in orphans) leaves the GPU as it is.
//
// Such a GPU is left so when its spec goes (the NodeMigLayout deleted with
// its MigLayout) while the agent is stopped or after a step of the change
// failed: neither the layout it had nor the one asked for, and no device a
// pod could get. The added spec is the entry's own end: the layout the
// creates were making (JournalEntry.Desired), or MIG mode off
// (JournalEntry.DisablesMIG). It only creates devices or turns MIG mode
// off, since the GPU has no GPU instance to destroy; the pass plans and
// checks it as any spec. Each such change gets one pass: its journal entry
// goes at the end of that pass whatever the outcome, and a spec that lists
// the GPU meanwhile (Reread) takes over. The second value names the GPUs
// added.
func (r *Repartitioner) resumeUnasked(obs []GPUState, desired []v1alpha1.GPUSpec, orphans map[int]error) ([]v1alpha1.GPUSpec, map[int]bool) {
	var resumed map[int]bool
	for _, e := range r.Journal.Entries() {
		if slices.ContainsFunc(desired, func(s v1alpha1.GPUSpec) bool { return int(s.Index) == e.GPU }) {
			continue
		}
		if e.Step == StepDraining || (len(e.Create) == 0 && !e.DisablesMIG) {
			// Nothing changed yet, or a mode change kept for a pass
			// that failed on input (KeepMode): nothing to carry on.
			continue
		}
		g := findGPU(obs, e.GPU)
		if g == nil || g.GPU.UUID != e.UUID || !g.GPU.MIGMode.Current || !g.GPU.MIGMode.Pending || len(g.Devices) > 0 || orphans[e.GPU] != nil {
			continue
		}
		spec := v1alpha1.GPUSpec{Index: int32(e.GPU), MIGEnabled: !e.DisablesMIG}
		if spec.MIGEnabled {
			spec.Layout = e.Desired
		}
		if resumed == nil {
			desired = slices.Clone(desired)
			resumed = map[int]bool{}
		}
		desired = append(desired, spec)
		resumed[e.GPU] = true
	}
	return desired, resumed
}
