package main

import (
	"fmt"
	"maps"
	"slices"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/miglayout/miglayout/api/v1alpha1"
	"github.com/miglayout/miglayout/pkg/mig"
	migslices "github.com/miglayout/miglayout/pkg/slices"
)

// publishedInventory is a node's GPUs as its agent publishes them in the
// node's ResourceSlices (pool = node name): what plan reads where the node
// has no NodeMigLayout yet (the controller makes one only once a MigLayout
// selects the node, and only then does the agent report into it). A GPU
// with MIG off is its whole-GPU device; a GPU with MIG on is its MIG devices
// (profile@placementStart), so one with MIG on and no device is not
// published and not returned. InUse holds the devices claims are allocated
// (allocated: device name → claim), as the agent would report them; slices
// say nothing of devices prepared or running a process outside a claim. A
// device that is not miglayout's shape is skipped.
func publishedInventory(cat *mig.Catalog, devices []resourceapi.Device, allocated map[string]string) []v1alpha1.GPUStatus {
	str := func(d resourceapi.Device, a resourceapi.QualifiedName) string {
		if v, ok := d.Attributes[a]; ok && v.StringValue != nil {
			return *v.StringValue
		}
		return ""
	}
	num := func(d resourceapi.Device, a resourceapi.QualifiedName) (int64, bool) {
		if v, ok := d.Attributes[a]; ok && v.IntValue != nil {
			return *v.IntValue, true
		}
		return 0, false
	}
	byIndex := map[int32]*v1alpha1.GPUStatus{}
	gpu := func(index int64, product string) *v1alpha1.GPUStatus {
		g := byIndex[int32(index)]
		if g == nil {
			g = &v1alpha1.GPUStatus{Index: int32(index), Product: product}
			if m, err := cat.Model(product); err == nil {
				g.Model = m.Name
			}
			byIndex[int32(index)] = g
		}
		return g
	}
	for _, d := range devices {
		switch str(d, migslices.AttrType) {
		case migslices.TypeGPU:
			idx, ok := num(d, migslices.AttrIndex)
			if !ok {
				continue
			}
			gpu(idx, str(d, migslices.AttrProductName))
		case migslices.TypeMIG:
			idx, ok1 := num(d, migslices.AttrParentIndex)
			start, ok2 := num(d, migslices.AttrPlacementStart)
			profile := str(d, migslices.AttrProfile)
			if !ok1 || !ok2 || profile == "" {
				continue
			}
			g := gpu(idx, str(d, migslices.AttrProductName))
			g.MIGEnabled, g.MIGPending = true, true
			dev := mig.Device{Profile: profile, Start: int(start)}.String()
			g.Layout = joinLayout(g.Layout, dev)
			if _, ok := allocated[d.Name]; ok {
				g.InUse = joinLayout(g.InUse, dev)
			}
		}
	}
	out := make([]v1alpha1.GPUStatus, 0, len(byIndex))
	for _, i := range slices.Sorted(maps.Keys(byIndex)) {
		g := *byIndex[i]
		for _, l := range []*string{&g.Layout, &g.InUse} {
			if parsed, err := mig.ParseLayout(*l); err == nil {
				*l = parsed.Canonical().String()
			}
		}
		g.Phase = v1alpha1.PhaseReady
		out = append(out, g)
	}
	return out
}

func joinLayout(layout, device string) string {
	if layout == "" {
		return device
	}
	return fmt.Sprintf("%s,%s", layout, device)
}
