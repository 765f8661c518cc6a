package gpu

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"

	securejoin "github.com/cyphar/filepath-securejoin"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"k8s.io/klog/v2"

	"github.com/miglayout/miglayout/pkg/mig"
)

// NVMLManager is the Manager over go-nvml. Create it with NewNVML (or Open on
// a node); it caches no state: every call reads NVML afresh, so it always
// reports NVML truth. Only each GPU's profile table (GPU.ProfileValues) is
// read once per MIG mode: the first time MIG mode is on (or before, with MIG
// mode off, where the driver answers then, as 580 does), and again the first
// time it is on after SetMIGMode or a read saw it off, since nvml.h promises
// the table (nvmlDeviceGetGpuInstanceProfileInfo) fixed only "throughout the
// lifetime of a MIG mode"; KeepProfileTables keeps the tables across
// restarts. It is safe for concurrent use; Shutdown waits for calls in flight and
// makes later calls fail with ErrShutdown.
type NVMLManager struct {
	lib     nvml.Interface
	catalog *mig.Catalog

	mu     sync.RWMutex
	closed bool

	// xidMu orders the Xid watches' reads of their event sets with the
	// destroys and creates of GPU instances (holdXids, readXids): an Xid
	// is resolved to MIG devices against the GPU instances as they were
	// when it was posted, never against one NVML made since with the ID
	// of one destroyed. xidWatches are the watches running (WatchXids),
	// written under xidMu, as their maps (register) and read queues.
	xidMu      sync.Mutex
	xidWatches map[*xidWatch]bool

	profilesMu sync.Mutex
	// profiles are GPU.ProfileValues by GPU UUID, once read.
	profiles map[string]profileTable
	// staleProfiles are the GPUs whose table was read in a MIG mode since
	// turned off, or taken from the file of KeepProfileTables: read again
	// when MIG mode is next on.
	staleProfiles map[string]bool
	// noMIGOffTable are the GPUs whose driver answered no profile while
	// MIG mode was off (nvml.h's NOT_SUPPORTED): not asked again with MIG
	// mode off in this process.
	noMIGOffTable map[string]bool
	// tablesPath is the file KeepProfileTables keeps the tables in ("":
	// memory only); tablesDriver the driver version they are NVML's of.
	tablesPath, tablesDriver string
}

var _ Manager = (*NVMLManager)(nil)

// Open initialises the system's NVML (libnvidia-ml.so.1, found by the
// dynamic loader) with the embedded catalog.
func Open() (*NVMLManager, error) {
	return NewNVML(nvml.New(), mig.DefaultCatalog())
}

// nvmlLibrary is the NVML library's file name (its soname).
const nvmlLibrary = "libnvidia-ml.so.1"

// nvmlLibraryDirs are where driver installations put libnvidia-ml.so.1,
// relative to the driver root: RPM- and Debian-style multiarch directories,
// then the plain ones.
var nvmlLibraryDirs = []string{
	"usr/lib64", "usr/lib/x86_64-linux-gnu", "usr/lib/aarch64-linux-gnu",
	"lib64", "lib/x86_64-linux-gnu", "lib/aarch64-linux-gnu", "usr/lib", "lib",
}

// FindNVMLLibrary returns the path of libnvidia-ml.so.1 under driverRoot (a
// host's driver root mounted in the container, e.g. /driver-root), its
// symbolic links resolved as the host resolves them, inside driverRoot (an
// absolute target, or ".." past the top, stays in it: securejoin). A library
// directory whose path cannot be resolved (a link loop) is skipped. The
// error wraps ErrNotFound when no library directory holds the library.
func FindNVMLLibrary(driverRoot string) (string, error) {
	root := filepath.Clean(driverRoot)
	var skipped []string
	for _, dir := range nvmlLibraryDirs {
		p, err := securejoin.SecureJoin(root, filepath.Join(dir, nvmlLibrary))
		if err == nil {
			var fi fs.FileInfo
			if fi, err = os.Lstat(p); err == nil {
				if fi.Mode().IsRegular() {
					return p, nil
				}
				err = fmt.Errorf("%s is not a regular file", p)
			}
		}
		if !errors.Is(err, fs.ErrNotExist) {
			skipped = append(skipped, fmt.Sprintf("%s: %v", dir, err))
		}
	}
	why := ""
	if len(skipped) > 0 {
		why = "; skipped " + strings.Join(skipped, "; ")
	}
	return "", fmt.Errorf("finding %s under %s (in %s%s): %w", nvmlLibrary, driverRoot, strings.Join(nvmlLibraryDirs, ", "), why, ErrNotFound)
}

// OpenAt is Open with libnvidia-ml.so.1 loaded by path from the driver
// installed under driverRoot (FindNVMLLibrary), falling back to the dynamic
// loader's search where driverRoot holds none (the NVIDIA container runtime
// put it on the image's own path). The driver's library directories are
// never put on LD_LIBRARY_PATH: the process would then load the host's C
// library too, which the binary's dynamic loader may not match.
func OpenAt(ctx context.Context, driverRoot string) (*NVMLManager, error) {
	path, err := FindNVMLLibrary(driverRoot)
	if errors.Is(err, ErrNotFound) {
		klog.FromContext(ctx).Info("NVML not found under the driver root; loading it from the library search path", "driverRoot", driverRoot, "err", err)
		return Open()
	}
	if err != nil {
		return nil, err
	}
	klog.FromContext(ctx).V(1).Info("Loading NVML", "path", path)
	return NewNVML(nvml.New(nvml.WithLibraryPath(path)), mig.DefaultCatalog())
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
	return &NVMLManager{lib: lib, catalog: catalog, xidWatches: map[*xidWatch]bool{}}, nil
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
