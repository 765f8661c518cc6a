package agent

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/miglayout/miglayout/api/v1alpha1"
	"github.com/miglayout/miglayout/pkg/mig"
	"github.com/miglayout/miglayout/pkg/mig/gpu"
	migslices "github.com/miglayout/miglayout/pkg/slices"
)

// BuildStatus returns the NodeMigLayout status for the result of a pass:
// every GPU of the node with its actual layout and devices in use, the phase
// of each GPU the spec lists (GPUs it does not list are Ready as they are),
// and the Ready and Degraded conditions. Phase transition times are kept from
// old where the phase did not change. old is left as it is: a caller
// compares the result with it to skip a write that changes nothing.
func BuildStatus(old v1alpha1.NodeMigLayoutStatus, generation int64, res *SyncResult, now metav1.Time) v1alpha1.NodeMigLayoutStatus {
	st := v1alpha1.NodeMigLayoutStatus{ObservedGeneration: generation, Conditions: slices.Clone(old.Conditions)}
	prev := map[int32]v1alpha1.GPUStatus{}
	for _, g := range old.GPUs {
		prev[g.Index] = g
	}
	var degraded, unmanaged []string
	var notReady bool
	// The status lists at most maxStatusGPUs GPUs (the CRD's MaxItems):
	// on a node with more, the rest are named in Degraded (and neither
	// the controller nor the Auto planner manages them), so that the
	// status is still written.
	var unlisted []string
	unlistedReason := ""
	for _, g := range res.GPUs {
		if len(st.GPUs) >= maxStatusGPUs {
			unlisted = append(unlisted, fmt.Sprintf("gpu %d (%s): over the %d GPUs a NodeMigLayout lists, left as it is", g.GPU.Index, g.GPU.UUID, maxStatusGPUs))
			unlistedReason = cmp.Or(unlistedReason, v1alpha1.ReasonUnknownGPU)
			continue
		}
		gs := v1alpha1.GPUStatus{
			Index:      int32(g.GPU.Index),
			UUID:       g.GPU.UUID,
			Product:    migslices.Clip(g.GPU.ProductName, 64),
			MIGCapable: ptr.To(g.GPU.MIGCapable),
			MIGEnabled: g.GPU.MIGMode.Current,
			MIGPending: g.GPU.MIGMode.Pending,
			InUse:      res.InUse[g.GPU.Index].String(),
			Xids:       res.Xids[g.GPU.Index],
			Phase:      v1alpha1.PhaseReady,
			Reason:     v1alpha1.ReasonLayoutApplied,
		}
		if g.GPU.Model != nil {
			gs.Model = g.GPU.Model.Name
		}
		gs.Attributes = gpuAttributes(g.GPU)
		gs.NVMLProfiles = nvmlProfiles(g.GPU)
		for _, m := range g.GPU.CatalogMismatches[:min(len(g.GPU.CatalogMismatches), 16)] {
			gs.CatalogMismatches = append(gs.CatalogMismatches, truncate(m, 256))
		}
		if g.GPU.MIGMode.Current {
			gs.Layout = layoutOf(&g).String()
		}
		if r, ok := res.Results[g.GPU.Index]; ok {
			gs.Phase, gs.Reason, gs.Message = r.Phase, r.Reason, truncate(r.Message, 1024)
		} else {
			gs.Message = "not in the NodeMigLayout spec: left as it is"
			unmanaged = append(unmanaged, fmt.Sprintf("gpu %d", g.GPU.Index))
		}
		st.GPUs = append(st.GPUs, gs)
	}
	// A GPU NVML cannot read (fallen off the bus), or one the spec asks for
	// that NVML does not show (a wrong index), keeps its result, not only
	// its event, with what identified it when it was last read.
	seen := make(map[int]bool, len(res.GPUs))
	seenAt := make(map[string]int, len(res.GPUs)) // by UUID
	for _, g := range res.GPUs {
		seen[g.GPU.Index] = true
		seenAt[g.GPU.UUID] = g.GPU.Index
	}
	// The same for a spec naming more GPUs the node lacks (edited by
	// hand): the ones NVML shows come first.
	for _, idx := range slices.Sorted(maps.Keys(res.Results)) {
		if r := res.Results[idx]; !seen[idx] && r.Phase != v1alpha1.PhaseReady {
			if len(st.GPUs) >= maxStatusGPUs {
				unlisted = append(unlisted, fmt.Sprintf("gpu %d %s: %s", idx, r.Reason, truncate(r.Message, 128)))
				unlistedReason = cmp.Or(unlistedReason, r.Reason)
				continue
			}
			gs := v1alpha1.GPUStatus{Index: int32(idx), Phase: r.Phase, Reason: r.Reason, Message: r.Message, Xids: res.Xids[idx]}
			if p, ok := prev[gs.Index]; ok && r.Reason == v1alpha1.ReasonGPUMissing && (p.UUID != "" || p.Product != "" || p.Model != "") {
				at, moved := seenAt[p.UUID]
				if moved || p.UUID == "" {
					// NVML numbered the GPUs anew: the GPU of the row is
					// there, at another index (its UUID is that row's),
					// and the one that left is one NVML shows nowhere.
					// The row keeps what the index held (product, model),
					// so that its spec entry, and its loss, stay until
					// it is back or someone forgets it; and its note,
					// told when the GPUs were numbered anew.
					gs.Product, gs.Model, gs.MIGCapable = p.Product, p.Model, p.MIGCapable
					switch {
					case moved:
						gs.Message += fmt.Sprintf(" (NVML numbered the GPUs anew: %s, here before, is gpu %d now%s; to forget this index, delete this NodeMigLayout: it is made again with the GPUs NVML shows)",
							p.UUID, at, notSeen(prev, seenAt, res.Results))
					case strings.HasPrefix(p.Message, r.Message):
						gs.Message = p.Message
					}
					gs.Message = truncate(gs.Message, 1024)
					st.GPUs = append(st.GPUs, gs)
					continue
				}
			}
			if p, ok := prev[gs.Index]; ok && p.UUID != "" {
				gs.UUID, gs.Product, gs.Model, gs.Attributes = p.UUID, p.Product, p.Model, p.Attributes
				// Whether it can run MIG at all, too: rules for every
				// MIG GPU would otherwise take a lost L4 for one, and
				// fail it as an unknown model.
				gs.MIGCapable = p.MIGCapable
				if r.Reason != v1alpha1.ReasonGPUUnreadable {
					// NVML does not count it any more (taken out, or
					// not enumerated since a reboot): it stays in the
					// spec and here, Degraded, so that its loss is
					// seen, until it is back or someone forgets it.
					gs.Message += fmt.Sprintf(" (it was %s; to forget it, delete this NodeMigLayout: it is made again with the GPUs NVML shows)", p.UUID)
				}
			}
			gs.Message = truncate(gs.Message, 1024)
			st.GPUs = append(st.GPUs, gs)
		}
	}
	for i := range st.GPUs {
		gs := &st.GPUs[i]
		gs.LastTransitionTime = &now
		if p, ok := prev[gs.Index]; ok && p.Phase == gs.Phase && p.LastTransitionTime != nil {
			gs.LastTransitionTime = p.LastTransitionTime
		}
		gs.IdleSince = idleSince(prev[gs.Index], *gs, now)
		switch gs.Phase {
		case v1alpha1.PhaseReady:
		case v1alpha1.PhaseBlocked, v1alpha1.PhaseFailed:
			notReady = true
			degraded = append(degraded, fmt.Sprintf("gpu %d %s: %s", gs.Index, gs.Reason, gs.Message))
		default:
			notReady = true
		}
	}
	var extra []string
	if len(unlisted) > 0 {
		notReady = true
		extra = append(extra, fmt.Sprintf("%d GPUs the status cannot list", len(unlisted)))
		degraded = append(degraded, fmt.Sprintf("not listed (the status lists at most %d GPUs): %s", maxStatusGPUs, strings.Join(unlisted, "; ")))
	}
	ready := metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonLayoutApplied,
		Message: "every GPU holds its desired layout and the pool is published", ObservedGeneration: generation}
	if len(unmanaged) > 0 {
		// A GPU the spec leaves out may be one the MigLayout could not
		// compute a layout for: told here, not only in its row.
		ready.Message = fmt.Sprintf("every GPU the spec lists holds its desired layout and the pool is published; %s not in the spec, left as it is (Static mode: no rule matches it, or the MigLayout could not compute its layout, as its row for this node says; Auto mode: no plan has changed it yet)",
			strings.Join(unmanaged, ", "))
	}
	if notReady {
		ready = notReadyCondition(st.GPUs, extra, generation)
	}
	deg := metav1.Condition{Type: v1alpha1.ConditionDegraded, Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonNoProblems,
		Message: "no GPU is blocked or failed", ObservedGeneration: generation}
	if len(degraded) > 0 {
		deg.Status, deg.Reason = metav1.ConditionTrue, degradedReason(st.GPUs)
		if deg.Reason == v1alpha1.ReasonNoProblems {
			deg.Reason = cmp.Or(unlistedReason, v1alpha1.ReasonInvalidLayout)
		}
		deg.Message = truncate(strings.Join(degraded, "; "), 32768)
	}
	meta.SetStatusCondition(&st.Conditions, ready)
	meta.SetStatusCondition(&st.Conditions, deg)
	return st
}

// notReadyCondition is a NodeMigLayout's Ready=False condition for the
// spec of generation: GPUsNotReady, naming each GPU row not Ready with its
// phase (and reason where it is not the phase's name), then extra.
func notReadyCondition(gpus []v1alpha1.GPUStatus, extra []string, generation int64) metav1.Condition {
	var parts []string
	for _, g := range gpus {
		if g.Phase == v1alpha1.PhaseReady {
			continue
		}
		part := fmt.Sprintf("gpu %d %s", g.Index, g.Phase)
		if g.Reason != "" && g.Reason != string(g.Phase) {
			part += " (" + g.Reason + ")"
		}
		parts = append(parts, part)
	}
	return metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonGPUsNotReady,
		Message: truncate("not ready: "+strings.Join(append(parts, extra...), ", "), 32768), ObservedGeneration: generation}
}

// maxStatusGPUs is the most GPUs NodeMigLayout status lists (its CRD's
// MaxItems on status.gpus).
const maxStatusGPUs = 16

// degradedReason is the reason of the first Blocked or Failed GPU.
func degradedReason(gpus []v1alpha1.GPUStatus) string {
	for _, g := range gpus {
		if g.Phase == v1alpha1.PhaseBlocked || g.Phase == v1alpha1.PhaseFailed {
			return g.Reason
		}
	}
	return v1alpha1.ReasonNoProblems
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return migslices.Clip(s, n-3) + "..."
}

// nvmlProfiles are the profiles NVML describes otherwise than the catalog
// (values, placements, GI profile ID), sorted by name, at most the 32 the
// API holds (no model has as many). A profile whose values agree carries
// the catalog's.
func nvmlProfiles(g gpu.GPU) []v1alpha1.NVMLProfile {
	byName := map[string]*v1alpha1.NVMLProfile{}
	entry := func(name string) *v1alpha1.NVMLProfile {
		if e, ok := byName[name]; ok {
			return e
		}
		v := mig.NVMLProfileValues{Profile: name}
		if g.Model != nil {
			if p, err := g.Model.Profile(name); err == nil {
				v = p.NVMLValues()
			}
		}
		e := &v1alpha1.NVMLProfile{Profile: v.Profile, MemoryMiB: v.MemoryMiB,
			Multiprocessors: int32(v.Multiprocessors), CopyEngines: int32(v.CopyEngines), Decoders: int32(v.Decoders),
			Encoders: int32(v.Encoders), JPEGEngines: int32(v.JPEG), OFAEngines: int32(v.OFA)}
		byName[name] = e
		return e
	}
	for _, v := range g.ProfileValues {
		e := entry(v.Profile)
		e.MemoryMiB, e.Multiprocessors, e.CopyEngines = v.MemoryMiB, int32(v.Multiprocessors), int32(v.CopyEngines)
		e.Decoders, e.Encoders, e.JPEGEngines, e.OFAEngines = int32(v.Decoders), int32(v.Encoders), int32(v.JPEG), int32(v.OFA)
	}
	for name, pls := range g.NVMLPlacements {
		e := entry(name)
		// Devices are created as wide as the catalog says: NVML's
		// placements of another width are of no use (catalogMismatches
		// tells them).
		if g.Model != nil {
			if p, err := g.Model.Profile(name); err == nil {
				pls = slices.DeleteFunc(slices.Clone(pls), func(pl mig.Placement) bool { return pl.Size != p.MemorySlices })
			}
		}
		e.NotOffered = len(pls) == 0
		for _, pl := range pls[:min(len(pls), 8)] {
			e.PlacementStarts = append(e.PlacementStarts, int32(pl.Start))
		}
	}
	for name, id := range g.NVMLProfileIDs {
		entry(name).GIProfileID = ptr.To(int32(id))
	}
	var out []v1alpha1.NVMLProfile
	for _, name := range slices.Sorted(maps.Keys(byName)) {
		out = append(out, *byName[name])
	}
	return out[:min(len(out), 32)]
}

// describeCatalogDiffers says, for people, how NVML's profile table of g
// differs from the catalog's: values (describeNVMLProfiles) and mismatches
// of IDs or placements.
func describeCatalogDiffers(g gpu.GPU) string {
	var parts []string
	if len(g.ProfileValues) > 0 {
		parts = append(parts, describeNVMLProfiles(g))
	}
	if len(g.CatalogMismatches) > 0 {
		parts = append(parts, "NVML's profile table differs from the catalog's in what names and validates devices: "+
			strings.Join(g.CatalogMismatches, "; ")+"; NVML may refuse a layout the catalog allows (the catalog entry needs correcting)")
	}
	return strings.Join(parts, ". ")
}

// describeNVMLProfiles says, for people, how NVML's description of g's
// profiles differs from the catalog's.
func describeNVMLProfiles(g gpu.GPU) string {
	var parts []string
	for _, v := range g.ProfileValues {
		p, err := g.Model.Profile(v.Profile)
		if err != nil {
			continue
		}
		var diffs []string
		for _, d := range []struct {
			what        string
			nvml, table int64
		}{
			{"MiB", v.MemoryMiB, p.MemoryMiB}, {"multiprocessors", int64(v.Multiprocessors), int64(p.Multiprocessors)},
			{"copy engines", int64(v.CopyEngines), int64(p.CopyEngines)}, {"decoders", int64(v.Decoders), int64(p.Decoders)},
			{"encoders", int64(v.Encoders), int64(p.Encoders)}, {"JPEG engines", int64(v.JPEG), int64(p.JPEGEngines)},
			{"OFA engines", int64(v.OFA), int64(p.OFAEngines)},
		} {
			if d.nvml != d.table {
				diffs = append(diffs, fmt.Sprintf("%d %s (catalog %d)", d.nvml, d.what, d.table))
			}
		}
		parts = append(parts, v.Profile+": "+strings.Join(diffs, ", "))
	}
	return "NVML describes " + strings.Join(parts, "; ") + "; devices are published, and planned, with NVML's values"
}

// gpuAttributes are the GPU's NVML properties the Auto planner needs to judge
// selectors on hypothetical devices as on the published ones.
func gpuAttributes(g gpu.GPU) *v1alpha1.GPUAttributes {
	return &v1alpha1.GPUAttributes{
		PCIBusID:              migslices.Clip(g.PCIBusID, 32),
		PCIeRoot:              migslices.Clip(g.PCIeRoot, 64),
		NUMANode:              int32Of(g.NUMANode),
		Minor:                 ptr.To(int32(g.Minor)),
		Brand:                 migslices.Clip(g.Brand, 64),
		Architecture:          migslices.Clip(g.Architecture, 64),
		CUDAComputeCapability: migslices.Clip(g.CUDAComputeCapability, 16),
		DriverVersion:         migslices.Clip(g.DriverVersion, 32),
		CUDADriverVersion:     migslices.Clip(g.CUDADriverVersion, 16),
	}
}

// idleSince is GPUStatus.IdleSince of gs, whose status before was prev: kept
// from prev while the same GPU stays idle (MIG mode on, Ready, nothing in
// use), now where it becomes idle, unset where it is not.
func idleSince(prev, gs v1alpha1.GPUStatus, now metav1.Time) *metav1.Time {
	idle := func(s v1alpha1.GPUStatus) bool {
		return s.MIGEnabled && s.MIGPending == s.MIGEnabled && s.Phase == v1alpha1.PhaseReady && s.InUse == "" && s.UUID != ""
	}
	switch {
	case !idle(gs):
		return nil
	case idle(prev) && prev.UUID == gs.UUID && prev.IdleSince != nil:
		return prev.IdleSince
	default:
		return &now
	}
}

// int32Of is *n as an int32, nil for nil.
func int32Of(n *int) *int32 {
	if n == nil {
		return nil
	}
	return ptr.To(int32(*n))
}

// notSeen names the GPUs of the rows of prev that NVML shows at no index
// now ("; not seen any more: GPU-... (NVIDIA A100-SXM4-80GB)"), "" where
// there is none. A GPU NVML counts but cannot read (results, reason
// GPUUnreadable) is not one of them.
func notSeen(prev map[int32]v1alpha1.GPUStatus, seenAt map[string]int, results map[int]GPUResult) string {
	var gone []string
	for _, idx := range slices.Sorted(maps.Keys(prev)) {
		if results[int(idx)].Reason == v1alpha1.ReasonGPUUnreadable {
			continue
		}
		if p := prev[idx]; p.UUID != "" {
			if _, ok := seenAt[p.UUID]; !ok {
				gone = append(gone, fmt.Sprintf("%s (%s)", p.UUID, p.Product))
			}
		}
	}
	if len(gone) == 0 {
		return ""
	}
	return "; not seen any more: " + strings.Join(gone, ", ")
}
