// Package nvmlsim is a stateful simulator of NVML for MIG repartitioning. A
// *Sim implements go-nvml's nvml.Interface (github.com/NVIDIA/go-nvml/pkg/nvml)
// over simulated GPUs whose geometry (profiles, GI profile IDs, placements,
// instance counts, compute slices, memory) comes from the mig catalog, and it
// refuses what real NVML refuses, with the same return codes:
//
//   - every MIG operation on a GPU whose current MIG mode is off:
//     ERROR_NOT_SUPPORTED;
//   - a GPU instance at a placement the profile does not list:
//     ERROR_INVALID_ARGUMENT; overlapping another GI, beyond the profile's
//     MaxCount, the GPU's compute slices, its media engines (two
//     media-extension GIs on an A30) or the model's MaxInstances:
//     ERROR_INSUFFICIENT_RESOURCES;
//   - a compute instance where no placement of its profile is free, or
//     beyond its InstanceCount: ERROR_INSUFFICIENT_RESOURCES;
//   - destroying a GI that has a CI or a process, a CI that has a process, or
//     disabling MIG mode while GIs exist: ERROR_IN_USE;
//   - destroying a GI or CI, or resetting the GPU, while another client
//     holds it without a compute process (OpenClient: a monitoring agent, a
//     device file left open; no process list shows it): ERROR_IN_USE;
//   - changing MIG mode while a process or client holds the GPU: on models with
//     MIGModeNeedsReset (Ampere) the change stays pending until ResetGPU and
//     the activation status is ERROR_IN_USE; on Hopper and newer nothing
//     changes and the activation status is ERROR_IN_USE (the call itself
//     returns SUCCESS, see SetMigMode);
//   - a handle to a destroyed GI, CI or MIG device: ERROR_INVALID_ARGUMENT;
//   - any call before Init or after the last Shutdown: ERROR_UNINITIALIZED.
//
// Methods the simulator does not implement are those of go-nvml's generated
// mocks (mock.Interface, mock.Device, mock.GpuInstance, mock.ComputeInstance)
// with no function set: calling one panics, naming the method.
//
// Compute instances: the full-size one miglayout creates
// (NVML_COMPUTE_INSTANCE_PROFILE_<N>_SLICE for an Ng GI; in a 1g GI with
// more multiprocessors than a plain 1g, such as Hopper's 1g.20gb, also
// 1_SLICE_REV1 with all of them, 1_SLICE having a plain 1g's; see rev1GI) and the smaller ones
// an administrator may make with nvidia-smi (1c.3g.40gb and the like, see
// ciShapeOf), several per GI where their placements and InstanceCount allow.
// The versioned getters (GetGpuInstanceProfileInfoV and the like) return
// go-nvml handler structs bound to the real library and are left to the
// mocks, as are the CI placement calls miglayout does not make.
//
// IDs: a new GI gets a GI ID real NVML gives its placement (0 for the whole
// GPU, then its halves, quarters and eighths, numbered from either half of
// the GPU: giID), a new CI
// the smallest free CI ID >= 0 in its GI, a new CI a new MIG UUID. MIG devices
// (GIs with a CI) are indexed in order of GI ID, as real NVML numbers them.
//
// State lives in memory or, with Config.StatePath, in a JSON file that several
// processes share (each call takes an flock on StatePath+".lock", reads the
// file, decoding it again only where it changed, and writes back atomically
// what it changes), so that a test's stand-in kubelet can
// start processes on the MIG devices an agent in another process created.
// Handles name hardware by stable keys (GPU index, GI ID, CI ID and a serial
// number), so they stay valid across processes and go stale when the instance
// they name is destroyed.
//
// Units: NVML reports memory in bytes (GetMemoryInfo, ProcessInfo) except
// nvmlGpuInstanceProfileInfo_t.memorySizeMB, which is MiB; the simulator's own
// API and State use MiB throughout.
package nvmlsim

import (
	"fmt"
	"log"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"

	"github.com/miglayout/miglayout/pkg/mig"
)

// Versions the simulated driver reports.
const (
	// DriverVersion is what SystemGetDriverVersion returns.
	DriverVersion = "580.95.05"
	// CUDADriverVersion is what SystemGetCudaDriverVersion returns (13.0).
	CUDADriverVersion = 13000
	// DriverGIProfileCount is the driver's NVML_GPU_INSTANCE_PROFILE_COUNT:
	// GetGpuInstanceProfileInfo answers ERROR_INVALID_ARGUMENT from this
	// index on. Driver 580.159.04 does so from 17
	// (GPU_INSTANCE_PROFILE_3_SLICE_GFX in go-nvml v0.13's nvml.h, whose
	// GPU_INSTANCE_PROFILE_COUNT is 18), as recorded on an H200
	// (testdata/nvml-traces of package gpu).
	DriverGIProfileCount = 17
)

// Config configures New.
type Config struct {
	// Spec is the hardware, e.g. "4xA100-SXM4-80GB" or
	// "2xH100-SXM5-80GB,1xA30-24GB" (see ParseSpec).
	Spec string
	// StatePath is the JSON state file shared by processes ("" = in memory
	// only). Its directory must exist.
	StatePath string
	// Latency is added to every mutating operation (SetMigMode,
	// CreateGpuInstance[WithPlacement], CreateComputeInstance,
	// GpuInstance.Destroy, ComputeInstance.Destroy, ResetGPU); default 0.
	Latency time.Duration
	// Catalog resolves Spec's model names; nil = mig.DefaultCatalog().
	Catalog *mig.Catalog
	// Seed is mixed into every UUID, so that simulators with the same Spec
	// (one per simulated node, say; use the node name) get distinct UUIDs.
	// Optional; a state file keeps the seed it was created with.
	Seed string
	// NoGPUReset models GPUs the driver cannot reset itself, as with a GPU
	// passed through to a virtual machine (nvml.h, nvmlDeviceSetMigMode:
	// "VM reboot is required"): a MIG mode change on a model that needs a
	// reset (MigModeNeedsReset) stays pending even with nothing on the GPU,
	// with activation status ERROR_RESET_REQUIRED, until ResetGPU (the
	// reboot).
	NoGPUReset bool
}

// Sim is a simulated NVML. It implements nvml.Interface and is safe for
// concurrent use.
type Sim struct {
	*mock.Interface

	path       string
	latency    time.Duration
	noGPUReset bool
	// sleep waits latency (time.Sleep; tests record the waits instead).
	sleep func(time.Duration)

	initMu   sync.Mutex
	refcount int

	mu sync.Mutex // serialises state access within the process, and slots
	// slots are this process's MIG device handle slots, by GPU index and
	// MIG device index (see device).
	slots map[[2]int]migSlot
	mem   *fileState // the state when path == ""
	// read is the state file as last read or written by this Sim, readData
	// its bytes (update).
	read     *fileState
	readData []byte

	devMock *mock.Device
	giMock  *mock.GpuInstance
	ciMock  *mock.ComputeInstance
}

var _ nvml.Interface = (*Sim)(nil)

func newSim(path string, latency time.Duration) *Sim {
	return &Sim{
		Interface: &mock.Interface{},
		path:      path,
		latency:   latency,
		sleep:     time.Sleep,
		devMock:   &mock.Device{},
		giMock:    &mock.GpuInstance{},
		ciMock:    &mock.ComputeInstance{},
	}
}

// New returns a simulator of the hardware in cfg.Spec. With cfg.StatePath set
// it loads that file if it exists (its GPUs must be cfg.Spec's, in order,
// else an error) and otherwise creates it. All GPUs start with MIG mode off
// and no process.
func New(cfg Config) (*Sim, error) {
	models, err := ParseSpec(cfg.Spec, cfg.Catalog)
	if err != nil {
		return nil, fmt.Errorf("creating simulator: %w", err)
	}
	fresh := newFileState(cfg.Seed, models)
	s := newSim(cfg.StatePath, cfg.Latency)
	s.noGPUReset = cfg.NoGPUReset
	if cfg.StatePath == "" {
		s.mem = fresh
		return s, nil
	}
	unlock, err := lockFile(cfg.StatePath + ".lock")
	if err != nil {
		return nil, fmt.Errorf("creating simulator: %w", err)
	}
	defer unlock()
	exists, err := stateFileExists(cfg.StatePath)
	if err != nil {
		return nil, fmt.Errorf("creating simulator: %w", err)
	}
	if !exists {
		if _, err := writeStateFile(cfg.StatePath, fresh); err != nil {
			return nil, fmt.Errorf("creating simulator: %w", err)
		}
		return s, nil
	}
	st, err := readStateFile(cfg.StatePath)
	if err != nil {
		return nil, fmt.Errorf("creating simulator: %w", err)
	}
	if got, want := gpuModels(st), gpuModels(fresh); got != want {
		return nil, fmt.Errorf("creating simulator: state file %s holds GPUs [%s], spec %q says [%s]", cfg.StatePath, got, cfg.Spec, want)
	}
	return s, nil
}

func gpuModels(st *fileState) string {
	names := make([]string, len(st.GPUs))
	for i, g := range st.GPUs {
		names[i] = g.Model
	}
	return strings.Join(names, " ")
}

// OpenState opens an existing state file without a spec, for other processes
// (a test's stand-in kubelet, say) that act on the same simulated hardware.
func OpenState(path string) (*Sim, error) {
	if path == "" {
		return nil, fmt.Errorf("opening state: empty path")
	}
	s := newSim(path, 0)
	if err := s.update(func(*fileState) (bool, error) { return false, nil }); err != nil {
		return nil, fmt.Errorf("opening state: %w", err)
	}
	return s, nil
}

// Snapshot returns the current state (a copy). It panics if the state file
// cannot be read: it is meant for assertions and debugging.
func (s *Sim) Snapshot() State {
	var out State
	err := s.update(func(st *fileState) (bool, error) {
		out = st.State
		return false, nil
	})
	if err != nil {
		panic(fmt.Sprintf("nvmlsim: taking snapshot: %v", err))
	}
	return out
}

// do runs one NVML operation: it returns ERROR_UNINITIALIZED before Init,
// sleeps the configured latency for mutating operations, and then, under the
// state lock, counts the call against the faults injected for op. A
// triggered fault's code is returned without running fn; a triggered Lie
// runs fn with lie set, and fn must then report success and change nothing.
// A state I/O error is logged and returned as ERROR_UNKNOWN.
func (s *Sim) do(op string, mutating bool, fn func(st *fileState, lie bool) (changed bool, ret nvml.Return)) nvml.Return {
	s.initMu.Lock()
	initialized := s.refcount > 0
	s.initMu.Unlock()
	if !initialized {
		return nvml.ERROR_UNINITIALIZED
	}
	if mutating && s.latency > 0 {
		s.sleep(s.latency)
	}
	ret := nvml.SUCCESS
	err := s.update(func(st *fileState) (bool, error) {
		f, counted := st.takeFault(op)
		if f != nil && !f.Lie {
			ret = f.Return
			return true, nil
		}
		changed, r := fn(st, f != nil)
		ret = r
		return changed || counted, nil
	})
	if err != nil {
		log.Printf("nvmlsim: %s: %v", op, err)
		return nvml.ERROR_UNKNOWN
	}
	return ret
}

// Init initialises the simulated library (nvmlInit): it counts references, so
// each Init needs a Shutdown. Always SUCCESS.
func (s *Sim) Init() nvml.Return {
	s.initMu.Lock()
	defer s.initMu.Unlock()
	s.refcount++
	return nvml.SUCCESS
}

// InitWithFlags is Init; the flags are ignored.
func (s *Sim) InitWithFlags(uint32) nvml.Return { return s.Init() }

// Shutdown drops one Init reference. ERROR_UNINITIALIZED when there is none.
func (s *Sim) Shutdown() nvml.Return {
	s.initMu.Lock()
	defer s.initMu.Unlock()
	if s.refcount == 0 {
		return nvml.ERROR_UNINITIALIZED
	}
	s.refcount--
	return nvml.SUCCESS
}

// ErrorString returns the name of r, e.g. "ERROR_IN_USE". It works without
// Init, like nvmlErrorString.
func (s *Sim) ErrorString(r nvml.Return) string { return r.Error() }

func (s *Sim) initialized() bool {
	s.initMu.Lock()
	defer s.initMu.Unlock()
	return s.refcount > 0
}

// SystemGetDriverVersion returns DriverVersion ("580.95.05");
// ERROR_UNINITIALIZED before Init.
func (s *Sim) SystemGetDriverVersion() (string, nvml.Return) {
	if !s.initialized() {
		return "", nvml.ERROR_UNINITIALIZED
	}
	return DriverVersion, nvml.SUCCESS
}

// SystemGetNVMLVersion returns "13.580.95.05"; ERROR_UNINITIALIZED before Init.
func (s *Sim) SystemGetNVMLVersion() (string, nvml.Return) {
	if !s.initialized() {
		return "", nvml.ERROR_UNINITIALIZED
	}
	return strconv.Itoa(CUDADriverVersion/1000) + "." + DriverVersion, nvml.SUCCESS
}

// SystemGetCudaDriverVersion returns CUDADriverVersion (13000 = 13.0);
// ERROR_UNINITIALIZED before Init.
func (s *Sim) SystemGetCudaDriverVersion() (int, nvml.Return) {
	if !s.initialized() {
		return 0, nvml.ERROR_UNINITIALIZED
	}
	return CUDADriverVersion, nvml.SUCCESS
}

// SystemGetCudaDriverVersion_v2 is SystemGetCudaDriverVersion.
func (s *Sim) SystemGetCudaDriverVersion_v2() (int, nvml.Return) {
	return s.SystemGetCudaDriverVersion()
}

// DeviceGetCount returns the number of GPUs. Op "DeviceGetCount".
func (s *Sim) DeviceGetCount() (int, nvml.Return) {
	n := 0
	ret := s.do("DeviceGetCount", false, func(st *fileState, _ bool) (bool, nvml.Return) {
		n = len(st.GPUs)
		return false, nvml.SUCCESS
	})
	if ret != nvml.SUCCESS {
		return 0, ret
	}
	return n, ret
}

// DeviceGetHandleByIndex returns the handle of GPU index;
// ERROR_INVALID_ARGUMENT when index is out of range, ERROR_GPU_IS_LOST for a
// lost GPU (LoseGPU). Op "DeviceGetHandleByIndex".
func (s *Sim) DeviceGetHandleByIndex(index int) (nvml.Device, nvml.Return) {
	ret := s.do("DeviceGetHandleByIndex", false, func(st *fileState, _ bool) (bool, nvml.Return) {
		_, _, r := st.gpu(index)
		return false, r
	})
	if ret != nvml.SUCCESS {
		return nil, ret
	}
	return s.gpuHandle(index), ret
}

// DeviceGetHandleByUUID returns the handle of the GPU ("GPU-...") or MIG
// device ("MIG-...") with the given UUID; ERROR_INVALID_ARGUMENT for an empty
// UUID, ERROR_NOT_FOUND for an unknown one, and ERROR_GPU_IS_LOST while any
// GPU is off the bus (LoseGPU), whichever UUID is asked for: nvml.h,
// nvmlDeviceGetHandleByUUID, "if any GPU has fallen off the bus or is
// otherwise inaccessible" (it searches every GPU). Op
// "DeviceGetHandleByUUID".
func (s *Sim) DeviceGetHandleByUUID(uuid string) (nvml.Device, nvml.Return) {
	var dev nvml.Device
	ret := s.do("DeviceGetHandleByUUID", false, func(st *fileState, _ bool) (bool, nvml.Return) {
		if uuid == "" {
			return false, nvml.ERROR_INVALID_ARGUMENT
		}
		if slices.ContainsFunc(st.GPUs, func(g GPU) bool { return g.Lost }) {
			return false, nvml.ERROR_GPU_IS_LOST
		}
		for _, g := range st.GPUs {
			if g.UUID == uuid {
				dev = s.gpuHandle(g.Index)
				return false, nvml.SUCCESS
			}
			for slot, m := range g.migDevices() {
				if m.ci.UUID == uuid {
					dev = s.migHandle(g.Index, slot, m.gi, m.ci)
					return false, nvml.SUCCESS
				}
			}
		}
		return false, nvml.ERROR_NOT_FOUND
	})
	if ret != nvml.SUCCESS {
		return nil, ret
	}
	return dev, ret
}
