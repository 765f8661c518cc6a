package gpu

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	nvlibdevice "github.com/NVIDIA/go-nvlib/pkg/nvlib/device"
	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"k8s.io/klog/v2"

	"github.com/miglayout/miglayout/pkg/mig"
)

// GPUs lists every GPU, ordered by index. GPUs NVML counts but cannot read
// (Unreadable: lost, or not accessible) are left out and named in an
// *UnreadableGPUsError returned with the others; a GPU whose read fails
// otherwise (a timeout, ERROR_UNKNOWN) fails the listing with a
// *FailedGPUsError, still returned with the GPUs read; any other error
// (counting GPUs, reading the driver version) fails the listing.
func (m *NVMLManager) GPUs(ctx context.Context) ([]GPU, error) {
	leave, err := m.enter(ctx)
	if err != nil {
		return nil, err
	}
	defer leave()
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
	unreadable, failed := map[int]error{}, map[int]error{}
	for i := 0; i < n; i++ {
		dev, err := m.device(i)
		if err == nil {
			var g GPU
			if g, err = m.gpu(ctx, i, dev); err == nil {
				g.DriverVersion = driver
				g.CUDADriverVersion = cudaVersion(cuda)
				out = append(out, g)
				continue
			}
		}
		if !Unreadable(err) {
			// Anything else (a timeout, ERROR_UNKNOWN) may pass: the
			// listing fails rather than report a sound GPU gone, but
			// the other GPUs are still read for callers that need
			// only some (GPUErrors).
			failed[i] = err
			continue
		}
		unreadable[i] = err
	}
	if len(failed) > 0 {
		return out, &FailedGPUsError{Failed: failed, Unreadable: unreadable}
	}
	if len(unreadable) > 0 {
		return out, &UnreadableGPUsError{Errors: unreadable}
	}
	return out, nil
}

// cudaVersion turns NVML's 1000*major + 10*minor (13000) into "13.0".
func cudaVersion(v int) string { return fmt.Sprintf("%d.%d", v/1000, (v%1000)/10) }

func (m *NVMLManager) gpu(ctx context.Context, idx int, dev nvml.Device) (GPU, error) {
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
	if g.PCIBusID, g.Brand, g.Architecture, err = nvlibNames(dev); err != nil {
		return g, err
	}
	major, minor, ret := dev.GetCudaComputeCapability()
	if ret != nvml.SUCCESS {
		return g, nvmlErr("nvmlDeviceGetCudaComputeCapability", ret)
	}
	g.CUDAComputeCapability = fmt.Sprintf("%d.%d", major, minor)
	if g.Minor, ret = dev.GetMinorNumber(); ret != nvml.SUCCESS {
		return g, nvmlErr("nvmlDeviceGetMinorNumber", ret)
	}
	if g.Model != nil {
		// Read with MIG mode on; with it off, the table read before (the
		// best guess of what the next MIG mode offers), or NVML's answer
		// with MIG mode off where none was, so that a layout NVML refuses
		// is refused before MIG mode is turned on for it.
		t, ok := m.cachedProfileTable(g.UUID, g.Model.Name)
		if g.MIGMode.Current {
			t, ok = m.profileTable(ctx, dev, g, memBytes), true
		} else {
			if !ok {
				t, ok = m.migOffProfileTable(ctx, dev, g, memBytes)
			}
			m.markProfileTableStale(g.UUID)
		}
		if ok {
			g.ProfileValues, g.CatalogMismatches = t.values, t.mismatches
			g.NVMLPlacements, g.NVMLProfileIDs = t.placements, t.ids
		}
	}
	return g, nil
}

// markProfileTableStale has the GPU's profile table read again the next time
// MIG mode is on: the table is NVML's for one MIG mode only.
func (m *NVMLManager) markProfileTableStale(uuid string) {
	m.profilesMu.Lock()
	defer m.profilesMu.Unlock()
	if _, ok := m.profiles[uuid]; !ok {
		return
	}
	if m.staleProfiles == nil {
		m.staleProfiles = map[string]bool{}
	}
	m.staleProfiles[uuid] = true
}

// cachedProfileTable is the GPU's profile table if it was read before, for
// the catalog model named model.
func (m *NVMLManager) cachedProfileTable(uuid, model string) (profileTable, bool) {
	m.profilesMu.Lock()
	defer m.profilesMu.Unlock()
	t, ok := m.profiles[uuid]
	if !ok || t.model != model {
		return profileTable{}, false
	}
	return t, true
}

// profileTable is what a GPU's NVML says of its profiles otherwise than the
// catalog (GPU.ProfileValues, GPU.CatalogMismatches).
type profileTable struct {
	model      string // the catalog model's name
	values     []mig.NVMLProfileValues
	mismatches []string
	placements map[string][]mig.Placement // by profile, where NVML's differ
	ids        map[string]int             // by profile, where NVML's differs
}

// profileTable returns g's profile table (see readProfileTable), read once
// per GPU and MIG mode (markProfileTableStale). It is best effort: a read
// that fails is logged and tried again on the next call, and the GPU is
// reported with the table of its last MIG mode, or without one (its devices
// are still published with NVML's values; only planned devices take the
// catalog's).
func (m *NVMLManager) profileTable(ctx context.Context, dev nvml.Device, g GPU, memBytes uint64) profileTable {
	m.profilesMu.Lock()
	defer m.profilesMu.Unlock()
	old, ok := m.profiles[g.UUID]
	if ok && old.model != g.Model.Name {
		old = profileTable{}
	} else if ok && !m.staleProfiles[g.UUID] {
		return old
	}
	t, err := readProfileTable(dev, g.Model, memBytes)
	if err != nil {
		klog.FromContext(ctx).Error(err, "Reading the GPU's profile table from NVML; planned devices take the catalog's values, or NVML's of the GPU's last MIG mode", "gpu", g.Index)
		return old
	}
	// NVML may answer NOT_SUPPORTED for every profile of a GPU whose MIG
	// mode is off (nvml.h, nvmlDeviceGetGpuInstanceProfileInfo; driver 580
	// answers anyway, see migOffProfileTable): a table read as MIG mode
	// went off (nvidia-smi, a reset applying a pending disable, SetMIGMode
	// from another goroutine) could say NVML offers nothing, and every
	// layout would be refused from it before MIG mode is turned on to read
	// it again.
	if mode, err := migMode(dev); err != nil || !mode.Current {
		klog.FromContext(ctx).V(1).Info("MIG mode went off while the GPU's profile table was read; the table is read again when MIG mode is on", "gpu", g.Index, "err", err)
		return old
	}
	delete(m.staleProfiles, g.UUID)
	if len(t.mismatches) > 0 {
		klog.FromContext(ctx).Info("NVML's profile table differs from the catalog's", "gpu", g.Index, "model", g.Model.Name, "mismatches", t.mismatches)
	}
	if m.profiles == nil {
		m.profiles = map[string]profileTable{}
	}
	t.model = g.Model.Name
	m.profiles[g.UUID] = t
	m.saveProfileTablesLocked(ctx)
	return t
}

// migOffProfileTable reads the profile table of a GPU whose MIG mode is off
// and that has none yet, so that the catalog's differences from NVML are
// known, and refused layouts refused, before MIG mode is turned on. nvml.h
// lists NOT_SUPPORTED for nvmlDeviceGetGpuInstanceProfileInfo "if device
// doesn't have MIG mode enabled", but driver 580 answers with MIG mode off
// too (recorded on an H200: testdata/nvml-traces). A driver that answers
// NOT_SUPPORTED for every profile gives no table (false), and is not asked
// again while MIG mode is off in this process; nor does a read that fails
// (logged, asked again on the next call). The table is kept, and marked
// stale by the caller: it is read again once MIG mode is on, since nvml.h
// fixes it only for the lifetime of one MIG mode.
func (m *NVMLManager) migOffProfileTable(ctx context.Context, dev nvml.Device, g GPU, memBytes uint64) (profileTable, bool) {
	m.profilesMu.Lock()
	defer m.profilesMu.Unlock()
	if old, ok := m.profiles[g.UUID]; ok && old.model == g.Model.Name {
		return old, true // read by a concurrent call
	}
	if m.noMIGOffTable[g.UUID] {
		return profileTable{}, false
	}
	logger := klog.FromContext(ctx)
	t, err := readProfileTable(dev, g.Model, memBytes)
	if err != nil {
		logger.V(1).Info("Reading the profile table of a GPU whose MIG mode is off; it is read once MIG mode is on", "gpu", g.Index, "err", err)
		return profileTable{}, false
	}
	if t.offersNone(g.Model) {
		logger.V(4).Info("NVML offers no profile while MIG mode is off; the profile table is read once MIG mode is on", "gpu", g.Index)
		if m.noMIGOffTable == nil {
			m.noMIGOffTable = map[string]bool{}
		}
		m.noMIGOffTable[g.UUID] = true
		return profileTable{}, false
	}
	if len(t.mismatches) > 0 {
		logger.Info("NVML's profile table differs from the catalog's", "gpu", g.Index, "model", g.Model.Name, "mismatches", t.mismatches, "migMode", "off")
	}
	if m.profiles == nil {
		m.profiles = map[string]profileTable{}
	}
	t.model = g.Model.Name
	m.profiles[g.UUID] = t
	m.saveProfileTablesLocked(ctx)
	return t, true
}

// offersNone reports whether NVML offered none of model's profiles
// (readProfileTable recorded no placement for each).
func (t profileTable) offersNone(model *mig.Model) bool {
	for _, p := range model.Profiles {
		if pls, ok := t.placements[p.Name]; !ok || len(pls) > 0 {
			return false
		}
	}
	return true
}

// readProfileTable reads each profile of model from NVML
// (nvmlDeviceGetGpuInstanceProfileInfo; a profile the GPU or driver does not
// offer, NOT_SUPPORTED or INVALID_ARGUMENT, is a mismatch with no
// placements): the values of
// those whose memory, multiprocessor or engine counts differ from the
// catalog's, and a mismatch for one NVML reports under another GI profile ID
// (its values are not the catalog profile's, so they are skipped) or whose
// placements (nvmlDeviceGetGpuInstancePossiblePlacements, all of them,
// whatever the GPU holds) differ from the catalog's; and a mismatch for each
// profile NVML offers at an index the catalog does not use (named as
// nvidia-smi names it, from the GPU's memory in bytes): its GIs are listed,
// never created.
func readProfileTable(dev nvml.Device, model *mig.Model, memBytes uint64) (profileTable, error) {
	var t profileTable
	for _, p := range model.Profiles {
		info, ret := dev.GetGpuInstanceProfileInfo(p.NVMLProfile)
		if ret == nvml.ERROR_NOT_SUPPORTED || ret == nvml.ERROR_INVALID_ARGUMENT {
			// Not offered at all: no placement of it (NVML would refuse
			// every create).
			t.mismatches = append(t.mismatches, fmt.Sprintf("%s (NVML profile index %d): NVML does not offer it on this GPU (%s)", p.Name, p.NVMLProfile, ret.Error()))
			if t.placements == nil {
				t.placements = map[string][]mig.Placement{}
			}
			t.placements[p.Name] = []mig.Placement{}
			continue
		}
		if err := nvmlErr("nvmlDeviceGetGpuInstanceProfileInfo", ret); err != nil {
			return profileTable{}, fmt.Errorf("reading GI profile %s: %w", p.Name, err)
		}
		if int(info.Id) != p.ID {
			t.mismatches = append(t.mismatches, fmt.Sprintf("%s (NVML profile index %d): NVML's GI profile ID is %d, the catalog's %d", p.Name, p.NVMLProfile, info.Id, p.ID))
			if t.ids == nil {
				t.ids = map[string]int{}
			}
			t.ids[p.Name] = int(info.Id)
			continue
		}
		v := mig.NVMLProfileValues{Profile: p.Name, MemoryMiB: int64(info.MemorySizeMB),
			Multiprocessors: int(info.MultiprocessorCount), CopyEngines: int(info.CopyEngineCount),
			Decoders: int(info.DecoderCount), Encoders: int(info.EncoderCount), JPEG: int(info.JpegCount), OFA: int(info.OfaCount)}
		if v != p.NVMLValues() {
			t.values = append(t.values, v)
		}
		pls, ret := dev.GetGpuInstancePossiblePlacements(&info)
		if ret == nvml.ERROR_NOT_SUPPORTED {
			continue
		}
		if err := nvmlErr("nvmlDeviceGetGpuInstancePossiblePlacements", ret); err != nil {
			return profileTable{}, fmt.Errorf("reading the placements of GI profile %s: %w", p.Name, err)
		}
		nv := make([]mig.Placement, len(pls))
		for i, pl := range pls {
			nv[i] = mig.Placement{Start: int(pl.Start), Size: int(pl.Size)}
		}
		slices.SortFunc(nv, func(a, b mig.Placement) int { return a.Start - b.Start })
		if !slices.Equal(nv, p.Placements) {
			t.mismatches = append(t.mismatches, fmt.Sprintf("%s placements: NVML offers %s, the catalog %s", p.Name, placementsText(nv), placementsText(p.Placements)))
			if t.placements == nil {
				t.placements = map[string][]mig.Placement{}
			}
			t.placements[p.Name] = nv
		}
	}
	err := forEachGIProfile(dev, profileIndices(model)[len(model.Profiles):], func(pi int, info *nvml.GpuInstanceProfileInfo) error {
		if info == nil || model.ProfileByID(int(info.Id)) != nil {
			return nil // not offered, or a catalog profile NVML also offers at this index
		}
		t.mismatches = append(t.mismatches, fmt.Sprintf("%s (NVML profile index %d, GI profile ID %d): NVML offers a profile the catalog lacks; its GPU instances are listed and destroyed where a layout lacks them, never created",
			derivedProfileName(pi, *info, memBytes), pi, info.Id))
		return nil
	})
	if err != nil {
		return profileTable{}, fmt.Errorf("reading GI profile indices: %w", err)
	}
	return t, nil
}

// placementsText is "start+size" of each placement, e.g. "0+2,2+2,4+2".
func placementsText(pls []mig.Placement) string {
	parts := make([]string, len(pls))
	for i, pl := range pls {
		parts[i] = fmt.Sprintf("%d+%d", pl.Start, pl.Size)
	}
	return strings.Join(parts, ",")
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

// nvlibNames reads a GPU's PCI bus ID, brand and architecture as go-nvlib
// spells them, the strings NVIDIA's DRA driver publishes: the bus ID
// lower-cased with an 8-digit domain of 0000xxxx cut to 4 digits
// ("00000000:B7:00.0" -> "0000:b7:00.0"; a domain above 0xffff, as Intel
// VMD gives, keeps 8), the brand as "Nvidia" or "Tesla", the architecture
// as "Hopper" or "Ada Lovelace". NVML errors wrap *NVMLError (see spelled
// and nvlibErr).
func nvlibNames(dev nvml.Device) (busID, brand, arch string, err error) {
	nd, err := nvlibdevice.New(nil).NewDevice(dev)
	if err != nil {
		return "", "", "", fmt.Errorf("reading the GPU with go-nvlib: %w", err)
	}
	if busID, err = nd.GetPCIBusID(); err != nil {
		return "", "", "", nvlibErr("nvmlDeviceGetPciInfo", err)
	}
	if brand, err = spelled("nvmlDeviceGetBrand", nd.GetBrandAsString, func() nvml.Return { _, r := dev.GetBrand(); return r }); err != nil {
		return "", "", "", err
	}
	if arch, err = spelled("nvmlDeviceGetArchitecture", nd.GetArchitectureAsString, func() nvml.Return { _, r := dev.GetArchitecture(); return r }); err != nil {
		return "", "", "", err
	}
	return busID, brand, arch, nil
}

// spelled is go-nvlib's spelling of a GPU property (spell: its
// GetBrandAsString or GetArchitectureAsString, "Nvidia", "Hopper"). Where
// go-nvlib fails, its error does not keep NVML's return code, so read
// reads the property again: an NVML error is returned as nvmlErr(op)
// wraps it (ERROR_GPU_IS_LOST as ErrGPULost, so that a GPU fallen off the
// bus stays Unreadable); a value read that go-nvlib cannot spell (one
// newer than it) is "Unknown".
func spelled(op string, spell func() (string, error), read func() nvml.Return) (string, error) {
	s, err := spell()
	if err == nil {
		return s, nil
	}
	if err := nvmlErr(op, read()); err != nil {
		return "", err
	}
	return "Unknown", nil
}

// nvlibErr is err, from go-nvlib, as nvmlErr(op) wraps the NVML return
// code go-nvlib wrapped (*NVMLError); an error without one is wrapped as
// it is.
func nvlibErr(op string, err error) error {
	var ret nvml.Return
	if errors.As(err, &ret) {
		return nvmlErr(op, ret)
	}
	return fmt.Errorf("%s: %w", op, err)
}
