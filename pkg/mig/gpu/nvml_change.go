package gpu

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/hashicorp/go-multierror"
	"k8s.io/klog/v2"

	"github.com/miglayout/miglayout/pkg/mig"
)

// CreateMIGDevice creates a GI of profile d.Profile at placement
// {d.Start, MemorySlices} (CreateGpuInstanceWithPlacement) and its full-size
// CI. The GPU must be in the catalog and the placement one the profile
// allows; otherwise nothing is created (NVML is only read: the GPU's
// handle and name, and pending Xids; the error wraps mig.ErrUnknownModel,
// mig.ErrUnknownProfile, or mig.ErrInvalidLayout together with
// ErrInsufficientResources). If the CI cannot be created the GI is destroyed
// again; the error then names both failures when the rollback fails too.
// The Xids pending for the running watches are read first (readXids), so
// that none of a GPU instance gone is put on the one made (WatchXids).
func (m *NVMLManager) CreateMIGDevice(ctx context.Context, gpuIndex int, d mig.Device) (MIGDevice, error) {
	leave, err := m.enter(ctx)
	if err != nil {
		return MIGDevice{}, err
	}
	defer leave()
	m.readXids(ctx)
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
	ciProfs, err := fullCIProfiles(gi, info)
	if err != nil {
		return MIGDevice{}, m.rollback(logger, gi, fmt.Errorf("getting full-size CI profile of GI %d: %w", giInfo.Id, err))
	}
	logger.V(2).Info("Creating compute instance", "giID", giInfo.Id, "ciProfileID", ciProfs[0].Id, "ciSlices", info.SliceCount)
	if _, ret := gi.CreateComputeInstance(&ciProfs[0]); ret != nvml.SUCCESS {
		// Not staleErr: the GPU instance was made and read just now, so
		// ERROR_INVALID_ARGUMENT here is an argument the driver refuses
		// (nvml.h), not a handle gone.
		return MIGDevice{}, m.rollback(logger, gi, fmt.Errorf("creating compute instance in GI %d: %w", giInfo.Id,
			nvmlErr("nvmlGpuInstanceCreateComputeInstance", ret)))
	}
	// Read back as often as another goroutine's read or create reuses
	// the MIG device handles meanwhile (stillMIGDevice).
	out, err := settled(func() (MIGDevice, error) {
		handles, err := migHandles(dev)
		if err != nil {
			return MIGDevice{}, staleMeanwhile(fmt.Errorf("listing MIG devices: %w", err))
		}
		return describe(idx, uuid, gpuInstance{handle: gi, info: giInfo, profile: info, name: p.Name}, handles)
	})
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
// joined with the rollback's own failure if any (rollbackFailure). A
// destroy NVML answers ERROR_INVALID_ARGUMENT or ERROR_NOT_FOUND (the
// handle is stale: another client destroyed the GI, or the create
// reported success without making it) leaves nothing to roll back.
func (m *NVMLManager) rollback(logger klog.Logger, gi nvml.GpuInstance, cause error) error {
	logger.V(2).Info("Rolling back GPU instance after failure", "err", cause.Error())
	ret := gi.Destroy()
	if ret == nvml.ERROR_INVALID_ARGUMENT || ret == nvml.ERROR_NOT_FOUND {
		return fmt.Errorf("%w (the GPU instance is gone already: NVML answers %s to its destroy)", cause, nvml.ErrorString(ret))
	}
	if err := staleErr("nvmlGpuInstanceDestroy", ret); err != nil {
		return &multierror.Error{
			Errors:      []error{cause, rollbackFailure{err: err}},
			ErrorFormat: joinErrors,
		}
	}
	return fmt.Errorf("%w (the GPU instance was destroyed again)", cause)
}

// rollbackFailure is a rollback's failure. It matches the classes of its
// error but ErrInUse, which it reports as ErrNVML: a rollback refused with
// ERROR_IN_USE does not make a compute instance NVML failed to create a
// device in use (the GPU would wait as Blocked for a release that never
// comes). It does not unwrap, so that ReturnCode gives the cause's code.
type rollbackFailure struct{ err error }

func (e rollbackFailure) Error() string {
	return "rolling back the GPU instance failed, it is left without a compute instance: " + e.err.Error()
}

func (e rollbackFailure) Is(target error) bool {
	switch {
	case target == ErrInUse:
		return false
	case errors.Is(e.err, ErrInUse):
		return target == ErrNVML
	}
	return errors.Is(e.err, target)
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
// GI wraps ErrNotFound; no GPU at gpuIndex does not (noSuchGPU: the GPU
// instance is not known to be gone); processes on it wrap ErrInUse (and
// nothing is destroyed). The Xids pending for the running watches are read first and
// the watches held off until it is done (WatchXids, holdXids): it waits for
// a watch's current wait to end, up to a tenth of a second.
func (m *NVMLManager) DestroyMIGDevice(ctx context.Context, gpuIndex int, d mig.Device) error {
	leave, err := m.enter(ctx)
	if err != nil {
		return err
	}
	defer leave()
	defer m.holdXids(ctx, gpuIndex)()
	logger := klog.FromContext(ctx).WithValues("gpu", gpuIndex, "device", d.String())
	if err := m.destroy(ctx, logger, gpuIndex, d); err != nil {
		return fmt.Errorf("destroying MIG device %s on GPU %d: %w", d, gpuIndex, err)
	}
	logger.V(2).Info("Destroyed MIG device")
	return nil
}

// changedMeanwhile is a stale handle met on the way (a GPU instance,
// compute instance or MIG device listed, then gone: someone ran nvidia-smi,
// or a handle went stale): the GPU instance sought may well be there still,
// so it is never ErrNotFound; destroy and the readers (settled) read the
// GPU again. It unwraps to ErrNVML, and ReturnCode reads the NVML code of
// its cause.
type changedMeanwhile struct {
	msg  string
	code *NVMLError
}

// meanwhile is err, a stale handle's error, as a changedMeanwhile.
func meanwhile(err error) changedMeanwhile {
	e := changedMeanwhile{msg: err.Error()}
	var n *NVMLError
	if errors.As(err, &n) {
		e.code = n
	}
	return e
}

func (e changedMeanwhile) Error() string { return e.msg }

func (e changedMeanwhile) Unwrap() error { return ErrNVML }

// cause is the NVML error met, nil where it had no return code.
func (e changedMeanwhile) cause() *NVMLError { return e.code }

// noSuchGPU is a GPU index NVML does not have (ERROR_INVALID_ARGUMENT from
// nvmlDeviceGetHandleByIndex, or a handle gone stale), met where a GPU
// instance of it is sought: never ErrNotFound, which there says the GPU
// instance is gone, destroyed already. It unwraps to ErrNVML, and
// ReturnCode reads the NVML code of its cause.
type noSuchGPU changedMeanwhile

func (e noSuchGPU) Error() string { return e.msg }

func (e noSuchGPU) Unwrap() error { return ErrNVML }

func (e noSuchGPU) cause() *NVMLError { return e.code }

// maxDestroyReads bounds how often destroy reads the GPU again when it
// keeps changing under it.
const maxDestroyReads = 3

// destroy destroys the CIs, then the GI, of device d. Only the GI's absence
// (find) or a stale target GI answers ErrNotFound; a GPU instance, compute
// instance or MIG device gone between its listing and its read makes it
// read the GPU again, up to maxDestroyReads times.
func (m *NVMLManager) destroy(ctx context.Context, logger klog.Logger, idx int, d mig.Device) error {
	var err error
	for range maxDestroyReads {
		err = m.destroyOnce(ctx, logger, idx, d)
		var meanwhile changedMeanwhile
		if !errors.As(err, &meanwhile) {
			return err
		}
		logger.V(2).Info("The GPU's instances changed while the GPU instance was being destroyed; reading the GPU again", "err", err)
	}
	return fmt.Errorf("the GPU's instances kept changing while the GPU instance was destroyed: %w", err)
}

func (m *NVMLManager) destroyOnce(ctx context.Context, logger klog.Logger, idx int, d mig.Device) error {
	s, err := m.walk(ctx, idx)
	if errors.Is(err, ErrNotFound) {
		return noSuchGPU(meanwhile(err))
	}
	if err != nil {
		return err
	}
	g, err := s.find(d)
	if err != nil {
		return err
	}
	procs, err := giProcesses(s.dev, g)
	if errors.Is(err, ErrNotFound) {
		return meanwhile(fmt.Errorf("listing the processes of GI %d: %w", g.info.Id, err))
	}
	if err != nil {
		return err
	}
	if len(procs) > 0 {
		return fmt.Errorf("%w: %d process(es) running on GI %d (PIDs %s)", ErrInUse, len(procs), g.info.Id, pidList(procs))
	}
	// The full-size CI first, then any other CI someone else created: a GI
	// with a CI left cannot be destroyed. A slice count no CI profile
	// index spans (a newer GPU's) has no full-size one to start with.
	first, err := ciProfileIndex(g.profile.SliceCount)
	if err != nil {
		first = -1
	}
	// Then the indices past go-nvml's COMPUTE_INSTANCE_PROFILE_COUNT, up
	// to the driver's last (maxProfileIndex): a newer driver's CI
	// profiles.
	var order []int
	destroyedCIs := 0
	if first >= 0 {
		order = append(order, first)
	}
	for i := 0; i < maxProfileIndex; i++ {
		if i != first {
			order = append(order, i)
		}
	}
	for _, ci := range order {
		prof, ret := g.handle.GetComputeInstanceProfileInfo(ci, nvml.COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED)
		if ret == nvml.ERROR_INVALID_ARGUMENT && ci >= nvml.COMPUTE_INSTANCE_PROFILE_COUNT {
			break // past the driver's last index
		}
		if ret != nvml.SUCCESS {
			if ci == first && ret != nvml.ERROR_NOT_SUPPORTED {
				return fmt.Errorf("getting full-size CI profile of GI %d: %w", g.info.Id, staleErr("nvmlGpuInstanceGetComputeInstanceProfileInfo", ret))
			}
			continue // a CI profile this GI does not offer
		}
		if prof.InstanceCount == 0 {
			continue
		}
		cis, ret := g.handle.GetComputeInstances(&prof)
		if err := staleErr("nvmlGpuInstanceGetComputeInstances", ret); err != nil {
			err = fmt.Errorf("listing compute instances of GI %d: %w", g.info.Id, err)
			if errors.Is(err, ErrNotFound) {
				return meanwhile(err)
			}
			return err
		}
		for _, c := range cis {
			destroyedCIs++ // counted before the call: a destroy may act and fail
			info, ret := c.GetInfo()
			if err := staleErr("nvmlComputeInstanceGetInfo", ret); err != nil {
				err = fmt.Errorf("reading a compute instance of GI %d: %w", g.info.Id, err)
				if errors.Is(err, ErrNotFound) {
					return meanwhile(err)
				}
				return err
			}
			logger.V(2).Info("Destroying compute instance", "giID", g.info.Id, "ciID", info.Id)
			if err := staleErr("nvmlComputeInstanceDestroy", c.Destroy()); err != nil {
				if errors.Is(err, ErrNotFound) {
					// The CI went since it was listed (or its handle is
					// stale): the GI's destroy below tells whether the
					// device is gone, not this.
					logger.V(2).Info("Compute instance already gone", "giID", g.info.Id, "ciID", info.Id, "err", err)
					continue
				}
				return fmt.Errorf("destroying compute instance %d of GI %d: %w", info.Id, g.info.Id, inUseBy(s.dev, g, err))
			}
		}
	}
	logger.V(2).Info("Destroying GPU instance", "giID", g.info.Id)
	if err := staleErr("nvmlGpuInstanceDestroy", g.handle.Destroy()); err != nil {
		err = fmt.Errorf("destroying GPU instance %d: %w", g.info.Id, inUseBy(s.dev, g, err))
		if errors.Is(err, ErrInUse) && destroyedCIs > 0 {
			// Another NVML client holds the GPU instance (a monitoring
			// agent, e.g. DCGM) once its compute instances are gone:
			// without one the device could be neither published nor
			// used, and its GPU instance would hold the GPU's change
			// until the client let go. Its full-size compute instance
			// is made again, and the destroy is retried later.
			err = m.remakeCI(logger, g, err)
		}
		return err
	}
	return nil
}

// remakeCI creates again the full-size compute instance of GPU instance g,
// whose destroy failed with cause after its compute instances were
// destroyed, and returns cause, saying whether the compute instance was
// made again.
func (m *NVMLManager) remakeCI(logger klog.Logger, g gpuInstance, cause error) error {
	ciProfs, err := fullCIProfiles(g.handle, g.profile)
	if err == nil {
		logger.V(2).Info("Creating compute instance again", "giID", g.info.Id, "ciProfileID", ciProfs[0].Id)
		_, ret := g.handle.CreateComputeInstance(&ciProfs[0])
		err = staleErr("nvmlGpuInstanceCreateComputeInstance", ret)
	}
	if err != nil {
		return fmt.Errorf("%w; its full-size compute instance, destroyed first, could not be made again (%v): the GPU instance is rolled back once the client lets go", cause, err)
	}
	return fmt.Errorf("%w; its full-size compute instance, destroyed first, was made again, so the device stays usable", cause)
}

// inUseBy is err, from a destroy of GI g (or of one of its compute
// instances) made once NVML listed no compute process on it, with
// ERROR_IN_USE explained: a process started on it since is named by PID,
// and with none listed now another client holds it (heldByClient); where
// the processes cannot be listed again, that is said. It still wraps
// ErrInUse.
func inUseBy(dev nvml.Device, g gpuInstance, err error) error {
	if !errors.Is(err, ErrInUse) {
		return err
	}
	procs, lerr := giProcesses(dev, g)
	switch {
	case lerr != nil:
		return fmt.Errorf("%w (the processes of GI %d could not be listed again to tell what holds it: %v)", err, g.info.Id, lerr)
	case len(procs) > 0:
		return fmt.Errorf("%w: %d process(es) started on GI %d since its processes were listed (PIDs %s)", err, len(procs), g.info.Id, pidList(procs))
	}
	return heldByClient(err)
}

// pidList is the PIDs of procs, comma-separated.
func pidList(procs []Process) string {
	pids := make([]string, len(procs))
	for i, p := range procs {
		pids[i] = fmt.Sprint(p.PID)
	}
	return strings.Join(pids, ", ")
}

// heldByClient is err, from a destroy made once NVML listed no compute
// process on the GPU instance, with ERROR_IN_USE explained: what holds the
// instance is another client, which no process list shows (a monitoring
// agent such as DCGM or dcgm-exporter keeping a handle, a device file left
// open; NVIDIA/DCGM issues 95 and 276). It still wraps ErrInUse.
func heldByClient(err error) error {
	if !errors.Is(err, ErrInUse) {
		return err
	}
	return fmt.Errorf("%w; no compute process is listed on it, so another NVML client holds it (a monitoring agent such as DCGM or dcgm-exporter, or a device file left open): it is destroyed once that client lets go", err)
}

// giProcesses lists the compute processes on every MIG device (CI) of a GI.
func giProcesses(dev nvml.Device, g gpuInstance) ([]Process, error) {
	handles, err := migHandles(dev)
	if err != nil {
		return nil, err
	}
	return giProcessesOf(handles, g)
}

// giProcessesOf is giProcesses with the GPU's MIG device handles read
// already (migHandles).
func giProcessesOf(handles map[[2]int]nvml.Device, g gpuInstance) ([]Process, error) {
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
		if err := stillMIGDevice(handles[k], k, g); err != nil {
			return nil, fmt.Errorf("listing processes on GI %d CI %d: %w", k[0], k[1], err)
		}
		for _, p := range procs {
			out = append(out, process(p))
		}
	}
	return out, nil
}

// Processes lists the compute processes on MIG device d of GPU gpuIndex
// (GetComputeRunningProcesses on its MIG device handle). A GI without a CI
// has none; no such GI wraps ErrNotFound.
func (m *NVMLManager) Processes(ctx context.Context, gpuIndex int, d mig.Device) ([]Process, error) {
	leave, err := m.enter(ctx)
	if err != nil {
		return nil, err
	}
	defer leave()
	procs, err := settled(func() ([]Process, error) {
		s, err := m.walk(ctx, gpuIndex)
		if err != nil {
			return nil, err
		}
		g, err := s.find(d)
		if err != nil {
			return nil, err
		}
		procs, err := giProcesses(s.dev, g)
		return procs, staleMeanwhile(err)
	})
	if err != nil {
		return nil, fmt.Errorf("listing processes on MIG device %s of GPU %d: %w", d, gpuIndex, err)
	}
	return procs, nil
}

// MIGProcesses lists the compute processes on every MIG device of GPU
// gpuIndex that has any, by device (profile@start), with one walk of the
// GPU's GPU instances and one read of its MIG device handles: what
// Processes gives device by device, for a whole GPU at the cost of one
// device. A GPU with MIG mode off has none. NVML errors wrap *NVMLError.
func (m *NVMLManager) MIGProcesses(ctx context.Context, gpuIndex int) (map[mig.Device][]Process, error) {
	leave, err := m.enter(ctx)
	if err != nil {
		return nil, err
	}
	defer leave()
	out, err := settled(func() (map[mig.Device][]Process, error) { return m.migProcesses(ctx, gpuIndex) })
	if err != nil {
		return nil, fmt.Errorf("listing processes on the MIG devices of GPU %d: %w", gpuIndex, err)
	}
	return out, nil
}

// migProcesses reads the GPU once; an instance gone between its listing
// and its read answers changedMeanwhile (see settled).
func (m *NVMLManager) migProcesses(ctx context.Context, idx int) (map[mig.Device][]Process, error) {
	s, err := m.walk(ctx, idx)
	if err != nil || len(s.gis) == 0 {
		return nil, err
	}
	handles, err := migHandles(s.dev)
	if err != nil {
		return nil, staleMeanwhile(err)
	}
	out := map[mig.Device][]Process{}
	for _, g := range s.gis {
		procs, err := giProcessesOf(handles, g)
		if err != nil {
			return nil, staleMeanwhile(fmt.Errorf("GPU instance %s (GI %d): %w", g.device(), g.info.Id, err))
		}
		if len(procs) > 0 {
			out[g.device()] = procs
		}
	}
	return out, nil
}

// GPUProcesses lists the compute processes on GPU gpuIndex
// (GetComputeRunningProcesses on the GPU's handle). NVML errors wrap
// *NVMLError; an index NVML does not know wraps ErrNotFound.
func (m *NVMLManager) GPUProcesses(ctx context.Context, gpuIndex int) ([]Process, error) {
	leave, err := m.enter(ctx)
	if err != nil {
		return nil, err
	}
	defer leave()
	dev, err := m.device(gpuIndex)
	if err != nil {
		return nil, fmt.Errorf("listing processes on GPU %d: %w", gpuIndex, err)
	}
	procs, ret := dev.GetComputeRunningProcesses()
	if err := nvmlErr("nvmlDeviceGetComputeRunningProcesses", ret); err != nil {
		return nil, fmt.Errorf("listing processes on GPU %d: %w", gpuIndex, err)
	}
	out := make([]Process, 0, len(procs))
	for _, p := range procs {
		out = append(out, process(p))
	}
	return out, nil
}

// SetMIGMode enables or disables MIG mode and returns the mode NVML reports
// afterwards; Pending differs from Current while a GPU reset is needed. A
// call NVML fails (nvmlDeviceSetMigMode's return code) is an error of that
// code. A call that succeeds while its activation status fails, leaving the
// mode asked for not even pending, is an error of the activation status
// (ERROR_IN_USE: ErrInUse, a client holds the GPU); with a failed activation
// and the mode pending, RebootRequired tells ERROR_RESET_REQUIRED. Where both
// succeed the returned mode is what NVML reports, and no error: the caller
// compares it with the mode it asked for.
func (m *NVMLManager) SetMIGMode(ctx context.Context, gpuIndex int, enabled bool) (MIGMode, error) {
	leave, err := m.enter(ctx)
	if err != nil {
		return MIGMode{}, err
	}
	defer leave()
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
	uuid, uuidRet := dev.GetUUID()
	logger.V(2).Info("Setting MIG mode")
	activation, ret := dev.SetMigMode(mode)
	if err := nvmlErr("nvmlDeviceSetMigMode", ret); err != nil {
		return fail(err)
	}
	if uuidRet == nvml.SUCCESS {
		// A mode change, even one left pending, may end the MIG mode
		// the GPU's profile table was read in, before any GPUs call
		// sees it off.
		m.markProfileTableStale(uuid)
		// The change may unbind or reset the GPU, and its attributes
		// change (nvml.h, nvmlDeviceSetMigMode: "The caller of this API
		// is expected to query such attributes again"): the mode is read
		// through a handle got again, by index (PCI order, which the
		// change keeps; by UUID NVML answers GPU_IS_LOST while any GPU of
		// the node is off the bus), where it is the same GPU's.
		if again, err := m.device(gpuIndex); err == nil {
			if u, ret := again.GetUUID(); ret == nvml.SUCCESS && u == uuid {
				dev = again
			}
		}
	}
	got, err := migMode(dev)
	if err != nil {
		return fail(err)
	}
	// The call succeeds while the activation fails (nvml.h: "if device
	// unbind fails because the device isn't idle, NVML_ERROR_IN_USE"):
	// where the mode asked for is then not even pending, nothing changed
	// and the activation status is the error.
	if activation != nvml.SUCCESS && got.Pending != enabled {
		return fail(modeHeldBy(dev, nvmlErr("nvmlDeviceSetMigMode (activation status)", activation)))
	}
	if activation != nvml.SUCCESS {
		got.RebootRequired = activation == nvml.ERROR_RESET_REQUIRED && got.Pending != got.Current
		logger.V(2).Info("MIG mode change is pending", "activationStatus", activation.Error(), "current", got.Current, "pending", got.Pending)
	} else {
		logger.V(2).Info("Set MIG mode", "current", got.Current, "pending", got.Pending)
	}
	return got, nil
}

// modeHeldBy is err, a MIG mode change refused as in use with nothing
// left pending (Hopper and later change the mode at once or not at all),
// with what holds the GPU: the compute processes NVML lists on it by PID,
// or, with none listed, another NVML client (heldByClient's, which no
// process list shows). nvml.h asks the caller to idle the GPU and set the
// mode again, which the agent's retries do. It still wraps ErrInUse.
func modeHeldBy(dev nvml.Device, err error) error {
	if !errors.Is(err, ErrInUse) {
		return err
	}
	procs, ret := dev.GetComputeRunningProcesses()
	switch {
	case ret != nvml.SUCCESS:
		return fmt.Errorf("%w (the GPU's processes could not be listed to tell what holds it: %v)", err, nvmlErr("nvmlDeviceGetComputeRunningProcesses", ret))
	case len(procs) > 0:
		ps := make([]Process, len(procs))
		for i, p := range procs {
			ps[i] = process(p)
		}
		return fmt.Errorf("%w: %d process(es) run on the GPU (PIDs %s); the mode is set again once they end", err, len(procs), pidList(ps))
	}
	return fmt.Errorf("%w; no compute process is listed on the GPU, so another NVML client holds it (a monitoring agent such as DCGM or dcgm-exporter, or a device file left open): the mode is set again once that client lets go", err)
}

// process is p as a Process: its used memory in MiB, -1 where NVML cannot
// tell it (usedGpuMemory NVML_VALUE_NOT_AVAILABLE, all bits set).
func process(p nvml.ProcessInfo) Process {
	used := int64(-1)
	if p.UsedGpuMemory != ^uint64(0) {
		used = int64(p.UsedGpuMemory >> 20)
	}
	return Process{PID: p.Pid, UsedMemoryMiB: used}
}
