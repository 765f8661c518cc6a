package nvmlsim

import (
	"cmp"
	"slices"
	"strconv"
	"strings"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"

	"github.com/miglayout/miglayout/pkg/mig"
)

// device is an nvml.Device: a whole GPU (isMIG false) or a MIG device
// handle. A MIG device handle is a slot of its GPU's MIG device table in
// this process (Sim.slots, by MIG device index), as nvml.h describes them
// (nvmlDeviceGetMigDeviceHandleByIndex: once its MIG device is destroyed the
// handle "would remain invalid and must be requested again using this API.
// Handles may be reused and their properties can change in the process"):
// the slot names the compute instance it was last handed out for, by
// serial number, so that the handle is stale (ERROR_INVALID_ARGUMENT) once
// that CI is destroyed, even where a new CI takes its IDs, until someone in
// the process asks for the handle of that index (or the new CI's UUID)
// again; from then on every holder of the handle reaches the MIG device now
// at that index. Handles are comparable values: two handles to one slot
// are ==.
type device struct {
	*mock.Device
	s     *Sim
	index int
	isMIG bool
	// slot is the MIG device index of a MIG device handle.
	slot int
}

var _ nvml.Device = device{}

// migSlot is what a MIG device handle of a slot names: the compute instance
// ci of GPU instance gi, whose serial number uid tells it from a CI made
// since with the same IDs.
type migSlot struct {
	gi, ci int
	uid    uint64
}

func (s *Sim) gpuHandle(index int) device {
	return device{Device: s.devMock, s: s, index: index}
}

// migHandle hands out the handle of MIG device slot of GPU index, now the
// compute instance ci of gi: holders of the slot's handle reach it from
// now on. Called under s.mu (within update).
func (s *Sim) migHandle(index, slot int, gi *GPUInstance, ci *ComputeInstance) device {
	if s.slots == nil {
		s.slots = map[[2]int]migSlot{}
	}
	s.slots[[2]int{index, slot}] = migSlot{gi: gi.ID, ci: ci.ID, uid: ci.UID}
	return device{Device: s.devMock, s: s, index: index, isMIG: true, slot: slot}
}

// devCtx is what a device operation works on: the GPU, its model and, for a
// MIG device handle, its GI, CI and GI profile.
type devCtx struct {
	st      *fileState
	g       *GPU
	m       *mig.Model
	gi      *GPUInstance
	ci      *ComputeInstance
	profile *mig.Profile
	lie     bool
}

// with runs fn on the device's state. ERROR_INVALID_ARGUMENT for a stale MIG
// device handle; ERROR_NOT_SUPPORTED for a MIG device handle unless migOK.
func (d device) with(op string, mutating, migOK bool, fn func(c devCtx) (bool, nvml.Return)) nvml.Return {
	if d.s == nil {
		return nvml.ERROR_INVALID_ARGUMENT
	}
	return d.s.do(op, mutating, func(st *fileState, lie bool) (bool, nvml.Return) {
		g, m, ret := st.gpu(d.index)
		if ret != nvml.SUCCESS {
			return false, ret
		}
		c := devCtx{st: st, g: g, m: m, lie: lie}
		if d.isMIG {
			sl := d.s.slots[[2]int{d.index, d.slot}]
			if c.gi = g.gi(sl.gi); c.gi != nil {
				c.ci = c.gi.ci(sl.ci)
			}
			if c.ci == nil || c.ci.UID != sl.uid {
				return false, nvml.ERROR_INVALID_ARGUMENT
			}
			if !migOK {
				return false, nvml.ERROR_NOT_SUPPORTED
			}
			c.profile = profileByID(m, c.gi.ProfileID)
		}
		return fn(c)
	})
}

// read runs a read-only fn valid on GPU and, if migOK, MIG device handles.
func (d device) read(op string, migOK bool, fn func(c devCtx) nvml.Return) nvml.Return {
	return d.with(op, false, migOK, func(c devCtx) (bool, nvml.Return) { return false, fn(c) })
}

// migOn runs fn for a GPU handle whose current MIG mode is on:
// ERROR_NOT_SUPPORTED for MIG device handles and with MIG mode off.
func (d device) migOn(op string, mutating bool, fn func(c devCtx) (bool, nvml.Return)) nvml.Return {
	return d.with(op, mutating, false, func(c devCtx) (bool, nvml.Return) {
		if !c.g.MIGCurrent {
			return false, nvml.ERROR_NOT_SUPPORTED
		}
		return fn(c)
	})
}

// GetName returns the product name, e.g. "NVIDIA A100-SXM4-80GB", and for a
// MIG device "<product name> MIG <profile>", e.g.
// "NVIDIA A100-SXM4-80GB MIG 3g.40gb", or "... MIG 1c.3g.40gb" for a compute
// instance smaller than its GPU instance.
func (d device) GetName() (string, nvml.Return) {
	var name string
	ret := d.read("GetName", true, func(c devCtx) nvml.Return {
		name = c.m.ProductName
		if c.gi != nil {
			profile := c.gi.Profile
			if shape, r := ciShapeOf(c.m, c.profile, c.ci.ProfileID); r == nvml.SUCCESS {
				profile = shape.name(profile)
			}
			name += " MIG " + profile
		}
		return nvml.SUCCESS
	})
	return name, ret
}

// GetUUID returns "GPU-<uuid>" for a GPU, "MIG-<uuid>" for a MIG device.
func (d device) GetUUID() (string, nvml.Return) {
	var uuid string
	ret := d.read("GetUUID", true, func(c devCtx) nvml.Return {
		uuid = c.g.UUID
		if c.ci != nil {
			uuid = c.ci.UUID
		}
		return nvml.SUCCESS
	})
	return uuid, ret
}

// GetIndex returns the GPU's NVML index; on a MIG device handle, its MIG
// device index on its GPU (nvml.h: an index GetMigDeviceHandleByIndex takes
// to give the same device).
func (d device) GetIndex() (int, nvml.Return) {
	index := d.index
	ret := d.read("GetIndex", true, func(c devCtx) nvml.Return {
		if c.ci != nil {
			index = slices.IndexFunc(c.g.migDevices(), func(m migDev) bool { return m.gi.ID == c.gi.ID && m.ci.ID == c.ci.ID })
		}
		return nvml.SUCCESS
	})
	if ret != nvml.SUCCESS {
		return 0, ret
	}
	return index, ret
}

// GetMemoryInfo returns memory in bytes: Total is the GPU's (or the MIG
// device's GI profile's) memory, Used the sum of its processes' memory (on a
// GPU, every process on it, MIG devices included; on a MIG device, every
// process of its GI, whose memory its CIs share), Free the rest.
func (d device) GetMemoryInfo() (nvml.Memory, nvml.Return) {
	var mem nvml.Memory
	ret := d.read("GetMemoryInfo", true, func(c devCtx) nvml.Return {
		total, used := c.m.MemoryMiB, usedMiB(c.st.processesOn(d.index, -1, -1))
		if c.gi != nil {
			total, used = c.profile.MemoryMiB, usedMiB(c.st.processesOn(d.index, c.gi.ID, -1))
		}
		mem = nvml.Memory{Total: uint64(total) << 20, Used: uint64(used) << 20, Free: uint64(total-used) << 20}
		return nvml.SUCCESS
	})
	return mem, ret
}

// GetPciInfo returns the PCI location: BusIdLegacy "0000:07:00.0", BusId
// "00000000:07:00.0", distinct buses per index (the DGX A100 buses for the
// first eight GPUs). PciDeviceId and PciSubSystemId are 0: the catalog lacks
// them. ERROR_NOT_SUPPORTED on a MIG device.
func (d device) GetPciInfo() (nvml.PciInfo, nvml.Return) {
	var info nvml.PciInfo
	ret := d.read("GetPciInfo", false, func(devCtx) nvml.Return {
		bus := pciBus(d.index)
		info.Bus = bus
		copyCString(info.BusIdLegacy[:], pciBusID(d.index))
		copyCString(info.BusId[:], "0000"+pciBusID(d.index))
		return nvml.SUCCESS
	})
	return info, ret
}

func copyCString(dst []int8, s string) {
	for i := 0; i < len(s) && i < len(dst)-1; i++ {
		dst[i] = int8(s[i])
	}
}

// GetMinorNumber returns the device minor (/dev/nvidia<minor>), equal to the
// index. ERROR_NOT_SUPPORTED on a MIG device.
func (d device) GetMinorNumber() (int, nvml.Return) {
	minor := 0
	ret := d.read("GetMinorNumber", false, func(c devCtx) nvml.Return {
		minor = c.g.Minor
		return nvml.SUCCESS
	})
	return minor, ret
}

// GetCudaComputeCapability returns the model's major and minor compute
// capability, e.g. 8, 0 (also on a MIG device).
func (d device) GetCudaComputeCapability() (int, int, nvml.Return) {
	major, minor := 0, 0
	ret := d.read("GetCudaComputeCapability", true, func(c devCtx) nvml.Return {
		ma, mi, ok := strings.Cut(c.m.CUDAComputeCapability, ".")
		var err1, err2 error
		major, err1 = strconv.Atoi(ma)
		minor, err2 = strconv.Atoi(mi)
		if !ok || err1 != nil || err2 != nil {
			return nvml.ERROR_UNKNOWN
		}
		return nvml.SUCCESS
	})
	return major, minor, ret
}

var architectures = map[string]nvml.DeviceArchitecture{
	"Ampere":    nvml.DEVICE_ARCH_AMPERE,
	"Hopper":    nvml.DEVICE_ARCH_HOPPER,
	"Blackwell": nvml.DEVICE_ARCH_BLACKWELL,
}

// GetArchitecture returns DEVICE_ARCH_AMPERE, _HOPPER or _BLACKWELL from the
// model's architecture (DEVICE_ARCH_UNKNOWN otherwise), also on a MIG device.
func (d device) GetArchitecture() (nvml.DeviceArchitecture, nvml.Return) {
	var arch nvml.DeviceArchitecture
	ret := d.read("GetArchitecture", true, func(c devCtx) nvml.Return {
		var ok bool
		if arch, ok = architectures[c.m.Architecture]; !ok {
			arch = nvml.DEVICE_ARCH_UNKNOWN
		}
		return nvml.SUCCESS
	})
	return arch, ret
}

// GetBrand returns BRAND_NVIDIA (the brand of every data-centre MIG GPU).
func (d device) GetBrand() (nvml.BrandType, nvml.Return) {
	ret := d.read("GetBrand", true, func(devCtx) nvml.Return { return nvml.SUCCESS })
	if ret != nvml.SUCCESS {
		return 0, ret
	}
	return nvml.BRAND_NVIDIA, ret
}

func boolMode(b bool) int {
	if b {
		return nvml.DEVICE_MIG_ENABLE
	}
	return nvml.DEVICE_MIG_DISABLE
}

// GetMigMode returns the current and pending MIG mode (DEVICE_MIG_DISABLE or
// DEVICE_MIG_ENABLE). ERROR_NOT_SUPPORTED on a MIG device.
func (d device) GetMigMode() (int, int, nvml.Return) {
	current, pending := 0, 0
	ret := d.read("GetMigMode", false, func(c devCtx) nvml.Return {
		current, pending = boolMode(c.g.MIGCurrent), boolMode(c.g.MIGPending)
		return nvml.SUCCESS
	})
	return current, pending, ret
}

// SetMigMode sets the MIG mode and returns (activationStatus, ret), in
// go-nvml's order:
//   - mode not DEVICE_MIG_DISABLE/ENABLE: (INVALID_ARGUMENT, INVALID_ARGUMENT);
//   - MIG device handle: (NOT_SUPPORTED, NOT_SUPPORTED);
//   - mode equal to the current mode: (SUCCESS, SUCCESS), a pending change is
//     cancelled;
//   - disabling while GPU instances exist: (IN_USE, IN_USE), nothing changes;
//   - a process or a client (OpenClient) holds the GPU (on it, one of its
//     GPU instances or MIG devices): with
//     MIGModeNeedsReset (Ampere) the mode becomes pending, current stays,
//     (IN_USE, SUCCESS) — ResetGPU applies it; otherwise (Hopper, Blackwell)
//     (IN_USE, SUCCESS), nothing changes (nvml.h lists IN_USE as an
//     activation status, not among the call's return codes);
//   - with Config.NoGPUReset and MIGModeNeedsReset: the mode becomes
//     pending, (RESET_REQUIRED, SUCCESS), until ResetGPU (the reboot);
//   - else the mode applies at once: (SUCCESS, SUCCESS).
//
// Op "SetMigMode" (mutating); an injected fault returns its code twice.
func (d device) SetMigMode(mode int) (nvml.Return, nvml.Return) {
	activation := nvml.Return(-1)
	ret := d.with("SetMigMode", true, false, func(c devCtx) (bool, nvml.Return) {
		if mode != nvml.DEVICE_MIG_DISABLE && mode != nvml.DEVICE_MIG_ENABLE {
			return false, nvml.ERROR_INVALID_ARGUMENT
		}
		if c.lie {
			activation = nvml.SUCCESS
			return false, nvml.SUCCESS
		}
		want := mode == nvml.DEVICE_MIG_ENABLE
		g := c.g
		if want == g.MIGCurrent {
			changed := g.MIGPending != want
			g.MIGPending = want
			activation = nvml.SUCCESS
			return changed, nvml.SUCCESS
		}
		if !want && len(g.GPUInstances) > 0 {
			return false, nvml.ERROR_IN_USE
		}
		if c.st.held(d.index, -1, -1) {
			activation = nvml.ERROR_IN_USE
			if c.m.MIGModeNeedsReset {
				changed := g.MIGPending != want
				g.MIGPending = want
				return changed, nvml.SUCCESS
			}
			return false, nvml.SUCCESS
		}
		if c.m.MIGModeNeedsReset && d.s.noGPUReset {
			activation = nvml.ERROR_RESET_REQUIRED
			changed := g.MIGPending != want
			g.MIGPending = want
			return changed, nvml.SUCCESS
		}
		g.MIGCurrent, g.MIGPending = want, want
		activation = nvml.SUCCESS
		return true, nvml.SUCCESS
	})
	if activation == -1 {
		activation = ret
	}
	return activation, ret
}

// profileInfo is the nvmlGpuInstanceProfileInfo_t of p: Id is the GI profile
// ID, SliceCount the compute slices, InstanceCount MaxCount, MemorySizeMB the
// memory in MiB.
func profileInfo(p *mig.Profile) nvml.GpuInstanceProfileInfo {
	return nvml.GpuInstanceProfileInfo{
		Id:                  uint32(p.ID),
		SliceCount:          uint32(p.ComputeSlices),
		InstanceCount:       uint32(p.MaxCount),
		MultiprocessorCount: uint32(p.Multiprocessors),
		CopyEngineCount:     uint32(p.CopyEngines),
		DecoderCount:        uint32(p.Decoders),
		EncoderCount:        uint32(p.Encoders),
		JpegCount:           uint32(p.JPEGEngines),
		OfaCount:            uint32(p.OFAEngines),
		MemorySizeMB:        uint64(p.MemoryMiB),
	}
}

// GetGpuInstanceProfileInfo returns the GI profile for an
// NVML_GPU_INSTANCE_PROFILE_* index (see profileInfo), with MIG mode off too,
// as driver 580 answers (recorded on an H200, testdata/nvml-traces of
// package gpu; nvml.h lists NOT_SUPPORTED "if device doesn't have MIG mode
// enabled"). ERROR_INVALID_ARGUMENT for an index outside
// 0..DriverGIProfileCount-1; ERROR_NOT_SUPPORTED on a MIG device or when the
// model lacks the profile.
func (d device) GetGpuInstanceProfileInfo(profile int) (nvml.GpuInstanceProfileInfo, nvml.Return) {
	var info nvml.GpuInstanceProfileInfo
	ret := d.with("GetGpuInstanceProfileInfo", false, false, func(c devCtx) (bool, nvml.Return) {
		if profile < 0 || profile >= DriverGIProfileCount {
			return false, nvml.ERROR_INVALID_ARGUMENT
		}
		p := profileByNVML(c.m, profile)
		if p == nil {
			return false, nvml.ERROR_NOT_SUPPORTED
		}
		info = profileInfo(p)
		return false, nvml.SUCCESS
	})
	return info, ret
}

// GetGpuInstancePossiblePlacements returns the placements (start, size in
// memory slices) of the profile with GI profile ID info.Id, ascending.
// With MIG mode off too: nvml.h (nvmlDeviceGetGpuInstancePossiblePlacements_v2)
// returns "all the possible placements for the given profile regardless of
// whether MIG is enabled or not". ERROR_INVALID_ARGUMENT for a nil info or a
// profile ID the model lacks (as driver 580 answers); ERROR_NOT_SUPPORTED for
// a MIG device handle.
func (d device) GetGpuInstancePossiblePlacements(info *nvml.GpuInstanceProfileInfo) ([]nvml.GpuInstancePlacement, nvml.Return) {
	var out []nvml.GpuInstancePlacement
	ret := d.with("GetGpuInstancePossiblePlacements", false, false, func(c devCtx) (bool, nvml.Return) {
		if info == nil {
			return false, nvml.ERROR_INVALID_ARGUMENT
		}
		p := profileByID(c.m, int(info.Id))
		if p == nil {
			return false, nvml.ERROR_INVALID_ARGUMENT
		}
		out = make([]nvml.GpuInstancePlacement, len(p.Placements))
		for i, pl := range p.Placements {
			out[i] = nvml.GpuInstancePlacement{Start: uint32(pl.Start), Size: uint32(pl.Size)}
		}
		return false, nvml.SUCCESS
	})
	return out, ret
}

// canPlace reports whether a GI of profile p fits at placement pl on g next to
// the GIs in place: pl is one of p's placements, overlaps no GI, and the
// profile's MaxCount, the model's compute slices, media engines and
// MaxInstances hold.
func canPlace(g *GPU, m *mig.Model, p *mig.Profile, pl mig.Placement) bool {
	if !p.HasPlacement(pl) || len(g.GPUInstances) >= m.MaxInstances {
		return false
	}
	count, compute := 0, p.ComputeSlices
	profiles := []*mig.Profile{p}
	for _, gi := range g.GPUInstances {
		if gi.Placement.Overlaps(pl) {
			return false
		}
		if gi.ProfileID == p.ID {
			count++
		}
		if q := profileByID(m, gi.ProfileID); q != nil {
			compute += q.ComputeSlices
			profiles = append(profiles, q)
		}
	}
	return count < p.MaxCount && compute <= m.ComputeSlices && m.MediaEnginesFit(profiles...)
}

// GetGpuInstanceRemainingCapacity returns how many more GIs of the profile
// with GI profile ID info.Id fit now (placing them greedily in placement
// order, which is exact for the catalog's pairwise disjoint placements);
// with MIG mode off, as many as fit on the empty GPU (as driver 580
// answers). ERROR_INVALID_ARGUMENT for a nil info or an unknown profile ID
// (as driver 580 answers); ERROR_NOT_SUPPORTED on a MIG device.
func (d device) GetGpuInstanceRemainingCapacity(info *nvml.GpuInstanceProfileInfo) (int, nvml.Return) {
	n := 0
	ret := d.with("GetGpuInstanceRemainingCapacity", false, false, func(c devCtx) (bool, nvml.Return) {
		if info == nil {
			return false, nvml.ERROR_INVALID_ARGUMENT
		}
		p := profileByID(c.m, int(info.Id))
		if p == nil {
			return false, nvml.ERROR_INVALID_ARGUMENT
		}
		g := *c.g
		g.GPUInstances = slices.Clone(g.GPUInstances)
		for _, pl := range p.Placements {
			if canPlace(&g, c.m, p, pl) {
				g.GPUInstances = append(g.GPUInstances, GPUInstance{ProfileID: p.ID, Placement: pl})
				n++
			}
		}
		return false, nvml.SUCCESS
	})
	return n, ret
}

// createGI creates a GI of profile p at pl on c.g (canPlace must hold), with
// the ID giID gives (on a geometry where placements do not nest, as in
// synthetic test catalogs, the smallest free ID above those).
func (d device) createGI(c devCtx, p *mig.Profile, pl mig.Placement) (nvml.GpuInstance, bool, nvml.Return) {
	id, ok := giID(c.m, pl, d.index%2 == 1)
	if !ok || c.g.gi(id) != nil {
		for id = 2*c.m.MemorySlices - 1; c.g.gi(id) != nil; id++ {
		}
	}
	if c.lie {
		return d.s.giHandle(d.index, id, 0), false, nvml.SUCCESS
	}
	gi := GPUInstance{ID: id, ProfileID: p.ID, Profile: p.Name, Placement: pl, UID: c.st.nextSerial()}
	c.g.GPUInstances = append(c.g.GPUInstances, gi)
	c.g.sortGIs()
	return d.s.giHandle(d.index, id, gi.UID), true, nvml.SUCCESS
}

// giID is the GPU instance ID NVML gives a GI at placement pl: placements
// form a binary tree over the memory slices (the whole GPU, its halves,
// quarters, eighths) numbered breadth first, so on an 8-slice GPU 7g is GI
// 0, a half at slice 4 GI 2, a quarter at slice 4 GI 5 and single slices
// 0 and 6 GIs 7 and 13, as the MIG User Guide's listings show ("Getting
// Started": 1g.5gb at 0:1 is GI 7, at 6:1 GI 13, 2g.10gb at 4:2 GI 5).
//
// swapped numbers the tree with the GPU's halves swapped: an instance at
// start s gets the ID of the one at s + MemorySlices/2 (modulo
// MemorySlices), the whole GPU still 0. Real GPUs number either way:
// nvidia-smi mig -lgi listings published for A100 and H100 GPUs show, for
// 3g at 4, 2g at 0 and 1g at 2 and 3, GIs 2, 3, 9, 10 on one GPU and 1, 5,
// 13, 14 on the other GPU of the same node, and three 2g at 0, 2, 4 as GIs
// 5, 6, 3. The simulator swaps them on its odd-indexed GPUs, so that no
// code passes on it that takes a GI ID for its placement (GI IDs are read
// from NVML, never derived).
func giID(m *mig.Model, pl mig.Placement, swapped bool) (int, bool) {
	if pl.Size <= 0 || m.MemorySlices%pl.Size != 0 || pl.Start%pl.Size != 0 || m.MemorySlices/pl.Size&(m.MemorySlices/pl.Size-1) != 0 {
		return 0, false
	}
	start := pl.Start
	if swapped {
		start = (start + m.MemorySlices/2) % m.MemorySlices
	}
	return m.MemorySlices/pl.Size - 1 + start/pl.Size, true
}

// CreateGpuInstanceWithPlacement creates a GI of the profile with GI profile
// ID info.Id at placement pl (start and size in memory slices); its GI ID
// follows from the placement and the GPU (giID). ERROR_INVALID_ARGUMENT for nil
// arguments, an unknown profile ID or a placement the profile does not list
// (nvml.h: "If device, profile, profileId, placement or gpuInstance are
// invalid"); ERROR_NOT_SUPPORTED with MIG mode off or on a MIG device;
// ERROR_INSUFFICIENT_RESOURCES when pl overlaps a GI, or the profile's
// MaxCount, the GPU's compute slices, its media engines
// (mig.Model.MediaEnginesFit) or the model's MaxInstances would be
// exceeded. Op "CreateGpuInstanceWithPlacement" (mutating).
func (d device) CreateGpuInstanceWithPlacement(info *nvml.GpuInstanceProfileInfo, pl *nvml.GpuInstancePlacement) (nvml.GpuInstance, nvml.Return) {
	var out nvml.GpuInstance
	ret := d.migOn("CreateGpuInstanceWithPlacement", true, func(c devCtx) (bool, nvml.Return) {
		if info == nil || pl == nil {
			return false, nvml.ERROR_INVALID_ARGUMENT
		}
		p := profileByID(c.m, int(info.Id))
		if p == nil {
			return false, nvml.ERROR_INVALID_ARGUMENT
		}
		at := mig.Placement{Start: int(pl.Start), Size: int(pl.Size)}
		if !p.HasPlacement(at) {
			return false, nvml.ERROR_INVALID_ARGUMENT
		}
		if !canPlace(c.g, c.m, p, at) {
			return false, nvml.ERROR_INSUFFICIENT_RESOURCES
		}
		h, changed, r := d.createGI(c, p, at)
		out = h
		return changed, r
	})
	if ret != nvml.SUCCESS {
		return nil, ret
	}
	return out, ret
}

// CreateGpuInstance creates a GI of the profile with GI profile ID info.Id at
// the first of its placements (ascending start) where it fits; codes as
// CreateGpuInstanceWithPlacement, ERROR_INSUFFICIENT_RESOURCES when it fits
// nowhere. Real NVML chooses otherwise (the MIG User Guide's examples fill
// single slices from the highest free one), and may refuse a sequence this
// accepts; miglayout always names the placement. Op "CreateGpuInstance"
// (mutating).
func (d device) CreateGpuInstance(info *nvml.GpuInstanceProfileInfo) (nvml.GpuInstance, nvml.Return) {
	var out nvml.GpuInstance
	ret := d.migOn("CreateGpuInstance", true, func(c devCtx) (bool, nvml.Return) {
		if info == nil {
			return false, nvml.ERROR_INVALID_ARGUMENT
		}
		p := profileByID(c.m, int(info.Id))
		if p == nil {
			return false, nvml.ERROR_INVALID_ARGUMENT
		}
		for _, pl := range p.Placements {
			if canPlace(c.g, c.m, p, pl) {
				h, changed, r := d.createGI(c, p, pl)
				out = h
				return changed, r
			}
		}
		return false, nvml.ERROR_INSUFFICIENT_RESOURCES
	})
	if ret != nvml.SUCCESS {
		return nil, ret
	}
	return out, ret
}

// GetGpuInstances returns the GIs of the profile with GI profile ID info.Id,
// ordered by placement start. ERROR_INVALID_ARGUMENT for a nil info, an
// info whose InstanceCount is 0 (go-nvml sizes NVML's buffer from it and
// refuses 0 before calling NVML: read the info with
// GetGpuInstanceProfileInfo) or an unknown profile ID; none with MIG mode
// off (as driver 580 answers); ERROR_NOT_SUPPORTED on a MIG device.
func (d device) GetGpuInstances(info *nvml.GpuInstanceProfileInfo) ([]nvml.GpuInstance, nvml.Return) {
	if info == nil || info.InstanceCount == 0 {
		return nil, nvml.ERROR_INVALID_ARGUMENT
	}
	var out []nvml.GpuInstance
	ret := d.with("GetGpuInstances", false, false, func(c devCtx) (bool, nvml.Return) {
		if info == nil || profileByID(c.m, int(info.Id)) == nil {
			return false, nvml.ERROR_INVALID_ARGUMENT
		}
		out = []nvml.GpuInstance{}
		for _, gi := range c.g.GPUInstances {
			if gi.ProfileID == int(info.Id) {
				out = append(out, d.s.giHandle(d.index, gi.ID, gi.UID))
			}
		}
		return false, nvml.SUCCESS
	})
	return out, ret
}

// GetGpuInstanceById returns the GI with the given GI ID. ERROR_NOT_FOUND when
// there is none, MIG mode off included (as driver 580 answers);
// ERROR_NOT_SUPPORTED on a MIG device.
func (d device) GetGpuInstanceById(id int) (nvml.GpuInstance, nvml.Return) {
	var out nvml.GpuInstance
	ret := d.with("GetGpuInstanceById", false, false, func(c devCtx) (bool, nvml.Return) {
		gi := c.g.gi(id)
		if gi == nil {
			return false, nvml.ERROR_NOT_FOUND
		}
		out = d.s.giHandle(d.index, gi.ID, gi.UID)
		return false, nvml.SUCCESS
	})
	return out, ret
}

// GetMaxMigDeviceCount returns the model's MaxInstances with MIG mode on, 0
// with it off. ERROR_NOT_SUPPORTED on a MIG device.
func (d device) GetMaxMigDeviceCount() (int, nvml.Return) {
	n := 0
	ret := d.read("GetMaxMigDeviceCount", false, func(c devCtx) nvml.Return {
		if c.g.MIGCurrent {
			n = c.m.MaxInstances
		}
		return nvml.SUCCESS
	})
	return n, ret
}

// GetMigDeviceHandleByIndex returns the index-th MIG device (a GI with its
// CI), MIG devices ordered by GI ID, then CI ID, as real NVML numbers them
// (nvidia-smi's MIG device table after creating GIs out of ID order), not by
// placement or creation order. ERROR_INVALID_ARGUMENT for a negative
// index and, with MIG mode on, one past GetMaxMigDeviceCount-1;
// ERROR_NOT_FOUND when fewer MIG devices exist, and for any other index with
// MIG mode off (as driver 580 answers for index 0, where
// GetMaxMigDeviceCount is 0); ERROR_NOT_SUPPORTED on a MIG device.
func (d device) GetMigDeviceHandleByIndex(index int) (nvml.Device, nvml.Return) {
	var out nvml.Device
	ret := d.with("GetMigDeviceHandleByIndex", false, false, func(c devCtx) (bool, nvml.Return) {
		if index < 0 || (c.g.MIGCurrent && index >= c.m.MaxInstances) {
			return false, nvml.ERROR_INVALID_ARGUMENT
		}
		all := c.g.migDevices()
		if index >= len(all) {
			return false, nvml.ERROR_NOT_FOUND
		}
		out = d.s.migHandle(d.index, index, all[index].gi, all[index].ci)
		return false, nvml.SUCCESS
	})
	return out, ret
}

// migDev is one MIG device of a GPU: a CI and its GI.
type migDev struct {
	gi *GPUInstance
	ci *ComputeInstance
}

// migDevices are the MIG devices of g in MIG device index order: by GI ID,
// then CI ID.
func (g *GPU) migDevices() []migDev {
	var all []migDev
	for i := range g.GPUInstances {
		gi := &g.GPUInstances[i]
		for j := range gi.ComputeInstances {
			all = append(all, migDev{gi, &gi.ComputeInstances[j]})
		}
	}
	slices.SortFunc(all, func(a, b migDev) int {
		return cmp.Or(cmp.Compare(a.gi.ID, b.gi.ID), cmp.Compare(a.ci.ID, b.ci.ID))
	})
	return all
}

// IsMigDeviceHandle reports whether d is a MIG device handle;
// ERROR_INVALID_ARGUMENT for a stale one.
func (d device) IsMigDeviceHandle() (bool, nvml.Return) {
	ret := d.read("IsMigDeviceHandle", true, func(devCtx) nvml.Return { return nvml.SUCCESS })
	return d.isMIG && ret == nvml.SUCCESS, ret
}

// GetGpuInstanceId returns a MIG device's GI ID; ERROR_INVALID_ARGUMENT on a
// GPU handle (as driver 580 answers).
func (d device) GetGpuInstanceId() (int, nvml.Return) {
	id := 0
	ret := d.read("GetGpuInstanceId", true, func(c devCtx) nvml.Return {
		if c.gi == nil {
			return nvml.ERROR_INVALID_ARGUMENT
		}
		id = c.gi.ID
		return nvml.SUCCESS
	})
	return id, ret
}

// GetComputeInstanceId returns a MIG device's CI ID; ERROR_INVALID_ARGUMENT
// on a GPU handle (as driver 580 answers).
func (d device) GetComputeInstanceId() (int, nvml.Return) {
	id := 0
	ret := d.read("GetComputeInstanceId", true, func(c devCtx) nvml.Return {
		if c.ci == nil {
			return nvml.ERROR_INVALID_ARGUMENT
		}
		id = c.ci.ID
		return nvml.SUCCESS
	})
	return id, ret
}

// GetDeviceHandleFromMigDeviceHandle returns a MIG device's parent GPU;
// ERROR_INVALID_ARGUMENT on a GPU handle.
func (d device) GetDeviceHandleFromMigDeviceHandle() (nvml.Device, nvml.Return) {
	ret := d.read("GetDeviceHandleFromMigDeviceHandle", true, func(c devCtx) nvml.Return {
		if c.gi == nil {
			return nvml.ERROR_INVALID_ARGUMENT
		}
		return nvml.SUCCESS
	})
	if ret != nvml.SUCCESS {
		return nil, ret
	}
	return d.s.gpuHandle(d.index), ret
}

// GetComputeRunningProcesses lists the processes on the device ordered by
// PID: on a MIG device those on it, on a GPU every process on it and its MIG
// devices. UsedGpuMemory is in bytes; GpuInstanceId and ComputeInstanceId are
// 0xFFFFFFFF for a process on the whole GPU.
func (d device) GetComputeRunningProcesses() ([]nvml.ProcessInfo, nvml.Return) {
	var out []nvml.ProcessInfo
	ret := d.read("GetComputeRunningProcesses", true, func(c devCtx) nvml.Return {
		ps := c.st.processesOn(d.index, -1, -1)
		if c.gi != nil {
			ps = c.st.processesOn(d.index, c.gi.ID, c.ci.ID)
		}
		out = make([]nvml.ProcessInfo, 0, len(ps))
		for _, p := range ps {
			out = append(out, nvml.ProcessInfo{
				Pid:               p.PID,
				UsedGpuMemory:     uint64(p.UsedMemoryMiB) << 20,
				GpuInstanceId:     uint32(p.GIID),
				ComputeInstanceId: uint32(p.CIID),
			})
		}
		return nvml.SUCCESS
	})
	return out, ret
}
