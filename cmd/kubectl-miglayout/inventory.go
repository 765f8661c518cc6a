package main

import (
	"fmt"
	"maps"
	"slices"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/utils/ptr"

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
// device that is not miglayout's shape is skipped. A published MIG device
// carries NVML's values of its profile (memory, multiprocessors, engines):
// where they differ from the catalog's they become the GPU's NVMLProfiles,
// as its agent would report them. The GPU's UUID and NVML attributes
// (driver version, PCI bus ID, ...) are read from its devices, as its agent
// reports them.
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
	ver := func(d resourceapi.Device, a resourceapi.QualifiedName) string {
		if v, ok := d.Attributes[a]; ok && v.VersionValue != nil {
			return *v.VersionValue
		}
		return ""
	}
	byIndex := map[int32]*v1alpha1.GPUStatus{}
	// gpu is the GPU of device d, its UUID and NVML attributes as d
	// carries them (uuid, minor: the whole GPU's; parentUUID,
	// parentMinor: a MIG device's), so that selectors on them are judged
	// as the agent's report would have them judged.
	gpu := func(index int64, d resourceapi.Device, uuid, minor resourceapi.QualifiedName) *v1alpha1.GPUStatus {
		g := byIndex[int32(index)]
		if g == nil {
			product := str(d, migslices.AttrProductName)
			g = &v1alpha1.GPUStatus{Index: int32(index), Product: product, UUID: str(d, uuid)}
			if m, err := cat.Model(product); err == nil {
				g.Model = m.Name
			}
			g.Attributes = &v1alpha1.GPUAttributes{PCIBusID: str(d, migslices.AttrPCIBusID), PCIeRoot: str(d, migslices.AttrPCIeRoot), Brand: str(d, migslices.AttrBrand),
				Architecture: str(d, migslices.AttrArchitecture), CUDAComputeCapability: ver(d, migslices.AttrCUDAComputeCapability),
				DriverVersion: ver(d, migslices.AttrDriverVersion), CUDADriverVersion: ver(d, migslices.AttrCUDADriverVersion)}
			if n, ok := num(d, minor); ok {
				g.Attributes.Minor = ptr.To(int32(n))
			}
			if n, ok := num(d, migslices.AttrNUMANode); ok {
				g.Attributes.NUMANode = ptr.To(int32(n))
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
			gpu(idx, d, migslices.AttrUUID, migslices.AttrMinor)
		case migslices.TypeMIG:
			idx, ok1 := num(d, migslices.AttrParentIndex)
			start, ok2 := num(d, migslices.AttrPlacementStart)
			profile := str(d, migslices.AttrProfile)
			if !ok1 || !ok2 || profile == "" {
				continue
			}
			g := gpu(idx, d, migslices.AttrParentUUID, migslices.AttrParentMinor)
			g.MIGEnabled, g.MIGPending = true, true
			if v, ok := publishedValues(cat, g.Model, profile, d); ok && !slices.ContainsFunc(g.NVMLProfiles, func(p v1alpha1.NVMLProfile) bool { return p.Profile == profile }) {
				g.NVMLProfiles = append(g.NVMLProfiles, v)
			}
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

// publishedValues are the values of profile that device d is published
// with, and whether they differ from model's catalog entry (ok false also
// where model or the profile is unknown, or d lacks its memory).
func publishedValues(cat *mig.Catalog, model, profile string, d resourceapi.Device) (v1alpha1.NVMLProfile, bool) {
	m, err := cat.Model(model)
	if err != nil {
		return v1alpha1.NVMLProfile{}, false
	}
	p, err := m.Profile(profile)
	if err != nil {
		return v1alpha1.NVMLProfile{}, false
	}
	mem, ok := d.Attributes[migslices.AttrMemory]
	if !ok || mem.IntValue == nil {
		return v1alpha1.NVMLProfile{}, false
	}
	capacity := func(c resourceapi.QualifiedName, catalog int) int {
		if q, ok := d.Capacity[c]; ok {
			return int(q.Value.Value())
		}
		return catalog
	}
	v := mig.NVMLProfileValues{Profile: profile, MemoryMiB: *mem.IntValue,
		Multiprocessors: capacity(migslices.CapMultiprocessors, p.Multiprocessors), CopyEngines: capacity(migslices.CapCopyEngines, p.CopyEngines),
		Decoders: capacity(migslices.CapDecoders, p.Decoders), Encoders: capacity(migslices.CapEncoders, p.Encoders),
		JPEG: capacity(migslices.CapJPEGEngines, p.JPEGEngines), OFA: capacity(migslices.CapOFAEngines, p.OFAEngines)}
	return v1alpha1.NVMLProfile{Profile: profile, MemoryMiB: v.MemoryMiB, Multiprocessors: int32(v.Multiprocessors),
		CopyEngines: int32(v.CopyEngines), Decoders: int32(v.Decoders), Encoders: int32(v.Encoders),
		JPEGEngines: int32(v.JPEG), OFAEngines: int32(v.OFA)}, v != p.NVMLValues()
}

func joinLayout(layout, device string) string {
	if layout == "" {
		return device
	}
	return fmt.Sprintf("%s,%s", layout, device)
}
