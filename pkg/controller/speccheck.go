package controller

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/miglayout/miglayout/api/v1alpha1"
	"github.com/miglayout/miglayout/pkg/mig"
	"k8s.io/apimachinery/pkg/util/sets"
)

// SpecProblem is a part of a MigLayout's spec that has no effect on the GPUs
// of its selected nodes as they are: a Static rule that decides no GPU, an
// Auto-mode profile that no GPU model of the nodes offers, or spares that no
// node can hold. It is reported in the Degraded condition; nothing is
// touched because of it.
type SpecProblem struct {
	// Reason is v1alpha1.ReasonRuleMatchesNoGPU, ReasonProfileNotOffered,
	// ReasonSparesNotHoldable or ReasonNoNodes.
	Reason string
	// Message names the rule or profile and what the nodes have.
	Message string
	// Subject is the part of the spec it is about (a rule's name, a
	// profile): with Reason it tells a problem apart from others whatever
	// the nodes are.
	Subject string
}

// noNodesProblem is the spec problem of a MigLayout whose node selector
// selects no node: most often a typo in a label, which would otherwise
// leave the MigLayout looking healthy while it applies to nothing.
var noNodesProblem = SpecProblem{Reason: v1alpha1.ReasonNoNodes, Subject: "nodeSelector", Message: NoNodesMessage}

// NoNodesMessage tells of a node selector that selects no node.
const NoNodesMessage = "the node selector selects no node (compare its labels with kubectl get nodes --show-labels)"

// CheckSpec looks for the parts of spec that apply to none of the GPUs the
// agents reported (node name to NodeMigLayout.status.gpus). The caller
// passes every node the MigLayout manages, and only once all of them have
// reported: a node not heard from yet could hold the GPU a rule is for.
// GPUs whose model is not in cat count for rule matching (by product name)
// but offer no profile.
func CheckSpec(cat *mig.Catalog, spec *v1alpha1.MigLayoutSpec, inventory map[string][]v1alpha1.GPUStatus) []SpecProblem {
	if len(inventory) == 0 {
		return nil
	}
	nodes := slices.Sorted(maps.Keys(inventory))
	if spec.Mode == v1alpha1.ModeAuto {
		if spec.Policy == nil {
			return nil
		}
		return checkPolicy(cat, spec.Policy, nodes, inventory)
	}
	return checkRules(spec.Rules, nodes, inventory)
}

// checkRules reports each rule that is the first match of no GPU.
func checkRules(rules []v1alpha1.LayoutRule, nodes []string, inventory map[string][]v1alpha1.GPUStatus) []SpecProblem {
	decides := make([]bool, len(rules))
	matches := make([]bool, len(rules))
	for _, n := range nodes {
		for _, g := range inventory[n] {
			if g.Product == "" && g.Model == "" {
				continue // never read: no rule decides it (DesiredGPUs)
			}
			if i, _, ok := matchRule(rules, g); ok {
				decides[i] = true
			}
			for i := range rules {
				if ruleMatches(&rules[i], g) {
					matches[i] = true
				}
			}
		}
	}
	var out []SpecProblem
	for i := range rules {
		if decides[i] {
			continue
		}
		why := "matches no GPU"
		if matches[i] {
			why = "matches only GPUs an earlier rule decides"
		}
		out = append(out, SpecProblem{
			Reason: v1alpha1.ReasonRuleMatchesNoGPU, Subject: ruleName(i, &rules[i]),
			Message: fmt.Sprintf("%s %s (%d selected %s; %s)", ruleName(i, &rules[i]), why,
				len(nodes), plural(int32(len(nodes)), "node", "nodes"), gpuSummary(nodes, inventory)),
		})
	}
	return out
}

// checkPolicy reports allowed profiles and spares that no GPU model of the
// nodes offers, and spares of a profile a node cannot hold that many of
// even with nothing else on its GPUs.
func checkPolicy(cat *mig.Catalog, p *v1alpha1.AutoPolicy, nodes []string, inventory map[string][]v1alpha1.GPUStatus) []SpecProblem {
	// Each GPU's model as the planner plans on it: NVML's placements, no
	// profile NVML gives another GI profile ID.
	variants := modelVariants{}
	models := map[string]*mig.Model{}       // by Key
	nodeModels := map[string][]*mig.Model{} // one entry per GPU the planner may use
	names := sets.New[string]()
	for _, n := range nodes {
		for _, g := range inventory[n] {
			if m, err := lookupModel(cat, g); err == nil {
				m = variants.of(m, g.NVMLProfiles)
				models[m.Key()] = m
				names.Insert(m.Name)
				// Auto mode never turns MIG on: a GPU without it
				// holds no spare.
				if autoPlannable(g) {
					nodeModels[n] = append(nodeModels[n], m)
				}
			}
		}
	}
	modelNames := sets.List(names)
	offered := func(profile string) bool {
		for _, m := range models {
			if _, err := m.Profile(profile); err == nil {
				return true
			}
		}
		return false
	}
	notOffered := func(what string) SpecProblem {
		return SpecProblem{Reason: v1alpha1.ReasonProfileNotOffered, Subject: what,
			Message: fmt.Sprintf("%s is offered by no GPU model of the %d selected %s (%s)", what,
				len(nodes), plural(int32(len(nodes)), "node", "nodes"), orNone(modelNames))}
	}
	var out []SpecProblem
	for _, a := range p.AllowedProfiles {
		if !offered(string(a)) {
			out = append(out, notOffered("allowed profile "+string(a)))
		}
	}
	spareProblems := len(out)
	for _, prof := range slices.Sorted(maps.Keys(p.Spares)) {
		want := int(p.Spares[prof])
		if want == 0 {
			continue
		}
		if !offered(prof) {
			out = append(out, notOffered("spare profile "+prof))
			continue
		}
		var short []string
		for _, n := range nodes {
			most := 0
			for _, m := range nodeModels[n] {
				if pr, err := m.Profile(prof); err == nil {
					most += pr.MaxCount
				}
			}
			if most < want {
				short = append(short, fmt.Sprintf("%s holds at most %d", n, most))
			}
		}
		if len(short) > 0 {
			out = append(out, SpecProblem{Reason: v1alpha1.ReasonSparesNotHoldable, Subject: "spares of " + prof,
				Message: fmt.Sprintf("spares of %d %s per node: %s (on its GPUs in MIG mode)", want, prof, joinBounded(short, 5))})
		}
	}
	if len(out) > spareProblems || len(p.Spares) == 0 {
		return out
	}
	// Each profile's spares fit a node; all of them at once may not. Nodes
	// with the same GPUs get the same answer.
	var short []string
	want := sparesWanted(p.Spares)
	holds := map[string]bool{}
	for _, n := range nodes {
		var key strings.Builder
		for _, m := range nodeModels[n] {
			key.WriteString(m.Key())
			key.WriteByte(',')
		}
		ok, seen := holds[key.String()]
		if !seen {
			ok = mig.HoldTogether(nodeModels[n], want)
			holds[key.String()] = ok
		}
		if !ok {
			short = append(short, n)
		}
	}
	if len(short) > 0 {
		out = append(out, SpecProblem{Reason: v1alpha1.ReasonSparesNotHoldable, Subject: "spares",
			Message: fmt.Sprintf("spares %s per node do not fit on the GPUs of %s all at once", formatSpares(p.Spares), joinBounded(short, 5))})
	}
	return out
}

func sparesWanted(spares map[string]int32) map[string]int {
	out := make(map[string]int, len(spares))
	for k, v := range spares {
		out[k] = int(v)
	}
	return out
}

// formatSpares renders spares as "1× 3g.40gb + 2× 4g.40gb" (zero counts
// left out).
func formatSpares(spares map[string]int32) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(spares)) {
		if spares[k] > 0 {
			parts = append(parts, fmt.Sprintf("%d× %s", spares[k], k))
		}
	}
	return strings.Join(parts, " + ")
}

// gpuSummary lists the product names reported and on how many GPUs.
func gpuSummary(nodes []string, inventory map[string][]v1alpha1.GPUStatus) string {
	count := map[string]int{}
	for _, n := range nodes {
		for _, g := range inventory[n] {
			count[productNames(g)]++
		}
	}
	var parts []string
	for _, p := range slices.Sorted(maps.Keys(count)) {
		parts = append(parts, fmt.Sprintf("%d× %s", count[p], p))
	}
	return "GPUs: " + orNone(parts)
}

// productNames are the names a rule's productName matches a GPU by: its
// catalog model's, then NVML's product name where it differs, e.g.
// "H100-SXM5-80GB (NVIDIA H100 80GB HBM3)".
func productNames(g v1alpha1.GPUStatus) string {
	if g.Model != "" && g.Product != "" && !strings.EqualFold(g.Model, g.Product) {
		return fmt.Sprintf("%s (%s)", g.Model, g.Product)
	}
	return productOf(g)
}

func orNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}

// ReportedInventory returns the reported GPUs of the nodes the MigLayout
// selects whose agents have reported (SelectedInventory without waiting for
// the others).
func ReportedInventory(sel Selection, nmls map[string]*v1alpha1.NodeMigLayout) map[string][]v1alpha1.GPUStatus {
	out := map[string][]v1alpha1.GPUStatus{}
	for _, node := range sel.Nodes {
		if nml := nmls[node]; AgentReported(nml) {
			out[node] = nml.Status.GPUs
		}
	}
	return out
}

// SelectedInventory returns the reported GPUs of every node the MigLayout
// selects, or nil while one it manages has not reported. Nodes in conflict
// (another MigLayout selects them too) count: the spec is judged on the
// nodes it is written for, so a rule for GPUs only such a node has is not
// reported as matching no GPU (the Conflict condition says what is wrong).
func SelectedInventory(sel Selection, nmls map[string]*v1alpha1.NodeMigLayout) map[string][]v1alpha1.GPUStatus {
	out := map[string][]v1alpha1.GPUStatus{}
	for _, node := range sel.Nodes {
		nml := nmls[node]
		if !AgentReported(nml) {
			if sel.Conflicted(node) {
				continue // no report to count: it does not hold the check back
			}
			return nil
		}
		out[node] = nml.Status.GPUs
	}
	return out
}
