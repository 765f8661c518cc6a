package gpu

import (
	"context"
	"fmt"
	"sync"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/miglayout/miglayout/pkg/mig"
)

// NVMLManager is the Manager over go-nvml. Create it with NewNVML (or Open on
// a node); it caches no state: every call reads NVML afresh, so it always
// reports NVML truth. Only each GPU's profile table (GPU.ProfileValues,
// fixed while the driver is loaded) is read once, the first time MIG mode is
// on. It is safe for concurrent use; Shutdown waits for calls in flight and
// makes later calls fail with ErrShutdown.
type NVMLManager struct {
	lib     nvml.Interface
	catalog *mig.Catalog

	mu     sync.RWMutex
	closed bool

	profilesMu sync.Mutex
	// profiles are GPU.ProfileValues by GPU UUID, once read.
	profiles map[string][]mig.NVMLProfileValues
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

// enter takes the read lock; it fails after Shutdown (ErrShutdown) and when
// ctx is done (ctx.Err()), holding nothing.
func (m *NVMLManager) enter(ctx context.Context) (func(), error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
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
