package controller

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/miglayout/miglayout/api/v1alpha1"
	"github.com/miglayout/miglayout/pkg/mig"
)

// Problem is a GPU that a rule addresses but whose desired state cannot be
// computed. The GPU keeps what its NodeMigLayout spec asked for where it
// holds that, where NVML cannot read it, or where its agent has begun the
// change; a change not begun is dropped (the GPU's actual layout); a GPU
// the spec did not list stays out of it. So the input changes no hardware, and loses
// nothing: a change stopped part way is finished, and a GPU made again
// after a reset gets its layout back (keptForProblem).
type Problem struct {
	// GPU is the NVML index of the GPU.
	GPU int32
	// Product is the product name the agent reported.
	Product string
	// Reason is v1alpha1.ReasonInvalidLayout or v1alpha1.ReasonUnknownGPU.
	Reason string
	// Message names the GPU, the rule and the error.
	Message string
}

// problemGroup is the problems of GPUs of one node alike but for the GPU:
// one message less its "gpu N " start (why), told under the first one's
// reason (msg: its whole message).
type problemGroup struct {
	reason, why, msg string
	gpus             []string
}

// groupProblems groups ps (of one node) alike but for the GPU, in the
// order of their first problem: one rule failing alike on several GPUs is
// told once.
func groupProblems(ps []Problem) []problemGroup {
	var out []problemGroup
	for _, p := range ps {
		why := strings.TrimPrefix(p.Message, fmt.Sprintf("gpu %d ", p.GPU))
		i := slices.IndexFunc(out, func(g problemGroup) bool { return g.why == why })
		if i < 0 {
			out = append(out, problemGroup{reason: p.Reason, why: why, msg: p.Message})
			i = len(out) - 1
		}
		out[i].gpus = append(out[i].gpus, fmt.Sprint(p.GPU))
	}
	return out
}

// text is the message of a group of one problem, else "gpus 0, 1 <why>".
func (g problemGroup) text() string {
	if len(g.gpus) == 1 {
		return g.msg
	}
	return "gpus " + strings.Join(g.gpus, ", ") + " " + g.why
}

// DesiredGPUs computes the desired state of a node's GPUs under Static rules.
//
// inventory is what the node agent reported (NodeMigLayout.status.gpus);
// current is the spec written before (NodeMigLayout.spec.gpus), used to keep
// a desired layout stable while the hardware moves towards it. For each GPU,
// the first matching rule decides: MIG off; an explicit layout, which must
// validate on the GPU's model; or profile counts, fitted with the fewest moves
// around the devices in use. GPUs that no rule matches are left out (left as
// they are), but for a change of current's that the agent has begun, which
// is kept so that it is finished rather than left part way; GPUs that a
// rule matches but cannot be configured are reported as problems, and
// keep what current asks where it is held or begun (Problem). Both results
// are ordered by GPU index. Each
// entry carries the UUID of the GPU it is for (GPUSpec.UUID), and an entry
// of current written for another GPU (NVML numbered the GPUs anew) is not
// kept.
func DesiredGPUs(cat *mig.Catalog, rules []v1alpha1.LayoutRule, inventory []v1alpha1.GPUStatus, current []v1alpha1.GPUSpec) ([]v1alpha1.GPUSpec, []Problem) {
	prev := make(map[int32]v1alpha1.GPUSpec, len(current))
	for _, g := range current {
		prev[g.Index] = g
	}
	gpus := slices.Clone(inventory)
	slices.SortFunc(gpus, func(a, b v1alpha1.GPUStatus) int { return int(a.Index - b.Index) })
	var out []v1alpha1.GPUSpec
	var problems []Problem
	for _, g := range gpus {
		if g.Product == "" && g.Model == "" {
			// Never read by NVML (a GPU the spec names that the node
			// lacks, or one NVML counts but could never read): not
			// inventory. One read before keeps what it was in its
			// row, and its spec, while NVML does not show it (its
			// loss shows, Degraded).
			continue
		}
		var before *v1alpha1.GPUSpec
		if p, ok := prev[g.Index]; ok && (p.UUID == "" || p.UUID == g.UUID) {
			// Not one written for the GPU NVML showed at this index
			// before it numbered the GPUs anew.
			before = &p
		}
		i, rule, ok := matchRule(rules, g)
		if !ok {
			if before != nil && changeUnderWay(*before, g) {
				kept := *before
				kept.UUID = g.UUID
				kept.Reason = "no rule matches the GPU now; the change begun, to " + describeSpec(*before) + ", is carried out"
				out = append(out, kept)
			}
			continue
		}
		spec, reason, err := desiredGPU(cat, rule, g, before)
		if err != nil {
			problems = append(problems, Problem{
				GPU: g.Index, Product: g.Product, Reason: reason,
				Message: fmt.Sprintf("gpu %d (%s), %s: %v", g.Index, productOf(g), ruleName(i, rule), err),
			})
			if kept, ok := keptForProblem(before, g, ruleName(i, rule)); ok {
				out = append(out, kept)
			}
			continue
		}
		spec.Reason = ruleName(i, rule) + ": " + spec.Reason
		spec.UUID = g.UUID
		out = append(out, spec)
	}
	return out, problems
}

// changeUnderWay reports whether the agent has begun sp's change on GPU g,
// which g does not hold (what dropUnstarted keeps): g waits for a reset to
// change its MIG mode, or is reported neither Ready nor Draining, unless
// its row says the agent does not act on it (notActedOn). A Blocked or
// failed change counts: the agent may have destroyed devices before the
// one it found in use or failed on.
func changeUnderWay(sp v1alpha1.GPUSpec, g v1alpha1.GPUStatus) bool {
	switch {
	case holds(sp, g):
		return false
	case g.MIGEnabled != g.MIGPending:
		// A MIG mode change set, waiting for a reset, whatever the agent
		// reports this pass.
		return true
	case notActedOn(g):
		return false
	}
	return g.Phase != v1alpha1.PhaseReady && g.Phase != v1alpha1.PhaseDraining
}

// notActedOn reports whether g's row says its agent does not act on it
// (changes nothing there): NVML cannot read it or does not count it,
// NVIDIA's device plugin has the node, its spec entry is invalid for it or
// was written for another GPU.
func notActedOn(g v1alpha1.GPUStatus) bool {
	switch g.Reason {
	case v1alpha1.ReasonGPUUnreadable, v1alpha1.ReasonGPUMissing, v1alpha1.ReasonDevicePluginActive,
		v1alpha1.ReasonInvalidLayout, v1alpha1.ReasonUnknownGPU, v1alpha1.ReasonSpecForAnotherGPU:
		return g.Phase == v1alpha1.PhaseFailed || g.Phase == v1alpha1.PhaseBlocked
	}
	return false
}

// keptForProblem is the spec entry of GPU g, whose rule (named rule)
// cannot be applied, where before (the entry written for it, nil for none)
// has one: before itself where g holds it, where its change is under way
// (changeUnderWay: finished rather than left part way), or where g's row
// may tell nothing of what it holds (hardwareGone: NVML cannot read or
// count it, or NVIDIA's device plugin has the node, whose withheld GPUs
// include those NVML cannot read; kept as written); else, a change not
// begun, g's actual layout (the change dropped). The input that
// cannot be applied changes no hardware and loses nothing: a GPU made
// again after a reset gets the layout it held back.
func keptForProblem(before *v1alpha1.GPUSpec, g v1alpha1.GPUStatus, rule string) (v1alpha1.GPUSpec, bool) {
	if before == nil {
		return v1alpha1.GPUSpec{}, false
	}
	if hardwareGone(g) {
		// Its row may tell nothing of what it holds: its entry stays as
		// written until the agent reads it again.
		return *before, true
	}
	kept := *before
	kept.UUID = g.UUID
	// Reasons say the state, not the reason before them, so that each
	// pass writes the same entry.
	switch {
	case holds(*before, g):
		kept.Reason = rule + " cannot be applied; the GPU keeps the layout it holds"
		if strings.HasPrefix(before.Reason, kept.Reason) {
			// Written so already, the dropped change named after it.
			kept.Reason = before.Reason
		}
	case changeUnderWay(*before, g):
		kept.Reason = rule + " cannot be applied; the change begun, to " + describeSpec(*before) + ", is carried out"
	default:
		kept = v1alpha1.GPUSpec{Index: g.Index, UUID: g.UUID, MIGEnabled: g.MIGEnabled, Layout: g.Layout,
			Reason: rule + " cannot be applied; the GPU keeps the layout it holds (the change to " + describeSpec(*before) + " was dropped before it started)"}
	}
	kept.Reason = truncate(kept.Reason, 1024)
	return kept, true
}

// desiredGPU applies one rule to one GPU. On error it also returns the
// condition reason.
func desiredGPU(cat *mig.Catalog, rule *v1alpha1.LayoutRule, g v1alpha1.GPUStatus, prev *v1alpha1.GPUSpec) (v1alpha1.GPUSpec, string, error) {
	// MIG off needs no model: a GPU without MIG, or of a model the catalog
	// lacks, holds it already.
	if !migEnabled(rule) {
		why := "MIG off"
		if inUse, err := mig.ParseLayout(g.InUse); g.MIGEnabled && err == nil && len(inUse) > 0 {
			// As for a layout: the agent keeps them and reports the GPU
			// Blocked until they are free.
			why += fmt.Sprintf("; destroys %s, in use now", inUse.Canonical().String())
		}
		return v1alpha1.GPUSpec{Index: g.Index, MIGEnabled: false, Reason: why}, "", nil
	}
	model, err := lookupModel(cat, g)
	if err != nil {
		return v1alpha1.GPUSpec{}, v1alpha1.ReasonUnknownGPU, err
	}
	// Where the GPU's NVML offers other placements, or gives a profile
	// another GI profile ID, the layout keeps to what NVML offers.
	model = modelVariants{}.of(model, g.NVMLProfiles)
	current, pinned := actualLayout(model, g)
	var layout mig.Layout
	var why string
	if rule.Layout != nil {
		layout, err = explicitLayout(model, *rule.Layout)
		why = "layout " + layout.String()
	} else {
		layout, err = fitProfiles(model, rule.Profiles, current, pinned, prev)
		why = "profiles " + formatProfiles(rule.Profiles)
		if len(rule.Profiles) == 0 {
			why = "no profile: MIG on, no device"
		}
	}
	if err != nil {
		return v1alpha1.GPUSpec{}, v1alpha1.ReasonInvalidLayout, err
	}
	if lost := append(destroyedInUse(pinned, layout), uncataloguedInUse(model, g)...); len(lost) > 0 {
		// Written all the same: the agent keeps these devices and reports
		// the GPU Blocked (DeviceInUse) until they are free.
		why += fmt.Sprintf("; destroys %s, in use now", lost.String())
	}
	return v1alpha1.GPUSpec{Index: g.Index, MIGEnabled: true, Layout: layout.String(), Reason: why}, "", nil
}

// lookupModel finds the GPU's model in the catalog, by the model name the
// agent reported, else by its product name.
func lookupModel(cat *mig.Catalog, g v1alpha1.GPUStatus) (*mig.Model, error) {
	name := g.Model
	if name == "" {
		name = g.Product
	}
	if name == "" {
		return nil, fmt.Errorf("%w: the agent reported neither a model nor a product name", mig.ErrUnknownModel)
	}
	m, err := cat.Model(name)
	if err != nil {
		return nil, fmt.Errorf("looking up the GPU model: %w", err)
	}
	return m, nil
}

// actualLayout is the GPU's current layout and the devices in it that must
// stay. A layout the agent reports that does not parse or validate counts as
// empty: the agent, which guards devices in use itself, will tell.
func actualLayout(m *mig.Model, g v1alpha1.GPUStatus) (current, pinned mig.Layout) {
	if !g.MIGEnabled {
		return nil, nil
	}
	current, err := mig.ParseLayout(g.Layout)
	if err != nil {
		return nil, nil
	}
	// GPU instances of profiles the catalog lacks (made out of band) are
	// no part of any rule's layout: the agent destroys them once free.
	current, _ = m.SplitCatalogued(current)
	if m.Validate(current) != nil {
		return nil, nil
	}
	inUse, err := mig.ParseLayout(g.InUse)
	if err != nil {
		return current, nil
	}
	for _, d := range inUse {
		if current.Contains(d) {
			pinned = append(pinned, d)
		}
	}
	return current, pinned
}

// uncataloguedInUse are the GPU's devices in use of profiles the catalog
// lacks (made out of band): no rule's layout holds them, so every layout
// written destroys them, and the agent keeps the GPU as it is while they
// are in use.
func uncataloguedInUse(m *mig.Model, g v1alpha1.GPUStatus) mig.Layout {
	if !g.MIGEnabled {
		return nil
	}
	current, err1 := mig.ParseLayout(g.Layout)
	inUse, err2 := mig.ParseLayout(g.InUse)
	if err1 != nil || err2 != nil {
		return nil
	}
	_, other := m.SplitCatalogued(current)
	var out mig.Layout
	for _, d := range other {
		if inUse.Contains(d) {
			out = append(out, d)
		}
	}
	return out
}

// explicitLayout parses and validates a rule's layout. Its errors, from
// mig.ParseLayout (ErrSyntax) and Model.Validate (ErrInvalidLayout,
// ErrUnknownProfile), already name the layout and what is wrong with it, so
// they are returned as they are: the condition message reads "invalid
// layout: layout … on <model>: <why>" without a stack of prefixes.
func explicitLayout(m *mig.Model, text string) (mig.Layout, error) {
	l, err := mig.ParseLayout(text)
	if err != nil {
		return nil, err
	}
	if err := m.Validate(l); err != nil {
		return nil, err
	}
	return l, nil
}

// fitProfiles places the wanted counts on the GPU. A GPU that holds them
// already keeps its layout. Otherwise the layout written before is kept
// when it still holds the wanted multiset, is valid and keeps every device
// in use, so that the target does not move while the hardware does. When
// the counts fit the GPU but not around all the devices in use, the layout
// is fitted around as many of them as it can keep (the fewest destroyed
// first): the agent will block on the others, which is reported rather
// than hidden. Counts that fit on no GPU of the model give the error of the
// fit without devices in use.
func fitProfiles(m *mig.Model, profiles map[string]int32, current, pinned mig.Layout, prev *v1alpha1.GPUSpec) (mig.Layout, error) {
	want := make(map[string]int, len(profiles))
	for p, n := range profiles {
		want[p] = int(n)
	}
	if maps.Equal(current.Counts(), nonZero(want)) && m.Validate(current) == nil {
		return current.Canonical(), nil
	}
	if prev != nil && prev.MIGEnabled {
		if l, ok := stableLayout(m, prev.Layout, want, pinned); ok {
			return l, nil
		}
	}
	res, err := m.Fit(mig.FitRequest{Want: want, Current: current, Pinned: pinned, AllowMoves: true})
	if err != nil && len(pinned) > 1 && errors.Is(err, mig.ErrDoesNotFit) {
		if l, ok := fitKeepingMostInUse(m, want, current, pinned); ok {
			return l, nil
		}
	}
	if err != nil && len(pinned) > 0 && errors.Is(err, mig.ErrDoesNotFit) {
		// Counts that fit on no GPU of the model are reported as such,
		// not blamed on the devices in use (whose changes would change
		// the message).
		res2, err2 := m.Fit(mig.FitRequest{Want: want, Current: current, AllowMoves: true})
		if err2 == nil {
			return res2.Layout, nil
		}
		res, err = res2, err2
	}
	if err != nil {
		return nil, fmt.Errorf("fitting profiles: %w", err)
	}
	return res.Layout, nil
}

// fitKeepingMostInUse fits want around the largest subset of the devices in
// use that it fits around (all of them did not fit), choosing among subsets
// of that size the fit that destroys the fewest devices, then the first in
// subset order; false when it fits around none but the empty subset.
func fitKeepingMostInUse(m *mig.Model, want map[string]int, current, pinned mig.Layout) (mig.Layout, bool) {
	pinned = pinned.Canonical()
	for k := len(pinned) - 1; k > 0; k-- {
		var best *mig.FitResult
		mig.ForEachSubset(len(pinned), k, func(idx []int) {
			keep := make(mig.Layout, len(idx))
			for i, j := range idx {
				keep[i] = pinned[j]
			}
			res, err := m.Fit(mig.FitRequest{Want: want, Current: current, Pinned: keep, AllowMoves: true})
			if err == nil && (best == nil || len(res.Destroyed) < len(best.Destroyed)) {
				best = &res
			}
		})
		if best != nil {
			return best.Layout, true
		}
	}
	return nil, false
}

func stableLayout(m *mig.Model, text string, want map[string]int, pinned mig.Layout) (mig.Layout, bool) {
	l, err := mig.ParseLayout(text)
	if err != nil || m.Validate(l) != nil {
		return nil, false
	}
	if !maps.Equal(l.Counts(), nonZero(want)) {
		return nil, false
	}
	for _, d := range pinned {
		if !l.Contains(d) {
			return nil, false
		}
	}
	return l, true
}

func nonZero(w map[string]int) map[string]int {
	out := make(map[string]int, len(w))
	for p, n := range w {
		if n != 0 {
			out[p] = n
		}
	}
	return out
}

func destroyedInUse(pinned, desired mig.Layout) mig.Layout {
	var lost mig.Layout
	for _, d := range pinned {
		if !desired.Contains(d) {
			lost = append(lost, d)
		}
	}
	return lost
}

// formatProfiles prints counts as "1g.10gb:4,3g.40gb:1", sorted by profile
// name.
func formatProfiles(p map[string]int32) string {
	parts := make([]string, 0, len(p))
	for _, name := range slices.Sorted(maps.Keys(p)) {
		parts = append(parts, fmt.Sprintf("%s:%d", name, p[name]))
	}
	return strings.Join(parts, ",")
}

func productOf(g v1alpha1.GPUStatus) string {
	switch {
	case g.Product != "":
		return g.Product
	case g.Model != "":
		return g.Model
	}
	return "unknown product"
}
