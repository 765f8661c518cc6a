package controller

import (
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/miglayout/miglayout/api/v1alpha1"
	"github.com/miglayout/miglayout/pkg/mig"
	"github.com/miglayout/miglayout/pkg/planner"
	migslices "github.com/miglayout/miglayout/pkg/slices"
)

// taintedByRules reads the DeviceTaintRules that take devices of driver's
// pool pool (a node's) out of scheduling, with effect NoSchedule or
// NoExecute, as kube-scheduler applies them (DRADeviceTaintRules, GA in
// 1.37): a rule selects the devices its selector's driver, pool and device
// name all match (an unset one matches any; no selector, none). all is set
// when a rule selects every device of the pool, devices has the names of
// those a rule selects by name. The planner neither promises nor destroys
// such a device, nor makes one a rule names before it exists
// (markTainted); a claim that tolerates the taint is not told apart.
func taintedByRules(rules []resourceapi.DeviceTaintRule, driver, pool string) (all bool, devices sets.Set[string]) {
	devices = sets.New[string]()
	for i := range rules {
		sel, taint := rules[i].Spec.DeviceSelector, rules[i].Spec.Taint
		if sel == nil || taint.Effect != resourceapi.DeviceTaintEffectNoSchedule && taint.Effect != resourceapi.DeviceTaintEffectNoExecute {
			continue
		}
		if !selects(sel, driver, pool, nil) {
			continue
		}
		if sel.Device == nil {
			all = true
			continue
		}
		devices.Insert(*sel.Device)
	}
	return all, devices
}

// withRuleTaints returns slices with the taints of the DeviceTaintRules
// added to the devices of other drivers than driver that they select, as
// kube-scheduler sees those devices: the allocator the planner runs then
// keeps a NIC a rule taints from a claim that does not tolerate it. Slices
// a rule touches are copies; driver's own are left as they are (see
// taintedByRules).
func withRuleTaints(slices []resourceapi.ResourceSlice, rules []resourceapi.DeviceTaintRule, driver string) []resourceapi.ResourceSlice {
	if len(rules) == 0 {
		return slices
	}
	out := make([]resourceapi.ResourceSlice, len(slices))
	for i := range slices {
		s := &slices[i]
		out[i] = *s
		if s.Spec.Driver == driver {
			continue
		}
		copied := false
		for j := range s.Spec.Devices {
			for k := range rules {
				sel := rules[k].Spec.DeviceSelector
				if sel == nil || !selects(sel, s.Spec.Driver, s.Spec.Pool.Name, &s.Spec.Devices[j].Name) {
					continue
				}
				if !copied {
					out[i] = *s.DeepCopy()
					copied = true
				}
				d := &out[i].Spec.Devices[j]
				d.Taints = append(d.Taints, rules[k].Spec.Taint)
			}
		}
	}
	return out
}

// selects reports whether a rule's selector matches the devices of driver's
// pool, and the device of that name where device is set: each of its
// fields that is set must be equal.
func selects(sel *resourceapi.DeviceTaintSelector, driver, pool string, device *string) bool {
	if sel.Driver != nil && *sel.Driver != driver || sel.Pool != nil && *sel.Pool != pool {
		return false
	}
	return device == nil || sel.Device == nil || *sel.Device == *device
}

// xidTainted returns the names of the devices of the node's pool (own: the
// node's slices of miglayout's driver, pool named after the node) that its
// agent publishes with the Xid taint (slices.XidTaint, newest generation):
// an Xid critical error hit them, and kube-scheduler gives them to no claim
// that does not tolerate the taint. The planner keeps them as they are,
// like devices a DeviceTaintRule names: it neither promises nor destroys
// them.
func xidTainted(own []*resourceapi.ResourceSlice, pool string) sets.Set[string] {
	out := sets.New[string]()
	var newest int64
	for _, s := range own {
		if s.Spec.Pool.Name == pool {
			newest = max(newest, s.Spec.Pool.Generation)
		}
	}
	for _, s := range own {
		if s.Spec.Pool.Name != pool || s.Spec.Pool.Generation != newest {
			continue
		}
		for _, d := range s.Spec.Devices {
			for _, t := range d.Taints {
				if t.Key == migslices.XidTaintKey && t.Effect != resourceapi.DeviceTaintEffectNone {
					out.Insert(d.Name)
				}
			}
		}
	}
	return out
}

// statusXidDevices returns the names of the MIG devices nml's status lists
// an Xid of (GPUStatus.Xids).
func statusXidDevices(nml *v1alpha1.NodeMigLayout) sets.Set[string] {
	out := sets.New[string]()
	for _, g := range nml.Status.GPUs {
		for _, x := range g.Xids {
			if x.Device != "" {
				out.Insert(x.Device)
			}
		}
	}
	return out
}

// markXidGPUs sets, on each GPU with a device among xid (the node's
// devices published with the Xid taint, xidTainted) or with Xids in nml's
// status (GPUStatus.Xids: a GPU with MIG mode on and no device, or whose
// taints the API server dropped), every device the GPU does not have as
// Tainted: the planner makes no new device on a GPU an Xid hit, which
// after an Xid of the whole GPU its agent would publish tainted too, until
// the node reboots or kubectl miglayout clear-xids clears the Xid.
func markXidGPUs(gpus []planner.GPU, xid sets.Set[string], nml *v1alpha1.NodeMigLayout) {
	hit := sets.New[int]()
	for _, g := range nml.Status.GPUs {
		if len(g.Xids) > 0 {
			hit.Insert(int(g.Index))
		}
	}
	for name := range xid {
		if idx, _, ok := migslices.DeviceGPUIndex(name); ok {
			hit.Insert(idx)
		}
	}
	for i := range gpus {
		g := &gpus[i]
		if g.Info.Model == nil || !hit.Has(g.Info.Index) {
			continue
		}
		for _, prof := range g.Info.Model.Profiles {
			for _, pl := range prof.Placements {
				d := mig.Device{Profile: prof.Name, Start: pl.Start}
				if !g.Layout.Contains(d) && !g.Tainted.Contains(d) {
					g.Tainted = append(g.Tainted, d)
				}
			}
		}
		g.Tainted = g.Tainted.Canonical()
	}
}
