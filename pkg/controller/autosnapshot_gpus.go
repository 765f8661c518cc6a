package controller

import (
	"fmt"

	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/utils/ptr"

	"github.com/miglayout/miglayout/api/v1alpha1"
	"github.com/miglayout/miglayout/pkg/mig"
	"github.com/miglayout/miglayout/pkg/mig/gpu"
	"github.com/miglayout/miglayout/pkg/planner"
	migslices "github.com/miglayout/miglayout/pkg/slices"
)

// keepBlockedSlots counts the blocked changes of a Frozen node's GPUs
// toward the limits on GPUs changing at once again: autoGPUs gives them no
// slot, as the plan cancels them (BlockedChanges), but nothing is written
// for a Frozen node, and such a change goes on once its device is free.
func keepBlockedSlots(nml *v1alpha1.NodeMigLayout, gpus []planner.GPU) {
	for i := range gpus {
		if _, st, ok := specAndStatus(nml, gpus[i].Info.Index); ok && blockedByUse(st) && gpus[i].Changing {
			gpus[i].Retrying = false
		}
	}
}

// servedOnFrozen gives a Frozen node's GPUs the pods their changes are
// for (planner.GPU.Serves, which the planner takes only where the node's
// agent carries on: planner.Node.CarriesOn) where the change is under way,
// or done and its GPU Ready on it (its free devices wait for those pods
// until kube-scheduler binds them, as on a node that is not Frozen), and
// none where the agent has not started it (the GPU Ready or Draining on its
// old layout): that one may be dropped (a paused MigLayout's is,
// dropUnstarted) and bring nothing, so its pods are planned elsewhere.
func servedOnFrozen(nml *v1alpha1.NodeMigLayout, gpus []planner.GPU) {
	for i := range gpus {
		g := &gpus[i]
		spec, st, ok := specAndStatus(nml, g.Info.Index)
		switch {
		case !ok:
			g.Serves = nil
		case g.Changing:
			if st.Phase == v1alpha1.PhaseReady || st.Phase == v1alpha1.PhaseDraining {
				g.Serves = nil
			}
		case st.Phase == v1alpha1.PhaseReady && spec.MIGEnabled && spec.Layout != "" && len(spec.ServedPods) > 0:
			if desired, err := mig.ParseLayout(spec.Layout); err == nil && desired.Equal(g.Layout) {
				g.Serves = spec.ServedPods
			}
		}
	}
}

// modelVariants are the catalog models with the profile values agents
// report from NVML (GPUStatus.NVMLProfiles), one per model and values.
type modelVariants map[string]*mig.Model

// of returns model as NVML describes it on a GPU that reports ps. Values of
// a profile the model lacks are skipped; a report the model cannot take at
// all (memory beyond the GPU's) leaves the catalog's values: the GPU is
// planned on either way.
func (v modelVariants) of(model *mig.Model, ps []v1alpha1.NVMLProfile) *mig.Model {
	if len(ps) == 0 {
		return model
	}
	values := make([]mig.NVMLProfileValues, len(ps))
	placements := map[string][]mig.Placement{}
	var refused []string
	for i, p := range ps {
		values[i] = mig.NVMLProfileValues{Profile: p.Profile, MemoryMiB: p.MemoryMiB, Multiprocessors: int(p.Multiprocessors),
			CopyEngines: int(p.CopyEngines), Decoders: int(p.Decoders), Encoders: int(p.Encoders), JPEG: int(p.JPEGEngines), OFA: int(p.OFAEngines)}
		if p.NotOffered {
			placements[p.Profile] = []mig.Placement{}
		}
		if prof, err := model.Profile(p.Profile); err == nil && len(p.PlacementStarts) > 0 {
			for _, start := range p.PlacementStarts {
				placements[p.Profile] = append(placements[p.Profile], mig.Placement{Start: int(start), Size: prof.MemorySlices})
			}
		}
		if p.GIProfileID != nil {
			refused = append(refused, p.Profile)
		}
	}
	key := fmt.Sprintf("%s %+v %v %v", model.Name, values, placements, refused)
	if m, ok := v[key]; ok {
		return m
	}
	m, err := model.WithNVMLValues(values)
	if err != nil {
		m = model
	}
	// Only NVML's placements are planned, and no profile NVML gives
	// another GI profile ID (the agent would refuse it).
	if withPlacements, err := m.WithNVMLPlacements(placements, refused); err == nil {
		m = withPlacements
	}
	v[key] = m
	return m
}

// applyAttributes sets on info what the agent reported of the GPU beyond
// its model (NodeMigLayout status), the values its devices are published
// with; a value not reported keeps PlannedGPU's stand-in.
func applyAttributes(info *gpu.GPU, a *v1alpha1.GPUAttributes) {
	if a == nil {
		return
	}
	set := func(into *string, v string) {
		if v != "" {
			*into = v
		}
	}
	set(&info.Brand, a.Brand)
	set(&info.Architecture, a.Architecture)
	set(&info.CUDAComputeCapability, a.CUDAComputeCapability)
	set(&info.DriverVersion, a.DriverVersion)
	set(&info.CUDADriverVersion, a.CUDADriverVersion)
	set(&info.PCIBusID, a.PCIBusID)
	set(&info.PCIeRoot, a.PCIeRoot)
	if a.NUMANode != nil {
		info.NUMANode = ptr.To(int(*a.NUMANode))
	}
	if a.Minor != nil {
		info.Minor = int(*a.Minor)
	}
}

// blockedByUse reports whether the agent cannot apply the GPU's desired
// layout because a device it destroys is in use (or may be: an allocation
// it cannot resolve, which also has it report every device of the GPU in
// use), or ever (the layout is invalid for the GPU, NVML no longer counts
// it, or the change was planned for the GPU NVML showed at its index before
// it numbered the GPUs anew): the change is cancelled (BlockedChanges), its
// entry written again for the GPU there now. A GPU the agent reports
// unknown is never an Auto GPU (autoGPUs).
func blockedByUse(st v1alpha1.GPUStatus) bool {
	switch {
	case st.Phase == v1alpha1.PhaseBlocked:
		return st.Reason == v1alpha1.ReasonDeviceInUse || st.Reason == v1alpha1.ReasonUnknownAllocation || st.Reason == v1alpha1.ReasonSpecForAnotherGPU
	case st.Phase == v1alpha1.PhaseFailed:
		return st.Reason == v1alpha1.ReasonInvalidLayout || st.Reason == v1alpha1.ReasonGPUMissing
	}
	return false
}

// notComing reports whether the GPU's desired devices cannot be counted on:
// its change is cancelled (blockedByUse) or failed (an NVML error, drain
// taints the API server drops), which the agent retries with backoff. The
// planner sees the GPU's actual layout, still in flight: its free devices
// serve pods, and no other change is planned on it while the agent retries.
func notComing(st v1alpha1.GPUStatus) bool {
	return blockedByUse(st) || st.Phase == v1alpha1.PhaseFailed
}

// autoPlannable reports whether Auto mode may plan on a GPU: MIG mode on
// and no MIG mode change pending (Auto mode never changes MIG mode). A GPU
// whose MIG mode change waits for a reset is left out, and so counts toward
// no limit on GPUs changing at once: the reset may never come. So is one
// the agent withholds because NVIDIA's device plugin hands the node's GPUs
// out (DevicePluginActive): none of its devices is published.
func autoPlannable(st v1alpha1.GPUStatus) bool {
	return st.MIGEnabled && st.MIGPending == st.MIGEnabled && st.Reason != v1alpha1.ReasonDevicePluginActive
}

// specRoom tells which GPUs of a node may be planned on: those whose spec
// entry can be written, at an index the spec may name
// (v1alpha1.MaxGPUIndex), and in a spec that has their entry already or
// room for one more (v1alpha1.MaxNodeGPUs), counted in the order asked. An
// agent reports its GPUs' NVML indices, never more than a spec may hold;
// a status that says otherwise (written before the CRD bounded its
// indices, or by something that is not the agent) would make a plan the
// API server refuses to write.
type specRoom struct {
	specs map[int32]v1alpha1.GPUSpec
	left  int // entries the spec may still take
}

func newSpecRoom(specs map[int32]v1alpha1.GPUSpec) *specRoom {
	return &specRoom{specs: specs, left: v1alpha1.MaxNodeGPUs - len(specs)}
}

// take reports whether GPU idx may be planned on, counting the entry it
// may need.
func (r *specRoom) take(idx int32) bool {
	if idx < 0 || idx > v1alpha1.MaxGPUIndex {
		return false
	}
	if _, has := r.specs[idx]; has {
		return true
	}
	if r.left <= 0 {
		return false
	}
	r.left--
	return true
}

// autoGPUs are the GPUs of a node the planner may use: MIG on, known model.
// allocated are the names of the node's devices that claims hold (or that
// must stay as they are for another reason), adminHeld those that claims
// hold with admin access only: they stay, but a pending pod may get them
// (planner.GPU.Shared), even where the agent reports them in use (prepared
// for those claims, running their processes). Each GPU's hypothetical
// devices carry the attributes its agent reported. Where reclaims is true
// (the node is not Frozen), a GPU being
// given back whole that has lost nothing yet is planned on its actual
// layout (planner.GPU.Reclaiming, inFlightReclaim).
func autoGPUs(nml *v1alpha1.NodeMigLayout, catalog *mig.Catalog, variants modelVariants, allocated, adminHeld sets.Set[string], reclaims bool) []planner.GPU {
	allocatedKeys, adminKeys := migKeys(allocated), migKeys(adminHeld)
	specs := map[int32]v1alpha1.GPUSpec{}
	for _, s := range nml.Spec.GPUs {
		specs[s.Index] = s
	}
	room := newSpecRoom(specs)
	var out []planner.GPU
	for _, st := range nml.Status.GPUs {
		if !autoPlannable(st) || !room.take(st.Index) {
			continue
		}
		name := st.Model
		if name == "" {
			name = st.Product
		}
		model, err := catalog.Model(name)
		if err != nil {
			continue
		}
		actual, err1 := mig.ParseLayout(st.Layout)
		inUse, err2 := mig.ParseLayout(st.InUse)
		if err1 != nil || err2 != nil {
			continue
		}
		// Planned devices look as NVML will make them.
		model = variants.of(model, st.NVMLProfiles)
		info := migslices.PlannedGPU(model, int(st.Index))
		info.UUID, info.ProductName = st.UUID, st.Product
		applyAttributes(&info, st.Attributes)
		for _, d := range actual {
			if isAllocated(allocatedKeys, int(st.Index), d) && !inUse.Contains(d) {
				inUse = append(inUse, d)
			}
		}
		g := planner.GPU{Info: info, Layout: actual}
		// Since when the agent has seen it idle; the AutoPlanner's
		// idleTracker takes the earlier of this and its own count.
		if st.IdleSince != nil {
			g.IdleSince = st.IdleSince.Time
		}
		g.Pinned, g.Shared = splitShared(inUse, actual, int(st.Index), allocatedKeys, adminKeys)
		if spec, ok := specs[st.Index]; ok && !spec.MIGEnabled {
			// A change turning MIG off (written in Static mode) is in
			// flight: Auto mode never changes MIG mode, no device of the
			// GPU is coming, and the GPU counts toward the limits.
			g.Layout, g.Pinned, g.Shared, g.Changing = mig.Layout{}, nil, nil, true
			// One NVML failed, which the agent retries, or one blocked
			// by a device in use (or refused: blockedByUse), which may
			// wait for days, holds no slot (as for a change of layout
			// below; it is not cancelled, as that would turn MIG on
			// again against the operator's change:
			// TestChangeTurningMIGOffIsNeverCancelled). On a Frozen node
			// it keeps its slot (keepBlockedSlots).
			g.Retrying = blockedByUse(st) || st.Phase == v1alpha1.PhaseFailed && st.Reason == v1alpha1.ReasonNVMLError
		} else if ok {
			desired, err := mig.ParseLayout(spec.Layout)
			_, reclaim := inFlightReclaim(nml, int(st.Index))
			whole, ok := model.Whole()
			reclaim = reclaim && reclaims && ok && desired.Equal(mig.Layout{whole})
			if err == nil && spec.MIGEnabled && (!desired.Equal(actual) || st.Phase != v1alpha1.PhaseReady) {
				g.Layout, g.Changing = desired, true
				if reclaim {
					// Its free devices may still serve a pod: the
					// plan gives it back whole again, or the
					// reclaim is cancelled (ReclaimCancels).
					g.Layout, g.Changing, g.Reclaiming = actual, false, true
				} else if notComing(st) {
					g.Layout = actual
					// A change NVML failed, which the agent
					// retries, holds no slot of the limits on GPUs
					// changing at once (a GPU failing for good would
					// hold it for ever), nor does a blocked one, which
					// this plan cancels (BlockedChanges; apply writes
					// no change before every cancel is written; on a
					// Frozen node, where no cancel is written, it
					// keeps its slot: keepBlockedSlots).
					// Dropped drain taints would fail every other
					// GPU's change alike: that one keeps its slot.
					g.Retrying = blockedByUse(st) || st.Phase == v1alpha1.PhaseFailed && st.Reason == v1alpha1.ReasonNVMLError
				} else {
					// A device of the new layout a claim holds
					// already (allocated once the agent published
					// it, before its status says so) is no free
					// device to promise.
					for _, d := range desired {
						if isAllocated(allocatedKeys, int(st.Index), d) && !inUse.Contains(d) {
							inUse = append(inUse, d)
						}
					}
					g.Pinned, g.Shared = splitShared(inUse, desired, int(st.Index), allocatedKeys, adminKeys)
					// The pods the change is for keep its devices.
					g.Serves = spec.ServedPods
				}
			}
		}
		out = append(out, g)
	}
	return out
}

// splitShared divides inUse (devices of GPU index that must stay) into
// those used up and those of layout that claims hold with admin access
// only (adminHeld and not allocated: the keys, migKeys, of the names
// claims hold), which a pending pod may still get.
// Both come out canonical.
func splitShared(inUse, layout mig.Layout, index int, allocated, adminHeld sets.Set[migslices.MIGDeviceKey]) (pinned, shared mig.Layout) {
	for _, d := range layout {
		if isAllocated(adminHeld, index, d) && !isAllocated(allocated, index, d) && !shared.Contains(d) {
			shared = append(shared, d)
		}
	}
	for _, d := range inUse {
		if !shared.Contains(d) {
			pinned = append(pinned, d)
		}
	}
	return pinned.Canonical(), shared.Canonical()
}

// markTainted sets, on each GPU, the devices it lacks that
// DeviceTaintRules name (names, this node's; planner.GPU.Tainted): the
// planner makes none of them. Those the GPU has are pinned (autoGPUs).
func markTainted(gpus []planner.GPU, names sets.Set[string]) {
	if names.Len() == 0 {
		return
	}
	held := migKeys(names)
	for i := range gpus {
		g := &gpus[i]
		if g.Info.Model == nil {
			continue
		}
		for _, prof := range g.Info.Model.Profiles {
			for _, pl := range prof.Placements {
				d := mig.Device{Profile: prof.Name, Start: pl.Start}
				if !g.Layout.Contains(d) && isAllocated(held, g.Info.Index, d) {
					g.Tainted = append(g.Tainted, d)
				}
			}
		}
		g.Tainted = g.Tainted.Canonical()
	}
}

// migKeys returns the keys (migslices.ParseMIGDeviceName) of the MIG
// device names among names; other names (whole GPUs) are left out.
func migKeys(names sets.Set[string]) sets.Set[migslices.MIGDeviceKey] {
	out := make(sets.Set[migslices.MIGDeviceKey], len(names))
	for name := range names {
		if k, ok := migslices.ParseMIGDeviceName(name); ok {
			out.Insert(k)
		}
	}
	return out
}

// isAllocated reports whether a claim holds device d of GPU index: held
// are the keys (migKeys) of the names claims hold, and d's published name
// has d's key whatever GI profile ID it carries (NVML's, which may differ
// from the catalog's, or be one only NVML knows for a profile the catalog
// lacks).
func isAllocated(held sets.Set[migslices.MIGDeviceKey], index int, d mig.Device) bool {
	return held.Has(migslices.MIGDeviceKeyOf(index, d.Profile, d.Start))
}

// reportedUUID is the UUID nml's status reports for GPU idx ("" where it
// has no row, or one that names no GPU): what an Auto spec entry is
// written for (GPUSpec.UUID).
func reportedUUID(nml *v1alpha1.NodeMigLayout, idx int) string {
	for _, st := range nml.Status.GPUs {
		if int(st.Index) == idx {
			return st.UUID
		}
	}
	return ""
}
