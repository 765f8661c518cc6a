package gpu

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	nvlibdevice "github.com/NVIDIA/go-nvlib/pkg/nvlib/device"
	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"k8s.io/klog/v2"

	"github.com/miglayout/miglayout/pkg/mig"
)

// gpuInstance is one GI found on a GPU with what describing it needs.
type gpuInstance struct {
	handle  nvml.GpuInstance
	info    nvml.GpuInstanceInfo
	profile nvml.GpuInstanceProfileInfo
	name    string // catalog profile name, or derived where the catalog lacks the GPU or the profile
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

// walk reads the GPU's GIs: for each NVML_GPU_INSTANCE_PROFILE_* index NVML
// accepts (profileIndices) GetGpuInstanceProfileInfo, then GetGpuInstances
// and each GI's info. A GI is named after the catalog profile of its GI
// profile ID, or as nvidia-smi names it (derivedProfileName) where the
// catalog lacks the GPU or the profile: a GI of a profile the catalog lacks
// (made with nvidia-smi, or a newer driver's) still holds its memory
// slices, so it is listed, to be destroyed where a layout lacks it rather
// than overlapped blindly. A GPU with MIG mode off (or without MIG) has none.
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

	seen := map[uint32]bool{}
	logger := klog.FromContext(ctx)
	err = forEachGIProfile(dev, profileIndices(s.model), func(pi int, info *nvml.GpuInstanceProfileInfo) error {
		if info == nil {
			// The GPU (or this driver) does not offer the profile, so it
			// has no GI of it.
			logger.V(5).Info("GPU does not offer GI profile", "gpu", idx, "nvmlProfile", pi)
			return nil
		}
		if seen[info.Id] || info.InstanceCount == 0 {
			return nil
		}
		seen[info.Id] = true
		handles, ret := dev.GetGpuInstances(info)
		if err := nvmlErr("nvmlDeviceGetGpuInstances", ret); err != nil {
			return fmt.Errorf("listing GPU instances of GI profile %d: %w", info.Id, err)
		}
		for _, h := range handles {
			gi, ret := h.GetInfo()
			if err := staleErr("nvmlGpuInstanceGetInfo", ret); err != nil {
				err = fmt.Errorf("reading a GPU instance of GI profile %d: %w", info.Id, err)
				if errors.Is(err, ErrNotFound) {
					// Listed, then gone (destroyed by someone else):
					// which GI it was is unknown, so the walk answers
					// nothing of the GPU's instances (no ErrNotFound: a
					// destroy reads the GPU again rather than take its
					// target for gone).
					return meanwhile(err)
				}
				return err
			}
			name := ""
			if s.model != nil {
				if p := s.model.ProfileByID(int(gi.ProfileId)); p != nil {
					name = p.Name
				}
			}
			if name == "" {
				name = derivedProfileName(pi, *info, s.memBytes)
			}
			s.gis = append(s.gis, gpuInstance{handle: h, info: gi, profile: *info, name: name})
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(s.gis, func(a, b gpuInstance) int {
		if a.info.Placement.Start != b.info.Placement.Start {
			return int(a.info.Placement.Start) - int(b.info.Placement.Start)
		}
		return strings.Compare(a.name, b.name)
	})
	return s, nil
}

// profileIndices are the NVML_GPU_INSTANCE_PROFILE_* indices to read GIs
// of: the catalog model's profiles first (nil model: none), then every
// other index NVML defines.
func profileIndices(model *mig.Model) []int {
	var out []int
	if model != nil {
		for _, p := range model.Profiles {
			out = append(out, p.NVMLProfile)
		}
	}
	for i := 0; i < nvml.GPU_INSTANCE_PROFILE_COUNT; i++ {
		if !slices.Contains(out, i) {
			out = append(out, i)
		}
	}
	return out
}

// maxProfileIndex bounds the GI and CI profile indices read past go-nvml's
// GPU_INSTANCE_PROFILE_COUNT and COMPUTE_INSTANCE_PROFILE_COUNT (18 and 9
// in go-nvml v0.13): a driver newer than go-nvml's nvml.h may offer
// profiles at later indices, and nvml.h has them enumerated "in a forward
// compatible way by invoking it on profile values starting from 0, until
// the API returns NVML_ERROR_INVALID_ARGUMENT"
// (nvmlDeviceGetGpuInstanceProfileInfo,
// nvmlGpuInstanceGetComputeInstanceProfileInfo).
const maxProfileIndex = 64

// forEachGIProfile calls fn with each GI profile index of indices and what
// profileInfo reads of it, then with each index from go-nvml's
// GPU_INSTANCE_PROFILE_COUNT on (up to maxProfileIndex) until the driver
// answers ERROR_INVALID_ARGUMENT, so that a newer driver's profiles are
// seen: a GI of one that the walk left out would hold memory slices the
// agent takes for free. fn's error ends the walk.
func forEachGIProfile(dev nvml.Device, indices []int, fn func(pi int, info *nvml.GpuInstanceProfileInfo) error) error {
	for _, pi := range indices {
		info, _, err := readGIProfile(dev, pi)
		if err != nil {
			return err
		}
		if err := fn(pi, info); err != nil {
			return err
		}
	}
	for pi := nvml.GPU_INSTANCE_PROFILE_COUNT; pi < maxProfileIndex; pi++ {
		if slices.Contains(indices, pi) {
			continue
		}
		info, past, err := readGIProfile(dev, pi)
		if err != nil || past {
			return err // past: the driver's last index is behind
		}
		if err := fn(pi, info); err != nil {
			return err
		}
	}
	return nil
}

// readGIProfile reads GI profile index pi
// (nvmlDeviceGetGpuInstanceProfileInfo); nil where the GPU or driver does
// not offer it (NOT_SUPPORTED; INVALID_ARGUMENT, which a driver older than
// the index answers, and past says so). Any other error fails: a GI of the
// profile may exist, and a walk that left it out would let its devices be
// withdrawn and its memory slices be taken for free.
func readGIProfile(dev nvml.Device, pi int) (info *nvml.GpuInstanceProfileInfo, past bool, err error) {
	got, ret := dev.GetGpuInstanceProfileInfo(pi)
	switch ret {
	case nvml.ERROR_INVALID_ARGUMENT:
		return nil, true, nil
	case nvml.ERROR_NOT_SUPPORTED:
		return nil, false, nil
	}
	if err := nvmlErr("nvmlDeviceGetGpuInstanceProfileInfo", ret); err != nil {
		return nil, false, fmt.Errorf("getting GI profile info %d: %w", pi, err)
	}
	return &got, false, nil
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

// derivedProfileName names a GI profile that the catalog lacks as
// nvidia-smi does, with go-nvlib's MIG profile naming
// (nvlib/device.NewMigProfile for the GI's full-size compute instance):
// "<slices>g.<GB>gb", GB being the profile's share of the GPU's memory
// (totalBytes, in bytes) rounded up to eighths times the GPU's GB, with
// "+me", "-me", "+me.all" or "+gfx" from the NVML profile index. An index
// go-nvlib does not name is named as the plain profile of its slice count
// with the suffix nvidia-smi gives it (nvlibLacks: 3_SLICE_GFX is
// "+gfx"), or none for an index newer than both.
func derivedProfileName(nvmlProfile int, info nvml.GpuInstanceProfileInfo, totalBytes uint64) string {
	lib := nvlibdevice.New(nil)
	name := func(idx int) (string, bool) {
		ci, err := ciProfileIndex(info.SliceCount)
		if err != nil || totalBytes == 0 {
			return "", false
		}
		p, err := lib.NewMigProfile(idx, ci, nvml.COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED, info.MemorySizeMB, totalBytes)
		if err != nil {
			return "", false
		}
		return p.String(), true
	}
	if n, ok := name(nvmlProfile); ok {
		return n
	}
	suffix := nvlibLacks[nvmlProfile]
	if base, ok := giSliceIndex[info.SliceCount]; ok {
		if n, ok := name(base); ok {
			return n + suffix
		}
	}
	return fmt.Sprintf("%dg.%dgb%s", info.SliceCount, uint64(math.Round(float64(info.MemorySizeMB)/1024)), suffix)
}

// nvlibLacks are the suffixes nvidia-smi gives the NVML profile indices
// go-nvlib's MIG profile naming does not know.
var nvlibLacks = map[int]string{nvml.GPU_INSTANCE_PROFILE_3_SLICE_GFX: "+gfx"}

// giSliceIndex is the NVML_GPU_INSTANCE_PROFILE_<N>_SLICE index of the plain
// profile of N compute slices.
var giSliceIndex = map[uint32]int{
	1: nvml.GPU_INSTANCE_PROFILE_1_SLICE, 2: nvml.GPU_INSTANCE_PROFILE_2_SLICE, 3: nvml.GPU_INSTANCE_PROFILE_3_SLICE,
	4: nvml.GPU_INSTANCE_PROFILE_4_SLICE, 6: nvml.GPU_INSTANCE_PROFILE_6_SLICE, 7: nvml.GPU_INSTANCE_PROFILE_7_SLICE,
	8: nvml.GPU_INSTANCE_PROFILE_8_SLICE,
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

// fullCIExtras are the NVML_COMPUTE_INSTANCE_PROFILE_* indices beside the
// plain <N>_SLICE one (ciProfileIndex) that may also span all N compute
// slices of a GI: 1_SLICE_REV1 in a 1-slice GI (a 1g.20gb-class GI of
// Hopper and newer, GI profile 1_SLICE_REV2, offers it with all the GI's
// multiprocessors, where its 1_SLICE CI has a plain 1g's: 16 of the H100
// 1g.20gb's 26; nvidia-smi mig -cgi 15 -C makes the REV1 one), and
// 7_SLICE_NVL in a 7-slice GI (R580 drivers on A100).
var fullCIExtras = map[uint32][]int{
	1: {nvml.COMPUTE_INSTANCE_PROFILE_1_SLICE_REV1},
	7: {nvml.COMPUTE_INSTANCE_PROFILE_7_SLICE_NVL},
}

// fullCIProfiles returns the profiles (engine profile SHARED) of the CIs
// that span all compute slices of a GI of profile giProf: the plain
// <N>_SLICE one and those of fullCIExtras that NVML offers in this GI with
// N slices. The first is the one to create: the first whose
// multiprocessors are all the GI's, the plain one before the others (on
// A100, whose 1g.20gb GI has a 1g's multiprocessors, the plain one), else
// the plain one. An extra NVML does not offer (NOT_SUPPORTED, or
// INVALID_ARGUMENT from a driver older than the index) is left out; the
// plain one's errors come back (staleErr; NOT_SUPPORTED with ERROR_NOT_SUPPORTED's
// code, or ErrNotSupported without a code where no <N>_SLICE index spans
// the GI's slice count), unless an extra is offered.
func fullCIProfiles(gi nvml.GpuInstance, giProf nvml.GpuInstanceProfileInfo) ([]nvml.ComputeInstanceProfileInfo, error) {
	var out []nvml.ComputeInstanceProfileInfo
	// A slice count no <N>_SLICE index spans (a newer GPU's) has no plain
	// profile: ErrNotSupported, as where NVML does not offer it.
	idx, plainErr := ciProfileIndex(giProf.SliceCount)
	if plainErr == nil {
		plain, ret := gi.GetComputeInstanceProfileInfo(idx, nvml.COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED)
		plainErr = staleErr("nvmlGpuInstanceGetComputeInstanceProfileInfo", ret)
		switch {
		case plainErr == nil:
			out = append(out, plain)
		case ret != nvml.ERROR_NOT_SUPPORTED:
			return nil, plainErr
		}
	}
	for _, extra := range fullCIExtras[giProf.SliceCount] {
		info, ret := gi.GetComputeInstanceProfileInfo(extra, nvml.COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED)
		if ret == nvml.ERROR_NOT_SUPPORTED || ret == nvml.ERROR_INVALID_ARGUMENT {
			continue
		}
		if err := staleErr("nvmlGpuInstanceGetComputeInstanceProfileInfo", ret); err != nil {
			return nil, err
		}
		if info.SliceCount == giProf.SliceCount {
			out = append(out, info)
		}
	}
	if len(out) == 0 {
		return nil, plainErr
	}
	if i := slices.IndexFunc(out, func(c nvml.ComputeInstanceProfileInfo) bool {
		return c.MultiprocessorCount == giProf.MultiprocessorCount
	}); i > 0 {
		out[0], out[i] = out[i], out[0]
	}
	return out, nil
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
	ciProfs, err := fullCIProfiles(g.handle, g.profile)
	if errors.Is(err, ErrNotSupported) {
		// The GI offers no full-size CI profile (a profile a newer
		// driver numbers otherwise, or a slice count no CI profile
		// index spans): it has no full-size compute instance, as a GI
		// split into smaller ones, instead of the GPU's whole walk
		// failing on it.
		return d, nil
	}
	if err != nil {
		return d, fmt.Errorf("getting full-size CI profile: %w", err)
	}
	// Any CI spanning the GI is its full-size one, whichever profile made
	// it (this manager, or nvidia-smi and other tools choosing another).
	var ci nvml.ComputeInstanceInfo
	var ciProf *nvml.ComputeInstanceProfileInfo
	for i := range ciProfs {
		if ciProfs[i].InstanceCount == 0 {
			continue
		}
		cis, ret := g.handle.GetComputeInstances(&ciProfs[i])
		if err := staleErr("nvmlGpuInstanceGetComputeInstances", ret); err != nil {
			return d, fmt.Errorf("listing compute instances: %w", err)
		}
		if len(cis) == 0 {
			continue
		}
		if ci, ret = cis[0].GetInfo(); ret != nvml.SUCCESS {
			return d, fmt.Errorf("reading compute instance: %w", staleErr("nvmlComputeInstanceGetInfo", ret))
		}
		ciProf = &ciProfs[i]
		break
	}
	if ciProf == nil {
		return d, nil
	}
	// The device keeps the GI profile's values, as the planner plans
	// them (slices.PlannedMIGDevice), also where the CI has fewer
	// multiprocessors (a 1_SLICE CI in an H100 1g.20gb GI, which an
	// older agent made): published with the CI's, such a device would
	// be planned as serving a pod kube-scheduler never gives it.
	d.CIID = int(ci.Id)
	key := [2]int{d.GIID, d.CIID}
	if h, ok := handles[key]; ok {
		uuid, ret := h.GetUUID()
		if err := staleErr("nvmlDeviceGetUUID", ret); err != nil {
			return d, fmt.Errorf("getting MIG device UUID: %w", err)
		}
		if err := stillMIGDevice(h, key, g); err != nil {
			return d, fmt.Errorf("getting MIG device UUID: %w", err)
		}
		d.UUID = uuid
	}
	return d, nil
}

// stillMIGDevice checks, after a read through MIG device handle h, listed
// by migHandles as that of GI key[0], CI key[1] of GPU instance g (as the
// walk read it), that h names that MIG device still. nvml.h lets a handle
// be reused for another MIG device once the process asks for the handle of
// its index again (nvmlDeviceGetMigDeviceHandleByIndex: "Handles may be
// reused and their properties can change in the process"), as this manager
// does on every read and create of another goroutine: what the read
// returned may then be another MIG device's (its UUID, its processes). A
// handle that names other IDs now is changedMeanwhile; so is g's handle
// gone stale or describing another GPU instance (g destroyed, and another
// made, maybe with its ID: a GI ID follows from the placement, so a
// 1g.20gb@0 takes the ID of the 2g.20gb@0 it replaces), and so is a handle
// gone stale (ErrNotFound): the GPU is read again (settled). Another error
// of these reads is returned as it is. A GPU instance destroyed and made
// again as it was (profile, placement, ID) whose handle NVML hands back
// as it was, between the read and this check, is not seen.
func stillMIGDevice(h nvml.Device, key [2]int, g gpuInstance) error {
	gi, ret := h.GetGpuInstanceId()
	if err := staleErr("nvmlDeviceGetGpuInstanceId", ret); err != nil {
		return staleMeanwhile(err)
	}
	ci, ret := h.GetComputeInstanceId()
	if err := staleErr("nvmlDeviceGetComputeInstanceId", ret); err != nil {
		return staleMeanwhile(err)
	}
	if gi != key[0] || ci != key[1] {
		return changedMeanwhile{msg: fmt.Sprintf("the MIG device handle of GI %d CI %d names GI %d CI %d now (NVML reused it)", key[0], key[1], gi, ci)}
	}
	info, ret := g.handle.GetInfo()
	if err := staleErr("nvmlGpuInstanceGetInfo", ret); err != nil {
		return staleMeanwhile(err)
	}
	if info.Id != g.info.Id || info.ProfileId != g.info.ProfileId || info.Placement != g.info.Placement {
		return changedMeanwhile{msg: fmt.Sprintf("GI %d (profile %d at %d) is GI %d (profile %d at %d) now", g.info.Id, g.info.ProfileId, g.info.Placement.Start,
			info.Id, info.ProfileId, info.Placement.Start)}
	}
	return nil
}

// MIGDevices lists the GIs of GPU gpuIndex with their full-size CIs, ordered
// by placement start. A GI without a full-size CI has CIID -1 and no UUID.
func (m *NVMLManager) MIGDevices(ctx context.Context, gpuIndex int) ([]MIGDevice, error) {
	leave, err := m.enter(ctx)
	if err != nil {
		return nil, err
	}
	defer leave()
	out, err := settled(func() ([]MIGDevice, error) { return m.migDevices(ctx, gpuIndex) })
	if err != nil {
		return nil, fmt.Errorf("listing MIG devices of GPU %d: %w", gpuIndex, err)
	}
	return out, nil
}

// migDevices reads the GPU once; an instance gone between its listing and
// its read answers changedMeanwhile (see settled).
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
		return nil, staleMeanwhile(err)
	}
	out := make([]MIGDevice, 0, len(s.gis))
	for _, g := range s.gis {
		d, err := describe(idx, uuid, g, handles)
		if err != nil {
			return nil, staleMeanwhile(fmt.Errorf("GPU instance %s (GI %d): %w", g.device(), g.info.Id, err))
		}
		out = append(out, d)
	}
	return out, nil
}

// settled runs read, one read of a GPU's instances, again (up to
// maxDestroyReads times in all) while it answers changedMeanwhile: an
// instance or MIG device handle went stale during the read because someone
// else changed the GPU (nvidia-smi). The last error is returned as it is.
func settled[T any](read func() (T, error)) (T, error) {
	var (
		v   T
		err error
	)
	for range maxDestroyReads {
		if v, err = read(); err == nil {
			return v, nil
		}
		var changed changedMeanwhile
		if !errors.As(err, &changed) {
			return v, err
		}
	}
	return v, err
}

// staleMeanwhile is err as a changedMeanwhile where it is a stale handle's
// (ErrNotFound) met after the walk: an instance listed, then gone. Within
// a read that walked the GPU already, it means the GPU changed, not that
// what was asked for is absent.
func staleMeanwhile(err error) error {
	if errors.Is(err, ErrNotFound) {
		return meanwhile(err)
	}
	return err
}
