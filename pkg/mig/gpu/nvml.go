package gpu

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/hashicorp/go-multierror"
	"k8s.io/klog/v2"

	"github.com/miglayout/miglayout/pkg/mig"
)

// NVMLManager is the Manager over go-nvml. Create it with NewNVML (or Open on
// a node); it holds no cache: every call reads NVML afresh, so it always
// reports NVML truth. It is safe for concurrent use; Shutdown waits for calls
// in flight and makes later calls fail with ErrShutdown.
type NVMLManager struct {
	lib     nvml.Interface
	catalog *mig.Catalog

	mu     sync.RWMutex
	closed bool
}

var _ Manager = (*NVMLManager)(nil)

// Open initialises the system's NVML (libnvidia-ml.so.1) with the embedded
// catalog.
func Open() (*NVMLManager, error) {
	return NewNVML(nvml.New(), mig.DefaultCatalog())
}

// NewNVML initialises lib (nvmlInit) and returns a manager over it; catalog
// nil means mig.DefaultCatalog(). When Init fails no other NVML function is
// called (go-nvml functions other than Init abort the process when the
// library is not loaded) and the error says what to check.
func NewNVML(lib nvml.Interface, catalog *mig.Catalog) (*NVMLManager, error) {
	if catalog == nil {
		catalog = mig.DefaultCatalog()
	}
	if err := initError(lib.Init()); err != nil {
		return nil, err
	}
	return &NVMLManager{lib: lib, catalog: catalog}, nil
}

func initError(ret nvml.Return) error {
	err := nvmlErr("nvmlInit", ret)
	switch ret {
	case nvml.SUCCESS:
		return nil
	case nvml.ERROR_LIBRARY_NOT_FOUND:
		return fmt.Errorf("initialising NVML: libnvidia-ml.so.1 not found: is the NVIDIA driver installed and the agent running with the driver's libraries mounted? %w", err)
	case nvml.ERROR_DRIVER_NOT_LOADED:
		return fmt.Errorf("initialising NVML: the NVIDIA kernel driver is not loaded (is the driver installed and the node booted with it?): %w", err)
	case nvml.ERROR_NO_PERMISSION:
		return fmt.Errorf("initialising NVML: no permission to open the GPU device nodes (/dev/nvidia*): %w", err)
	case nvml.ERROR_LIB_RM_VERSION_MISMATCH:
		return fmt.Errorf("initialising NVML: libnvidia-ml.so.1 does not match the loaded kernel driver (driver upgraded without reboot, or the wrong libraries mounted): %w", err)
	default:
		return fmt.Errorf("initialising NVML: %w", err)
	}
}

// enter takes the read lock and fails after Shutdown.
func (m *NVMLManager) enter() (func(), error) {
	m.mu.RLock()
	if m.closed {
		m.mu.RUnlock()
		return nil, ErrShutdown
	}
	return m.mu.RUnlock, nil
}

// Shutdown releases NVML (nvmlShutdown). Later calls fail with ErrShutdown; a
// second Shutdown is a no-op.
func (m *NVMLManager) Shutdown() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil
	}
	m.closed = true
	if err := nvmlErr("nvmlShutdown", m.lib.Shutdown()); err != nil {
		return fmt.Errorf("shutting down NVML: %w", err)
	}
	return nil
}

// device returns the handle of GPU idx; no GPU at idx wraps ErrNotFound.
func (m *NVMLManager) device(idx int) (nvml.Device, error) {
	dev, ret := m.lib.DeviceGetHandleByIndex(idx)
	if ret != nvml.SUCCESS {
		// INVALID_ARGUMENT: the index is out of range, i.e. no such GPU.
		return nil, fmt.Errorf("getting handle of GPU %d: %w", idx, staleErr("nvmlDeviceGetHandleByIndex", ret))
	}
	return dev, nil
}

// GPUs lists every GPU, ordered by index.
func (m *NVMLManager) GPUs(ctx context.Context) ([]GPU, error) {
	leave, err := m.enter()
	if err != nil {
		return nil, err
	}
	defer leave()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	n, ret := m.lib.DeviceGetCount()
	if err := nvmlErr("nvmlDeviceGetCount", ret); err != nil {
		return nil, fmt.Errorf("counting GPUs: %w", err)
	}
	driver, ret := m.lib.SystemGetDriverVersion()
	if err := nvmlErr("nvmlSystemGetDriverVersion", ret); err != nil {
		return nil, fmt.Errorf("getting driver version: %w", err)
	}
	cuda, ret := m.lib.SystemGetCudaDriverVersion()
	if err := nvmlErr("nvmlSystemGetCudaDriverVersion", ret); err != nil {
		return nil, fmt.Errorf("getting CUDA driver version: %w", err)
	}
	out := make([]GPU, 0, n)
	for i := 0; i < n; i++ {
		dev, err := m.device(i)
		if err != nil {
			return nil, err
		}
		g, err := m.gpu(i, dev)
		if err != nil {
			return nil, fmt.Errorf("reading GPU %d: %w", i, err)
		}
		g.DriverVersion = driver
		g.CUDADriverVersion = cudaVersion(cuda)
		out = append(out, g)
	}
	return out, nil
}

// cudaVersion turns NVML's 1000*major + 10*minor (13000) into "13.0".
func cudaVersion(v int) string { return fmt.Sprintf("%d.%d", v/1000, (v%1000)/10) }

func (m *NVMLManager) gpu(idx int, dev nvml.Device) (GPU, error) {
	g := GPU{Index: idx}
	var ret nvml.Return
	if g.UUID, ret = dev.GetUUID(); ret != nvml.SUCCESS {
		return g, nvmlErr("nvmlDeviceGetUUID", ret)
	}
	product, model, memBytes, err := m.identity(dev)
	if err != nil {
		return g, err
	}
	g.ProductName, g.Model, g.MemoryMiB = product, model, int64(memBytes>>20)
	mode, err := migMode(dev)
	switch {
	case errors.Is(err, ErrNotSupported):
		g.MIGCapable = false
	case err != nil:
		return g, err
	default:
		g.MIGCapable, g.MIGMode = true, mode
	}
	pci, ret := dev.GetPciInfo()
	if ret != nvml.SUCCESS {
		return g, nvmlErr("nvmlDeviceGetPciInfo", ret)
	}
	g.PCIBusID = pciBusID(pci)
	brand, ret := dev.GetBrand()
	if ret != nvml.SUCCESS {
		return g, nvmlErr("nvmlDeviceGetBrand", ret)
	}
	g.Brand = brandName(brand)
	arch, ret := dev.GetArchitecture()
	if ret != nvml.SUCCESS {
		return g, nvmlErr("nvmlDeviceGetArchitecture", ret)
	}
	g.Architecture = architectureName(arch)
	major, minor, ret := dev.GetCudaComputeCapability()
	if ret != nvml.SUCCESS {
		return g, nvmlErr("nvmlDeviceGetCudaComputeCapability", ret)
	}
	g.CUDAComputeCapability = fmt.Sprintf("%d.%d", major, minor)
	if g.Minor, ret = dev.GetMinorNumber(); ret != nvml.SUCCESS {
		return g, nvmlErr("nvmlDeviceGetMinorNumber", ret)
	}
	return g, nil
}

// identity reads a GPU's product name (nvmlDeviceGetName), its catalog
// model (nil when the catalog lacks the product) and its total memory in
// bytes (nvmlDeviceGetMemoryInfo). NVML errors come back typed (nvmlErr).
func (m *NVMLManager) identity(dev nvml.Device) (product string, model *mig.Model, memBytes uint64, err error) {
	product, ret := dev.GetName()
	if ret != nvml.SUCCESS {
		return "", nil, 0, nvmlErr("nvmlDeviceGetName", ret)
	}
	if found, err := m.catalog.Model(product); err == nil {
		model = found
	}
	mem, ret := dev.GetMemoryInfo()
	if ret != nvml.SUCCESS {
		return "", nil, 0, nvmlErr("nvmlDeviceGetMemoryInfo", ret)
	}
	return product, model, mem.Total, nil
}

// migMode reads the MIG mode; a GPU without MIG gives an error wrapping
// ErrNotSupported.
func migMode(dev nvml.Device) (MIGMode, error) {
	cur, pend, ret := dev.GetMigMode()
	if err := nvmlErr("nvmlDeviceGetMigMode", ret); err != nil {
		return MIGMode{}, err
	}
	return MIGMode{Current: cur == nvml.DEVICE_MIG_ENABLE, Pending: pend == nvml.DEVICE_MIG_ENABLE}, nil
}

// pciBusID returns the domain:bus:device.function form that NVIDIA's DRA
// driver publishes (go-nvlib's GetPCIBusID): NVML's busId lower-cased with
// the 8-digit domain cut to 4 ("00000000:07:00.0" -> "0000:07:00.0").
func pciBusID(info nvml.PciInfo) string {
	var b strings.Builder
	for _, c := range info.BusId {
		if c == 0 {
			break
		}
		b.WriteByte(byte(c))
	}
	id := strings.ToLower(b.String())
	if id == "" {
		return fmt.Sprintf("%04x:%02x:%02x.0", info.Domain, info.Bus, info.Device)
	}
	if dom, rest, ok := strings.Cut(id, ":"); ok && len(dom) == 8 && strings.HasPrefix(dom, "0000") {
		id = dom[4:] + ":" + rest
	}
	return id
}

// brandName spells NVML brand types as go-nvlib's GetBrandAsString does
// (the strings NVIDIA's DRA driver publishes).
func brandName(b nvml.BrandType) string {
	switch b {
	case nvml.BRAND_QUADRO:
		return "Quadro"
	case nvml.BRAND_TESLA:
		return "Tesla"
	case nvml.BRAND_NVS:
		return "NVS"
	case nvml.BRAND_GRID:
		return "Grid"
	case nvml.BRAND_GEFORCE:
		return "GeForce"
	case nvml.BRAND_TITAN:
		return "Titan"
	case nvml.BRAND_NVIDIA_VAPPS:
		return "NvidiaVApps"
	case nvml.BRAND_NVIDIA_VPC:
		return "NvidiaVPC"
	case nvml.BRAND_NVIDIA_VCS:
		return "NvidiaVCS"
	case nvml.BRAND_NVIDIA_VWS:
		return "NvidiaVWS"
	case nvml.BRAND_NVIDIA_CLOUD_GAMING:
		return "NvidiaCloudGaming"
	case nvml.BRAND_QUADRO_RTX:
		return "QuadroRTX"
	case nvml.BRAND_NVIDIA_RTX:
		return "NvidiaRTX"
	case nvml.BRAND_NVIDIA:
		return "Nvidia"
	case nvml.BRAND_GEFORCE_RTX:
		return "GeForceRTX"
	case nvml.BRAND_TITAN_RTX:
		return "TitanRTX"
	default:
		return "Unknown"
	}
}

// architectureName spells NVML architectures as go-nvlib's
// GetArchitectureAsString does.
func architectureName(a nvml.DeviceArchitecture) string {
	switch a {
	case nvml.DEVICE_ARCH_KEPLER:
		return "Kepler"
	case nvml.DEVICE_ARCH_MAXWELL:
		return "Maxwell"
	case nvml.DEVICE_ARCH_PASCAL:
		return "Pascal"
	case nvml.DEVICE_ARCH_VOLTA:
		return "Volta"
	case nvml.DEVICE_ARCH_TURING:
		return "Turing"
	case nvml.DEVICE_ARCH_AMPERE:
		return "Ampere"
	case nvml.DEVICE_ARCH_ADA:
		return "Ada Lovelace"
	case nvml.DEVICE_ARCH_HOPPER:
		return "Hopper"
	case nvml.DEVICE_ARCH_BLACKWELL:
		return "Blackwell"
	case nvml.DEVICE_ARCH_RUBIN:
		return "Rubin"
	default:
		return "Unknown"
	}
}

// gpuInstance is one GI found on a GPU with what describing it needs.
type gpuInstance struct {
	handle  nvml.GpuInstance
	info    nvml.GpuInstanceInfo
	profile nvml.GpuInstanceProfileInfo
	name    string // catalog profile name (or derived, on an uncatalogued GPU)
}

func (g gpuInstance) device() mig.Device {
	return mig.Device{Profile: g.name, Start: int(g.info.Placement.Start)}
}

// gpuState is what one walk of a GPU reads: its model, memory and GIs.
type gpuState struct {
	dev      nvml.Device
	model    *mig.Model // nil when the catalog lacks the GPU
	product  string
	memBytes uint64
	migOn    bool
	gis      []gpuInstance // sorted by placement start
}

// walk reads the GPU's GIs: for each GI profile of the catalog model (or each
// NVML_GPU_INSTANCE_PROFILE_* index NVML accepts, on a GPU the catalog
// lacks) GetGpuInstanceProfileInfo, then GetGpuInstances and each GI's info.
// A GPU with MIG mode off (or without MIG) has none.
func (m *NVMLManager) walk(ctx context.Context, idx int) (*gpuState, error) {
	dev, err := m.device(idx)
	if err != nil {
		return nil, err
	}
	s := &gpuState{dev: dev}
	if s.product, s.model, s.memBytes, err = m.identity(dev); err != nil {
		return nil, err
	}
	mode, err := migMode(dev)
	if errors.Is(err, ErrNotSupported) {
		return s, nil
	}
	if err != nil {
		return nil, err
	}
	if !mode.Current {
		return s, nil
	}
	s.migOn = true

	var indices []int
	if s.model != nil {
		for _, p := range s.model.Profiles {
			indices = append(indices, p.NVMLProfile)
		}
	} else {
		for i := 0; i < nvml.GPU_INSTANCE_PROFILE_COUNT; i++ {
			indices = append(indices, i)
		}
	}
	seen := map[uint32]bool{}
	logger := klog.FromContext(ctx)
	for _, pi := range indices {
		info, ret := dev.GetGpuInstanceProfileInfo(pi)
		if ret == nvml.ERROR_NOT_SUPPORTED || ret == nvml.ERROR_INVALID_ARGUMENT {
			// The GPU (or this driver) does not offer the profile, so it
			// has no GI of it.
			if s.model != nil {
				logger.V(4).Info("GPU does not offer catalog profile", "gpu", idx, "nvmlProfile", pi, "return", ret.Error())
			}
			continue
		}
		if err := nvmlErr("nvmlDeviceGetGpuInstanceProfileInfo", ret); err != nil {
			return nil, fmt.Errorf("getting GI profile info %d: %w", pi, err)
		}
		if seen[info.Id] || info.InstanceCount == 0 {
			continue
		}
		seen[info.Id] = true
		handles, ret := dev.GetGpuInstances(&info)
		if err := nvmlErr("nvmlDeviceGetGpuInstances", ret); err != nil {
			return nil, fmt.Errorf("listing GPU instances of GI profile %d: %w", info.Id, err)
		}
		for _, h := range handles {
			gi, ret := h.GetInfo()
			if err := staleErr("nvmlGpuInstanceGetInfo", ret); err != nil {
				return nil, fmt.Errorf("reading a GPU instance of GI profile %d: %w", info.Id, err)
			}
			name := ""
			if s.model != nil {
				if p := s.model.ProfileByID(int(gi.ProfileId)); p != nil {
					name = p.Name
				}
			}
			if name == "" {
				name = derivedProfileName(pi, info, s.memBytes)
			}
			s.gis = append(s.gis, gpuInstance{handle: h, info: gi, profile: info, name: name})
		}
	}
	slices.SortFunc(s.gis, func(a, b gpuInstance) int {
		if a.info.Placement.Start != b.info.Placement.Start {
			return int(a.info.Placement.Start) - int(b.info.Placement.Start)
		}
		return strings.Compare(a.name, b.name)
	})
	return s, nil
}

// find returns the GI that is device d, or an error wrapping ErrNotFound.
func (s *gpuState) find(d mig.Device) (gpuInstance, error) {
	for _, g := range s.gis {
		if g.device() == d {
			return g, nil
		}
	}
	if !s.migOn {
		return gpuInstance{}, fmt.Errorf("%w: MIG mode is off, so there is no GPU instance %s", ErrNotFound, d)
	}
	have := make([]string, len(s.gis))
	for i, g := range s.gis {
		have[i] = g.device().String()
	}
	return gpuInstance{}, fmt.Errorf("%w: no GPU instance %s (have: %q)", ErrNotFound, d, strings.Join(have, ","))
}

// derivedProfileName names a GI profile that the catalog lacks the way
// nvidia-smi and go-nvlib do: "<slices>g.<GB>gb", GB being the profile's
// share of the GPU's memory rounded up to eighths times the GPU's GB, with
// "+me", "-me", "+me.all" or "+gfx" from the NVML profile index.
func derivedProfileName(nvmlProfile int, info nvml.GpuInstanceProfileInfo, totalBytes uint64) string {
	gb := uint64(math.Round(float64(info.MemorySizeMB) / 1024))
	if totalBytes > 0 {
		const gib = 1 << 30
		frac := float64(info.MemorySizeMB<<20) / float64(totalBytes)
		frac = math.Ceil(frac*8) / 8
		gb = uint64(math.Round(frac * float64((totalBytes+gib-1)/gib)))
	}
	suffix := ""
	switch nvmlProfile {
	case nvml.GPU_INSTANCE_PROFILE_1_SLICE_REV1, nvml.GPU_INSTANCE_PROFILE_2_SLICE_REV1:
		suffix = "+me"
	case nvml.GPU_INSTANCE_PROFILE_1_SLICE_NO_ME, nvml.GPU_INSTANCE_PROFILE_2_SLICE_NO_ME:
		suffix = "-me"
	case nvml.GPU_INSTANCE_PROFILE_1_SLICE_ALL_ME, nvml.GPU_INSTANCE_PROFILE_2_SLICE_ALL_ME:
		suffix = "+me.all"
	case nvml.GPU_INSTANCE_PROFILE_1_SLICE_GFX, nvml.GPU_INSTANCE_PROFILE_2_SLICE_GFX,
		nvml.GPU_INSTANCE_PROFILE_3_SLICE_GFX, nvml.GPU_INSTANCE_PROFILE_4_SLICE_GFX:
		suffix = "+gfx"
	}
	return fmt.Sprintf("%dg.%dgb%s", info.SliceCount, gb, suffix)
}

// ciProfileIndex is the NVML_COMPUTE_INSTANCE_PROFILE_<N>_SLICE index of the
// CI that spans all n compute slices of a GI.
func ciProfileIndex(n uint32) (int, error) {
	switch n {
	case 1:
		return nvml.COMPUTE_INSTANCE_PROFILE_1_SLICE, nil
	case 2:
		return nvml.COMPUTE_INSTANCE_PROFILE_2_SLICE, nil
	case 3:
		return nvml.COMPUTE_INSTANCE_PROFILE_3_SLICE, nil
	case 4:
		return nvml.COMPUTE_INSTANCE_PROFILE_4_SLICE, nil
	case 6:
		return nvml.COMPUTE_INSTANCE_PROFILE_6_SLICE, nil
	case 7:
		return nvml.COMPUTE_INSTANCE_PROFILE_7_SLICE, nil
	case 8:
		return nvml.COMPUTE_INSTANCE_PROFILE_8_SLICE, nil
	}
	return 0, fmt.Errorf("%w: no compute-instance profile spans %d compute slices", ErrNotSupported, n)
}

// fullCIProfile returns the profile info of the full-size CI of a GI whose
// profile has the given compute slice count (engine profile SHARED).
func fullCIProfile(gi nvml.GpuInstance, slices uint32) (nvml.ComputeInstanceProfileInfo, error) {
	idx, err := ciProfileIndex(slices)
	if err != nil {
		return nvml.ComputeInstanceProfileInfo{}, err
	}
	info, ret := gi.GetComputeInstanceProfileInfo(idx, nvml.COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED)
	if err := staleErr("nvmlGpuInstanceGetComputeInstanceProfileInfo", ret); err != nil {
		return info, err
	}
	return info, nil
}

// migHandles maps (GI ID, CI ID) to the MIG device handles of a GPU
// (GetMigDeviceHandleByIndex over GetMaxMigDeviceCount).
func migHandles(dev nvml.Device) (map[[2]int]nvml.Device, error) {
	n, ret := dev.GetMaxMigDeviceCount()
	if err := nvmlErr("nvmlDeviceGetMaxMigDeviceCount", ret); err != nil {
		return nil, err
	}
	out := map[[2]int]nvml.Device{}
	for j := 0; j < n; j++ {
		h, ret := dev.GetMigDeviceHandleByIndex(j)
		if ret == nvml.ERROR_NOT_FOUND || ret == nvml.ERROR_INVALID_ARGUMENT {
			continue // no MIG device at this index
		}
		if err := nvmlErr("nvmlDeviceGetMigDeviceHandleByIndex", ret); err != nil {
			return nil, err
		}
		gi, ret := h.GetGpuInstanceId()
		if err := staleErr("nvmlDeviceGetGpuInstanceId", ret); err != nil {
			return nil, err
		}
		ci, ret := h.GetComputeInstanceId()
		if err := staleErr("nvmlDeviceGetComputeInstanceId", ret); err != nil {
			return nil, err
		}
		out[[2]int{gi, ci}] = h
	}
	return out, nil
}

// describe turns a GI into a MIGDevice: its full-size CI (CIID -1 without
// one) and the MIG device UUID from the handles map.
func describe(idx int, parentUUID string, g gpuInstance, handles map[[2]int]nvml.Device) (MIGDevice, error) {
	d := MIGDevice{
		GPUIndex:        idx,
		ParentUUID:      parentUUID,
		Profile:         g.name,
		ProfileID:       int(g.info.ProfileId),
		Placement:       mig.Placement{Start: int(g.info.Placement.Start), Size: int(g.info.Placement.Size)},
		GIID:            int(g.info.Id),
		CIID:            -1,
		MemoryMiB:       int64(g.profile.MemorySizeMB),
		Multiprocessors: int(g.profile.MultiprocessorCount),
		CopyEngines:     int(g.profile.CopyEngineCount),
		Decoders:        int(g.profile.DecoderCount),
		Encoders:        int(g.profile.EncoderCount),
		JPEGEngines:     int(g.profile.JpegCount),
		OFAEngines:      int(g.profile.OfaCount),
	}
	ciProf, err := fullCIProfile(g.handle, g.profile.SliceCount)
	if err != nil {
		return d, fmt.Errorf("getting full-size CI profile: %w", err)
	}
	if ciProf.InstanceCount == 0 {
		return d, nil
	}
	cis, ret := g.handle.GetComputeInstances(&ciProf)
	if err := staleErr("nvmlGpuInstanceGetComputeInstances", ret); err != nil {
		return d, fmt.Errorf("listing compute instances: %w", err)
	}
	if len(cis) == 0 {
		return d, nil
	}
	ci, ret := cis[0].GetInfo()
	if err := staleErr("nvmlComputeInstanceGetInfo", ret); err != nil {
		return d, fmt.Errorf("reading compute instance: %w", err)
	}
	d.CIID = int(ci.Id)
	if h, ok := handles[[2]int{d.GIID, d.CIID}]; ok {
		uuid, ret := h.GetUUID()
		if err := staleErr("nvmlDeviceGetUUID", ret); err != nil {
			return d, fmt.Errorf("getting MIG device UUID: %w", err)
		}
		d.UUID = uuid
	}
	return d, nil
}

// MIGDevices lists the GIs of GPU gpuIndex with their full-size CIs, ordered
// by placement start. A GI without a full-size CI has CIID -1 and no UUID.
func (m *NVMLManager) MIGDevices(ctx context.Context, gpuIndex int) ([]MIGDevice, error) {
	leave, err := m.enter()
	if err != nil {
		return nil, err
	}
	defer leave()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	out, err := m.migDevices(ctx, gpuIndex)
	if err != nil {
		return nil, fmt.Errorf("listing MIG devices of GPU %d: %w", gpuIndex, err)
	}
	return out, nil
}

func (m *NVMLManager) migDevices(ctx context.Context, idx int) ([]MIGDevice, error) {
	s, err := m.walk(ctx, idx)
	if err != nil {
		return nil, err
	}
	if len(s.gis) == 0 {
		return nil, nil
	}
	uuid, ret := s.dev.GetUUID()
	if err := nvmlErr("nvmlDeviceGetUUID", ret); err != nil {
		return nil, err
	}
	handles, err := migHandles(s.dev)
	if err != nil {
		return nil, err
	}
	out := make([]MIGDevice, 0, len(s.gis))
	for _, g := range s.gis {
		d, err := describe(idx, uuid, g, handles)
		if err != nil {
			return nil, fmt.Errorf("GPU instance %s (GI %d): %w", g.device(), g.info.Id, err)
		}
		out = append(out, d)
	}
	return out, nil
}

// CreateMIGDevice creates a GI of profile d.Profile at placement
// {d.Start, MemorySlices} (CreateGpuInstanceWithPlacement) and its full-size
// CI. The GPU must be in the catalog and the placement one the profile
// allows; otherwise NVML is not called (the error wraps mig.ErrUnknownModel,
// mig.ErrUnknownProfile, or mig.ErrInvalidLayout together with
// ErrInsufficientResources). If the CI cannot be created the GI is destroyed
// again; the error then names both failures when the rollback fails too.
func (m *NVMLManager) CreateMIGDevice(ctx context.Context, gpuIndex int, d mig.Device) (MIGDevice, error) {
	leave, err := m.enter()
	if err != nil {
		return MIGDevice{}, err
	}
	defer leave()
	if err := ctx.Err(); err != nil {
		return MIGDevice{}, err
	}
	logger := klog.FromContext(ctx).WithValues("gpu", gpuIndex, "device", d.String())
	out, err := m.create(logger, gpuIndex, d)
	if err != nil {
		return MIGDevice{}, fmt.Errorf("creating MIG device %s on GPU %d: %w", d, gpuIndex, err)
	}
	logger.V(2).Info("Created MIG device", "giID", out.GIID, "ciID", out.CIID, "uuid", out.UUID)
	return out, nil
}

func (m *NVMLManager) create(logger klog.Logger, idx int, d mig.Device) (MIGDevice, error) {
	dev, err := m.device(idx)
	if err != nil {
		return MIGDevice{}, err
	}
	product, ret := dev.GetName()
	if err := nvmlErr("nvmlDeviceGetName", ret); err != nil {
		return MIGDevice{}, err
	}
	model, err := m.catalog.Model(product)
	if err != nil {
		return MIGDevice{}, fmt.Errorf("GPU is not in the MIG catalog, so it is never repartitioned: %w", err)
	}
	p, err := model.Profile(d.Profile)
	if err != nil {
		return MIGDevice{}, err
	}
	pl := mig.Placement{Start: d.Start, Size: p.MemorySlices}
	if !p.HasPlacement(pl) {
		starts := make([]string, len(p.Placements))
		for i, q := range p.Placements {
			starts[i] = fmt.Sprint(q.Start)
		}
		return MIGDevice{}, fmt.Errorf("placement start %d is not valid for %s on %s (valid starts: %s): %w (%w)",
			d.Start, p.Name, model.Name, strings.Join(starts, ","), mig.ErrInvalidLayout, ErrInsufficientResources)
	}
	info, ret := dev.GetGpuInstanceProfileInfo(p.NVMLProfile)
	if err := nvmlErr("nvmlDeviceGetGpuInstanceProfileInfo", ret); err != nil {
		return MIGDevice{}, fmt.Errorf("getting GI profile info of %s (NVML profile %d): %w", p.Name, p.NVMLProfile, err)
	}
	if int(info.Id) != p.ID {
		return MIGDevice{}, fmt.Errorf("%w: the catalog gives %s on %s GI profile ID %d, NVML reports %d for NVML profile %d",
			ErrNotSupported, p.Name, model.Name, p.ID, info.Id, p.NVMLProfile)
	}
	uuid, ret := dev.GetUUID()
	if err := nvmlErr("nvmlDeviceGetUUID", ret); err != nil {
		return MIGDevice{}, err
	}

	logger.V(2).Info("Creating GPU instance", "profileID", info.Id, "placement", fmt.Sprintf("%d:%d", pl.Start, pl.Size))
	gi, ret := dev.CreateGpuInstanceWithPlacement(&info, &nvml.GpuInstancePlacement{Start: uint32(pl.Start), Size: uint32(pl.Size)})
	if err := nvmlErr("nvmlDeviceCreateGpuInstanceWithPlacement", ret); err != nil {
		return MIGDevice{}, fmt.Errorf("creating GPU instance: %w", err)
	}
	giInfo, ret := gi.GetInfo()
	if err := staleErr("nvmlGpuInstanceGetInfo", ret); err != nil {
		return MIGDevice{}, m.rollback(logger, gi, fmt.Errorf("reading the new GPU instance: %w", err))
	}
	logger.V(2).Info("Creating compute instance", "giID", giInfo.Id, "ciSlices", info.SliceCount)
	ciProf, err := fullCIProfile(gi, info.SliceCount)
	if err != nil {
		return MIGDevice{}, m.rollback(logger, gi, fmt.Errorf("getting full-size CI profile of GI %d: %w", giInfo.Id, err))
	}
	if _, ret := gi.CreateComputeInstance(&ciProf); ret != nvml.SUCCESS {
		return MIGDevice{}, m.rollback(logger, gi, fmt.Errorf("creating compute instance in GI %d: %w", giInfo.Id,
			staleErr("nvmlGpuInstanceCreateComputeInstance", ret)))
	}
	handles, err := migHandles(dev)
	if err != nil {
		return MIGDevice{}, fmt.Errorf("created GI %d with its CI, but listing MIG devices failed: %w", giInfo.Id, err)
	}
	out, err := describe(idx, uuid, gpuInstance{handle: gi, info: giInfo, profile: info, name: p.Name}, handles)
	if err != nil {
		return MIGDevice{}, fmt.Errorf("created GI %d with its CI, but reading it back failed: %w", giInfo.Id, err)
	}
	if out.CIID < 0 {
		// NVML reported the CI created, but the GI has none (destroyed
		// behind our back, or a driver fault): never hand out a GI that no
		// container can use.
		return MIGDevice{}, m.rollback(logger, gi, fmt.Errorf("creating compute instance in GI %d: NVML reported success but the GPU instance has no compute instance: %w",
			giInfo.Id, ErrNVML))
	}
	return out, nil
}

// rollback destroys a GI whose CI could not be created and returns cause,
// joined with the rollback's own failure if any.
func (m *NVMLManager) rollback(logger klog.Logger, gi nvml.GpuInstance, cause error) error {
	logger.V(2).Info("Rolling back GPU instance after failure", "err", cause.Error())
	if err := staleErr("nvmlGpuInstanceDestroy", gi.Destroy()); err != nil {
		return &multierror.Error{
			Errors:      []error{cause, fmt.Errorf("rolling back the GPU instance failed, it is left without a compute instance: %w", err)},
			ErrorFormat: joinErrors,
		}
	}
	return fmt.Errorf("%w (the GPU instance was destroyed again)", cause)
}

// joinErrors formats a multierror on one line: "a; and then b".
func joinErrors(errs []error) string {
	msgs := make([]string, len(errs))
	for i, e := range errs {
		msgs[i] = e.Error()
	}
	return strings.Join(msgs, "; and then ")
}

// DestroyMIGDevice destroys the CIs and then the GI that is device d. No such
// GI wraps ErrNotFound; processes on it wrap ErrInUse (and nothing is
// destroyed).
func (m *NVMLManager) DestroyMIGDevice(ctx context.Context, gpuIndex int, d mig.Device) error {
	leave, err := m.enter()
	if err != nil {
		return err
	}
	defer leave()
	if err := ctx.Err(); err != nil {
		return err
	}
	logger := klog.FromContext(ctx).WithValues("gpu", gpuIndex, "device", d.String())
	if err := m.destroy(ctx, logger, gpuIndex, d); err != nil {
		return fmt.Errorf("destroying MIG device %s on GPU %d: %w", d, gpuIndex, err)
	}
	logger.V(2).Info("Destroyed MIG device")
	return nil
}

func (m *NVMLManager) destroy(ctx context.Context, logger klog.Logger, idx int, d mig.Device) error {
	s, err := m.walk(ctx, idx)
	if err != nil {
		return err
	}
	g, err := s.find(d)
	if err != nil {
		return err
	}
	procs, err := giProcesses(s.dev, g)
	if err != nil {
		return err
	}
	if len(procs) > 0 {
		pids := make([]string, len(procs))
		for i, p := range procs {
			pids[i] = fmt.Sprint(p.PID)
		}
		return fmt.Errorf("%w: %d process(es) running on GI %d (PIDs %s)", ErrInUse, len(procs), g.info.Id, strings.Join(pids, ", "))
	}
	// The full-size CI first, then any other CI someone else created: a GI
	// with a CI left cannot be destroyed.
	first, err := ciProfileIndex(g.profile.SliceCount)
	if err != nil {
		return err
	}
	order := []int{first}
	for i := 0; i < nvml.COMPUTE_INSTANCE_PROFILE_COUNT; i++ {
		if i != first {
			order = append(order, i)
		}
	}
	for _, ci := range order {
		prof, ret := g.handle.GetComputeInstanceProfileInfo(ci, nvml.COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED)
		if ret != nvml.SUCCESS {
			if ci == first {
				return fmt.Errorf("getting full-size CI profile of GI %d: %w", g.info.Id, staleErr("nvmlGpuInstanceGetComputeInstanceProfileInfo", ret))
			}
			continue // a CI profile this GI does not offer
		}
		if prof.InstanceCount == 0 {
			continue
		}
		cis, ret := g.handle.GetComputeInstances(&prof)
		if err := staleErr("nvmlGpuInstanceGetComputeInstances", ret); err != nil {
			return fmt.Errorf("listing compute instances of GI %d: %w", g.info.Id, err)
		}
		for _, c := range cis {
			info, ret := c.GetInfo()
			if err := staleErr("nvmlComputeInstanceGetInfo", ret); err != nil {
				return fmt.Errorf("reading a compute instance of GI %d: %w", g.info.Id, err)
			}
			logger.V(2).Info("Destroying compute instance", "giID", g.info.Id, "ciID", info.Id)
			if err := staleErr("nvmlComputeInstanceDestroy", c.Destroy()); err != nil {
				return fmt.Errorf("destroying compute instance %d of GI %d: %w", info.Id, g.info.Id, err)
			}
		}
	}
	logger.V(2).Info("Destroying GPU instance", "giID", g.info.Id)
	if err := staleErr("nvmlGpuInstanceDestroy", g.handle.Destroy()); err != nil {
		return fmt.Errorf("destroying GPU instance %d: %w", g.info.Id, err)
	}
	return nil
}

// giProcesses lists the compute processes on every MIG device (CI) of a GI.
func giProcesses(dev nvml.Device, g gpuInstance) ([]Process, error) {
	handles, err := migHandles(dev)
	if err != nil {
		return nil, err
	}
	keys := make([][2]int, 0, len(handles))
	for k := range handles {
		if k[0] == int(g.info.Id) {
			keys = append(keys, k)
		}
	}
	slices.SortFunc(keys, func(a, b [2]int) int { return a[1] - b[1] })
	var out []Process
	for _, k := range keys {
		procs, ret := handles[k].GetComputeRunningProcesses()
		if err := staleErr("nvmlDeviceGetComputeRunningProcesses", ret); err != nil {
			return nil, fmt.Errorf("listing processes on GI %d CI %d: %w", k[0], k[1], err)
		}
		for _, p := range procs {
			out = append(out, Process{PID: p.Pid, UsedMemoryMiB: int64(p.UsedGpuMemory >> 20)})
		}
	}
	return out, nil
}

// Processes lists the compute processes on MIG device d of GPU gpuIndex
// (GetComputeRunningProcesses on its MIG device handle). A GI without a CI
// has none; no such GI wraps ErrNotFound.
func (m *NVMLManager) Processes(ctx context.Context, gpuIndex int, d mig.Device) ([]Process, error) {
	leave, err := m.enter()
	if err != nil {
		return nil, err
	}
	defer leave()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s, err := m.walk(ctx, gpuIndex)
	if err == nil {
		var g gpuInstance
		if g, err = s.find(d); err == nil {
			var procs []Process
			if procs, err = giProcesses(s.dev, g); err == nil {
				return procs, nil
			}
		}
	}
	return nil, fmt.Errorf("listing processes on MIG device %s of GPU %d: %w", d, gpuIndex, err)
}

// SetMIGMode enables or disables MIG mode and returns the mode NVML reports
// afterwards; Pending differs from Current while a GPU reset is needed.
func (m *NVMLManager) SetMIGMode(ctx context.Context, gpuIndex int, enabled bool) (MIGMode, error) {
	leave, err := m.enter()
	if err != nil {
		return MIGMode{}, err
	}
	defer leave()
	if err := ctx.Err(); err != nil {
		return MIGMode{}, err
	}
	word, mode := "disabled", nvml.DEVICE_MIG_DISABLE
	if enabled {
		word, mode = "enabled", nvml.DEVICE_MIG_ENABLE
	}
	logger := klog.FromContext(ctx).WithValues("gpu", gpuIndex, "migMode", word)
	fail := func(err error) (MIGMode, error) {
		return MIGMode{}, fmt.Errorf("setting MIG mode %s on GPU %d: %w", word, gpuIndex, err)
	}
	dev, err := m.device(gpuIndex)
	if err != nil {
		return fail(err)
	}
	logger.V(2).Info("Setting MIG mode")
	activation, ret := dev.SetMigMode(mode)
	if err := nvmlErr("nvmlDeviceSetMigMode", ret); err != nil {
		return fail(err)
	}
	got, err := migMode(dev)
	if err != nil {
		return fail(err)
	}
	if activation != nvml.SUCCESS {
		logger.V(2).Info("MIG mode change is pending", "activationStatus", activation.Error(), "current", got.Current, "pending", got.Pending)
	} else {
		logger.V(2).Info("Set MIG mode", "current", got.Current, "pending", got.Pending)
	}
	return got, nil
}
