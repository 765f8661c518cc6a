package slices

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/dynamic-resource-allocation/deviceattribute"
	"k8s.io/utils/ptr"

	"github.com/miglayout/miglayout/pkg/mig"
	"github.com/miglayout/miglayout/pkg/mig/gpu"
)

// DefaultDriverName is the DRA driver name miglayout publishes under unless
// configured otherwise.
const DefaultDriverName = "mig.miglayout.io"

// Values of the "type" attribute.
const (
	TypeGPU = "gpu"
	TypeMIG = "mig"
)

// Attribute names (unqualified ones live in the driver's domain).
const (
	AttrType                  resourceapi.QualifiedName = "type"
	AttrUUID                  resourceapi.QualifiedName = "uuid"
	AttrProductName           resourceapi.QualifiedName = "productName"
	AttrBrand                 resourceapi.QualifiedName = "brand"
	AttrArchitecture          resourceapi.QualifiedName = "architecture"
	AttrCUDAComputeCapability resourceapi.QualifiedName = "cudaComputeCapability"
	AttrDriverVersion         resourceapi.QualifiedName = "driverVersion"
	AttrCUDADriverVersion     resourceapi.QualifiedName = "cudaDriverVersion"
	AttrPCIBusID                                        = deviceattribute.StandardDeviceAttributePCIBusID
	AttrPCIeRoot                                        = deviceattribute.StandardDeviceAttributePCIeRoot
	AttrNUMANode                                        = deviceattribute.StandardDeviceAttributeNUMANode
	AttrIndex                 resourceapi.QualifiedName = "index"
	AttrMinor                 resourceapi.QualifiedName = "minor"
	AttrParentUUID            resourceapi.QualifiedName = "parentUUID"
	AttrParentIndex           resourceapi.QualifiedName = "parentIndex"
	AttrParentMinor           resourceapi.QualifiedName = "parentMinor"
	AttrProfile               resourceapi.QualifiedName = "profile"
	AttrMemory                resourceapi.QualifiedName = "memory"
	AttrPlacementStart        resourceapi.QualifiedName = "placementStart"
	AttrPlacementSize         resourceapi.QualifiedName = "placementSize"
)

// Capacity names.
const (
	CapMemory          resourceapi.QualifiedName = "memory"
	CapMultiprocessors resourceapi.QualifiedName = "multiprocessors"
	CapCopyEngines     resourceapi.QualifiedName = "copyEngines"
	CapDecoders        resourceapi.QualifiedName = "decoders"
	CapEncoders        resourceapi.QualifiedName = "encoders"
	CapJPEGEngines     resourceapi.QualifiedName = "jpegEngines"
	CapOFAEngines      resourceapi.QualifiedName = "ofaEngines"
)

// PlannedUUID is the "uuid" attribute of a planned MIG device (one that does
// not exist yet, see PlannedMIGDevice), and PlannedGPUUUID that of a GPU
// made up by PlannedGPU. They keep the attribute present, so that selectors
// reading it evaluate the same on planned and real devices, while matching no
// real UUID.
const (
	PlannedUUID    = "MIG-planned"
	PlannedGPUUUID = "GPU-planned"
)

// GPUDeviceName is the device name of the whole GPU with the given NVML index.
func GPUDeviceName(gpuIndex int) string { return "gpu-" + strconv.Itoa(gpuIndex) }

// MIGDeviceName is the device name of the MIG device of GI profile ID
// profileID with the given profile name at the given placement start on the
// GPU with NVML index gpuIndex, e.g. "gpu-0-mig-3g40gb-9-4".
func MIGDeviceName(gpuIndex int, profile string, profileID, start int) string {
	return fmt.Sprintf("gpu-%d-mig-%s-%d-%d", gpuIndex, nameToken(profile), profileID, start)
}

// IsMIGDeviceName reports whether name is the MIGDeviceName of a device of
// the given profile at the given start on GPU gpuIndex, whatever its GI
// profile ID: how a device of a profile the catalog lacks (whose ID only
// NVML knows) is told by name. Profiles whose names differ only in
// punctuation ("1g.10gb+me" and nvidia-smi's "1g.10gb-me") are not told
// apart at the same start: callers use it to keep devices (a claim's
// allocation pins one), where taking one for the other errs on the safe
// side, and names stay as published before (a claim allocated under a name
// keeps matching its device across agent upgrades). Callers that test many
// devices against many names compare MIGDeviceKeys instead.
func IsMIGDeviceName(name string, gpuIndex int, profile string, start int) bool {
	k, ok := ParseMIGDeviceName(name)
	return ok && k == MIGDeviceKeyOf(gpuIndex, profile, start)
}

// MIGDeviceKey is what a MIGDeviceName says of its device but the GI
// profile ID: two names of one key are the same device for IsMIGDeviceName.
type MIGDeviceKey struct {
	// GPUIndex is the NVML index of the GPU.
	GPUIndex int
	// ProfileToken is the profile name's letters, lower-cased, and digits
	// ("1g10gbme" for 1g.10gb+me).
	ProfileToken string
	// Start is the placement start, in memory slices.
	Start int
}

// MIGDeviceKeyOf is the key of the names of a device of the given profile
// at the given start on GPU gpuIndex.
func MIGDeviceKeyOf(gpuIndex int, profile string, start int) MIGDeviceKey {
	return MIGDeviceKey{GPUIndex: gpuIndex, ProfileToken: nameToken(profile), Start: start}
}

// ParseMIGDeviceName returns the key of a name MIGDeviceName makes:
// "gpu-<index>-mig-<profile token>-<GI profile ID>-<start>", each number a
// non-negative decimal without sign or leading zero. ok is false for a name
// of any other form.
func ParseMIGDeviceName(name string) (k MIGDeviceKey, ok bool) {
	f := strings.Split(name, "-")
	if len(f) != 6 || f[0] != "gpu" || f[2] != "mig" {
		return MIGDeviceKey{}, false
	}
	idx, ok1 := canonicalNumber(f[1])
	_, ok2 := canonicalNumber(f[4])
	start, ok3 := canonicalNumber(f[5])
	if !ok1 || !ok2 || !ok3 {
		return MIGDeviceKey{}, false
	}
	return MIGDeviceKey{GPUIndex: idx, ProfileToken: f[3], Start: start}, true
}

// canonicalNumber parses s as strconv.Itoa writes a non-negative int.
func canonicalNumber(s string) (int, bool) {
	n, err := strconv.Atoi(s)
	return n, err == nil && n >= 0 && strconv.Itoa(n) == s
}

// nameToken keeps the lower-case letters and digits of s.
func nameToken(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			return r
		case r >= 'A' && r <= 'Z':
			return r - 'A' + 'a'
		default:
			return -1
		}
	}, s)
}

// DeviceGPUIndex returns the NVML index of the GPU that the device with the
// given name (as GPUDeviceName or MIGDeviceName make it) is or lies on, and
// whether it is a MIG device. ok is false for a name of another form.
func DeviceGPUIndex(name string) (gpuIndex int, isMIG bool, ok bool) {
	rest, found := strings.CutPrefix(name, "gpu-")
	if !found {
		return 0, false, false
	}
	idx, tail, _ := strings.Cut(rest, "-")
	n, ok := canonicalNumber(idx)
	if !ok {
		return 0, false, false
	}
	switch {
	case tail == "" && !strings.Contains(rest, "-"):
		return n, false, true
	case strings.HasPrefix(tail, "mig-"):
		return n, true, true
	default:
		return 0, false, false
	}
}

// GPUDevice returns the device of a whole GPU.
func GPUDevice(g gpu.GPU) resourceapi.Device {
	attrs := commonAttributes(g)
	attrs[AttrType] = str(TypeGPU)
	attrs[AttrUUID] = str(g.UUID)
	attrs[AttrIndex] = integer(int64(g.Index))
	attrs[AttrMinor] = integer(int64(g.Minor))
	attrs[AttrMemory] = integer(g.MemoryMiB)
	caps := map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{
		CapMemory: bytesCap(g.MemoryMiB << 20),
	}
	if g.Model != nil && g.Model.Multiprocessors > 0 {
		caps[CapMultiprocessors] = count(g.Model.Multiprocessors)
	}
	return resourceapi.Device{Name: GPUDeviceName(g.Index), Attributes: dropEmpty(attrs), Capacity: caps}
}

// MIGDevice returns the device of MIG device d on its parent GPU g. An empty
// d.UUID (a planned device) is published as PlannedUUID.
func MIGDevice(g gpu.GPU, d gpu.MIGDevice) resourceapi.Device {
	attrs := commonAttributes(g)
	uuid := d.UUID
	if uuid == "" {
		uuid = PlannedUUID
	}
	parent := d.ParentUUID
	if parent == "" {
		parent = g.UUID
	}
	attrs[AttrType] = str(TypeMIG)
	attrs[AttrUUID] = str(uuid)
	attrs[AttrParentUUID] = str(parent)
	attrs[AttrParentIndex] = integer(int64(g.Index))
	attrs[AttrParentMinor] = integer(int64(g.Minor))
	attrs[AttrProfile] = str(d.Profile)
	attrs[AttrMemory] = integer(d.MemoryMiB)
	attrs[AttrPlacementStart] = integer(int64(d.Placement.Start))
	attrs[AttrPlacementSize] = integer(int64(d.Placement.Size))
	caps := map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{
		CapMemory:          bytesCap(d.MemoryMiB << 20),
		CapMultiprocessors: count(d.Multiprocessors),
		CapCopyEngines:     count(d.CopyEngines),
		CapDecoders:        count(d.Decoders),
		CapEncoders:        count(d.Encoders),
		CapJPEGEngines:     count(d.JPEGEngines),
		CapOFAEngines:      count(d.OFAEngines),
	}
	return resourceapi.Device{
		Name:       MIGDeviceName(g.Index, d.Profile, d.ProfileID, d.Placement.Start),
		Attributes: dropEmpty(attrs),
		Capacity:   caps,
	}
}

// PlannedMIGDevice returns the device that MIG device d (profile@start) would
// be published as on GPU g once created, without NVML: the facts come from
// the catalog entry g.Model, and the UUID is PlannedUUID. It fails when g's
// model is unknown or d is not a valid placement of a profile of it.
func PlannedMIGDevice(g gpu.GPU, d mig.Device) (resourceapi.Device, error) {
	md, err := PlannedMIG(g, d)
	if err != nil {
		return resourceapi.Device{}, err
	}
	return MIGDevice(g, md), nil
}

// PlannedMIG returns the gpu.MIGDevice that creating d on g would give, as
// far as the catalog knows it: no UUID, GI and CI IDs -1.
func PlannedMIG(g gpu.GPU, d mig.Device) (gpu.MIGDevice, error) {
	if g.Model == nil {
		return gpu.MIGDevice{}, fmt.Errorf("planning MIG device %s on GPU %d: %w %q", d, g.Index, mig.ErrUnknownModel, g.ProductName)
	}
	p, err := g.Model.Profile(d.Profile)
	if err != nil {
		return gpu.MIGDevice{}, fmt.Errorf("planning MIG device %s on GPU %d: %w", d, g.Index, err)
	}
	pl := mig.Placement{Start: d.Start, Size: p.MemorySlices}
	if !p.HasPlacement(pl) {
		return gpu.MIGDevice{}, fmt.Errorf("planning MIG device %s on GPU %d: %w: start %d is not a placement of %s on %s",
			d, g.Index, mig.ErrInvalidLayout, d.Start, p.Name, g.Model.Name)
	}
	return gpu.MIGDevice{
		GPUIndex:        g.Index,
		ParentUUID:      g.UUID,
		Profile:         p.Name,
		ProfileID:       p.ID,
		Placement:       pl,
		GIID:            -1,
		CIID:            -1,
		MemoryMiB:       p.MemoryMiB,
		Multiprocessors: p.Multiprocessors,
		CopyEngines:     p.CopyEngines,
		Decoders:        p.Decoders,
		Encoders:        p.Encoders,
		JPEGEngines:     p.JPEGEngines,
		OFAEngines:      p.OFAEngines,
	}, nil
}

// PlannedGPU returns a GPU of the given model at the given NVML index as the
// planner may assume it before any node reports one: UUID PlannedGPUUUID, MIG
// mode on, the model's memory, architecture and compute capability, brand
// "Nvidia", minor equal to the index. Driver versions and PCI bus ID are
// unknown and left empty, so those attributes are absent (a selector reading
// them fails to evaluate); prefer the GPU the node reports where there is one.
func PlannedGPU(model *mig.Model, index int) gpu.GPU {
	return gpu.GPU{
		Index:                 index,
		UUID:                  PlannedGPUUUID,
		ProductName:           model.ProductName,
		Model:                 model,
		MemoryMiB:             model.MemoryMiB,
		MIGCapable:            true,
		MIGMode:               gpu.MIGMode{Current: true, Pending: true},
		Brand:                 "Nvidia",
		Architecture:          model.Architecture,
		CUDAComputeCapability: model.CUDAComputeCapability,
		Minor:                 index,
	}
}

func commonAttributes(g gpu.GPU) map[resourceapi.QualifiedName]resourceapi.DeviceAttribute {
	attrs := map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
		AttrProductName:           str(g.ProductName),
		AttrBrand:                 str(g.Brand),
		AttrArchitecture:          str(g.Architecture),
		AttrCUDAComputeCapability: version(g.CUDAComputeCapability),
		AttrDriverVersion:         version(g.DriverVersion),
		AttrCUDADriverVersion:     version(g.CUDADriverVersion),
		AttrPCIBusID:              str(g.PCIBusID),
		AttrPCIeRoot:              str(g.PCIeRoot),
	}
	if g.NUMANode != nil {
		attrs[AttrNUMANode] = integer(int64(*g.NUMANode))
	}
	return attrs
}

// dropEmpty removes attributes whose value is unknown: empty strings and
// versions that are empty or could not be normalised.
func dropEmpty(attrs map[resourceapi.QualifiedName]resourceapi.DeviceAttribute) map[resourceapi.QualifiedName]resourceapi.DeviceAttribute {
	for k, v := range attrs {
		if (v.StringValue != nil && *v.StringValue == "") || (v.VersionValue != nil && *v.VersionValue == "") {
			delete(attrs, k)
		}
	}
	return attrs
}

// str returns a string attribute, cut to DeviceAttributeMaxValueLength bytes
// (the API limit) on a UTF-8 boundary.
func str(s string) resourceapi.DeviceAttribute {
	return resourceapi.DeviceAttribute{StringValue: ptr.To(Clip(s, resourceapi.DeviceAttributeMaxValueLength))}
}

// Clip returns s cut to at most n bytes on a UTF-8 boundary, as a string
// attribute's value is cut to the API's DeviceAttributeMaxValueLength
// (64 bytes); s itself where it is no longer.
func Clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

func integer(n int64) resourceapi.DeviceAttribute {
	return resourceapi.DeviceAttribute{IntValue: ptr.To(n)}
}

// version returns a version attribute with v in semantic-version form, or an
// empty one (dropped by dropEmpty) when v is not a dotted version.
func version(v string) resourceapi.DeviceAttribute {
	s, _ := NormalizeVersion(v)
	return resourceapi.DeviceAttribute{VersionValue: ptr.To(s)}
}

// NormalizeVersion turns NVML's dotted versions into semantic versions (what
// VersionValue requires): missing components become 0 and leading zeros are
// dropped, so "8.0" -> "8.0.0", "580.95.05" -> "580.95.5", "13.0" -> "13.0.0".
// A fourth and further components, as some driver branches print, become
// semver build metadata ("535.104.05.01" -> "535.104.5+01"). A version in
// that form already is returned as it is (normalising twice changes
// nothing: kubectl miglayout reads published versions back). ok is false
// for anything else (the attribute is then not published).
func NormalizeVersion(v string) (string, bool) {
	core, build, hasBuild := strings.Cut(strings.TrimSpace(v), "+")
	parts := strings.Split(core, ".")
	if hasBuild {
		if len(parts) != 3 {
			return "", false
		}
		parts = append(parts, strings.Split(build, ".")...)
	}
	if len(parts) == 0 || parts[0] == "" {
		return "", false
	}
	nums := make([]string, 0, 3)
	for i, p := range parts {
		if i == 3 {
			break
		}
		n, err := strconv.ParseUint(p, 10, 63)
		if err != nil || p == "" || strings.HasPrefix(p, "+") {
			return "", false
		}
		nums = append(nums, strconv.FormatUint(n, 10))
	}
	for len(nums) < 3 {
		nums = append(nums, "0")
	}
	out := strings.Join(nums, ".")
	if len(parts) > 3 {
		build := strings.Join(parts[3:], ".")
		for _, id := range parts[3:] {
			if id == "" || strings.IndexFunc(id, func(r rune) bool {
				return !(r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r == '-')
			}) >= 0 {
				return "", false
			}
		}
		out += "+" + build
	}
	if len(out) > resourceapi.DeviceAttributeMaxValueLength {
		return "", false
	}
	return out, true
}

func bytesCap(b int64) resourceapi.DeviceCapacity {
	return resourceapi.DeviceCapacity{Value: *resource.NewQuantity(b, resource.BinarySI)}
}

func count(n int) resourceapi.DeviceCapacity {
	return resourceapi.DeviceCapacity{Value: *resource.NewQuantity(int64(n), resource.DecimalSI)}
}
