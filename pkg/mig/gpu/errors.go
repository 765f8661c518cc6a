package gpu

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// Sentinel errors. An error the manager returns for a failed NVML call wraps
// one of these (a create whose rollback failed too wraps the rollback's as
// well, so that it may match two: rollbackFailure), so callers branch with
// errors.Is and read the raw
// code with ReturnCode (not errors.As to *NVMLError: a GPU that changed
// under a read or a destroy, a handle gone stale while the instance sought
// may be there still, is a changedMeanwhile, ErrNVML, whose code only
// ReturnCode reads). Otherwise the error is an *NVMLError, mapped so:
//
//	NVML return                              sentinel
//	---------------------------------------  -------------------------
//	ERROR_IN_USE                             ErrInUse
//	ERROR_INSUFFICIENT_RESOURCES             ErrInsufficientResources
//	ERROR_NOT_SUPPORTED                      ErrNotSupported
//	ERROR_RESET_REQUIRED                     ErrResetRequired
//	ERROR_NOT_FOUND                          ErrNotFound
//	ERROR_INVALID_ARGUMENT on a GI, CI or
//	  MIG-device handle, or from
//	  nvmlDeviceGetHandleByIndex
//	  (NVMLError.Stale)                      ErrNotFound (vanished / no such GPU)
//	ERROR_NO_PERMISSION                      ErrNoPermission
//	ERROR_GPU_IS_LOST                        ErrGPULost
//	anything else (ERROR_INVALID_ARGUMENT on
//	  a GPU handle, ERROR_UNINITIALIZED,
//	  ERROR_UNKNOWN ...)                     ErrNVML
//
// The manager also returns some of these without an NVML call behind them:
// ErrNotFound when no GPU instance matches the requested device, ErrInUse
// when processes run on a device that is to be destroyed, and
// ErrInsufficientResources (together with mig.ErrInvalidLayout) for a
// placement the profile does not allow, which is refused before NVML is
// touched; ErrNotSupported where NVML's profile table has no GPU instance
// profile of the ID the catalog gives, or no full-size compute instance
// profile; ErrNVML for a GPU instance NVML created that then has no compute
// instance.
var (
	// ErrInUse: processes run on the device, or NVML reports it busy.
	ErrInUse = errors.New("in use")
	// ErrInsufficientResources: the GPU has no room for the requested
	// instance (slices taken, instance count exhausted, invalid placement).
	ErrInsufficientResources = errors.New("insufficient resources")
	// ErrNotSupported: the GPU does not support the operation (e.g. MIG).
	ErrNotSupported = errors.New("not supported")
	// ErrResetRequired: the operation needs a GPU reset first.
	ErrResetRequired = errors.New("GPU reset required")
	// ErrNotFound: no such GPU, GPU instance or compute instance.
	ErrNotFound = errors.New("not found")
	// ErrNoPermission: the caller lacks the privilege (MIG changes need root
	// or CAP_SYS_ADMIN).
	ErrNoPermission = errors.New("no permission")
	// ErrGPULost: the GPU has fallen off the bus (an Xid 79): every call on
	// it fails until the node reboots or the GPU is recovered.
	ErrGPULost = errors.New("GPU is lost")
	// ErrNVML: any other NVML failure.
	ErrNVML = errors.New("NVML error")
	// ErrShutdown: the manager was used after Shutdown.
	ErrShutdown = errors.New("NVML manager is shut down")
)

// NVMLError is a failed NVML call: Op names the call (e.g.
// "nvmlDeviceCreateGpuInstanceWithPlacement") and Return the code it gave.
// Unwrap maps the code to one of the sentinel errors above.
type NVMLError struct {
	Op     string
	Return nvml.Return
	// Stale is set where the call was made on a GPU-instance,
	// compute-instance or MIG-device handle obtained earlier (NVML answers
	// ERROR_INVALID_ARGUMENT when such an instance was destroyed in the
	// meantime; nvml.h adds that a MIG-device handle may instead be reused
	// for a device made since, which then answers for it), and on
	// nvmlDeviceGetHandleByIndex (INVALID_ARGUMENT: no GPU at that index).
	// Unwrap then reports INVALID_ARGUMENT as ErrNotFound.
	Stale bool
}

func (e *NVMLError) Error() string {
	// Return.Error is nvmlErrorString while the library is loaded and
	// go-nvml's own table otherwise (safe without libnvidia-ml).
	return fmt.Sprintf("%s: %s (NVML return code %d)", e.Op, e.Return.Error(), int32(e.Return))
}

// Unwrap returns the sentinel error for e.Return (see the table above).
func (e *NVMLError) Unwrap() error {
	switch e.Return {
	case nvml.ERROR_IN_USE:
		return ErrInUse
	case nvml.ERROR_INSUFFICIENT_RESOURCES:
		return ErrInsufficientResources
	case nvml.ERROR_NOT_SUPPORTED:
		return ErrNotSupported
	case nvml.ERROR_RESET_REQUIRED:
		return ErrResetRequired
	case nvml.ERROR_NOT_FOUND:
		return ErrNotFound
	case nvml.ERROR_INVALID_ARGUMENT:
		if e.Stale {
			return ErrNotFound
		}
		return ErrNVML
	case nvml.ERROR_NO_PERMISSION:
		return ErrNoPermission
	case nvml.ERROR_GPU_IS_LOST:
		return ErrGPULost
	default:
		return ErrNVML
	}
}

// ReturnCode returns the NVML return code carried by err (the first
// *NVMLError in its chain, or the one behind a GPU that changed while it was
// read), for metrics labels; false when err did not come from an NVML call.
func ReturnCode(err error) (nvml.Return, bool) {
	var c interface{ cause() *NVMLError } // changedMeanwhile, noSuchGPU
	if errors.As(err, &c) && c.cause() != nil {
		return c.cause().Return, true
	}
	var e *NVMLError
	if errors.As(err, &e) {
		return e.Return, true
	}
	return nvml.SUCCESS, false
}

// IsNVMLError reports whether err came from NVML or the GPU manager: it
// carries an NVML return code (ReturnCode) or wraps one of this package's
// errors (ErrInUse, ErrInsufficientResources, ErrNotSupported,
// ErrResetRequired, ErrNotFound, ErrNoPermission, ErrGPULost, ErrNVML,
// ErrShutdown). An error of the API server or a context is not.
func IsNVMLError(err error) bool {
	if _, ok := ReturnCode(err); ok {
		return true
	}
	for _, e := range []error{ErrInUse, ErrInsufficientResources, ErrNotSupported, ErrResetRequired, ErrNotFound,
		ErrNoPermission, ErrGPULost, ErrNVML, ErrShutdown} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// nvmlErr returns nil for SUCCESS and an *NVMLError otherwise.
func nvmlErr(op string, ret nvml.Return) error {
	if ret == nvml.SUCCESS {
		return nil
	}
	return &NVMLError{Op: op, Return: ret}
}

// staleErr is nvmlErr for calls on instance handles that may have vanished.
func staleErr(op string, ret nvml.Return) error {
	if ret == nvml.SUCCESS {
		return nil
	}
	return &NVMLError{Op: op, Return: ret, Stale: true}
}

// Unreadable reports whether err, from a call on one GPU, says the GPU
// cannot be read at all for as long as the node runs as it is, by NVML's
// return code: fallen off the bus (ERROR_GPU_IS_LOST, ErrGPULost), not
// accessible to this process (ERROR_NO_PERMISSION: NVML counts GPUs whose
// device node the container lacks; ERROR_OPERATING_SYSTEM: blocked by the
// operating system, e.g. a cgroup), or unusable until someone acts
// (ERROR_INSUFFICIENT_POWER: a power cable not attached;
// ERROR_IRQ_ISSUE: the kernel found an interrupt problem;
// ERROR_RESET_REQUIRED: the GPU needs a reset). Other errors (a timeout,
// ERROR_UNKNOWN) may pass and do not make a GPU unreadable.
func Unreadable(err error) bool {
	code, ok := ReturnCode(err)
	if !ok {
		return false
	}
	switch code {
	case nvml.ERROR_GPU_IS_LOST, nvml.ERROR_NO_PERMISSION, nvml.ERROR_OPERATING_SYSTEM,
		nvml.ERROR_INSUFFICIENT_POWER, nvml.ERROR_IRQ_ISSUE, nvml.ERROR_RESET_REQUIRED:
		return true
	}
	return false
}

// UnreadableGPUsError is the error of Manager.GPUs when NVML counts GPUs it
// cannot read (Unreadable): GPUs then returns the GPUs it could read with
// this error, so that one broken GPU does not hide a node's others. Errors
// holds, per GPU index, why it could not be read.
type UnreadableGPUsError struct {
	Errors map[int]error
}

func (e *UnreadableGPUsError) Error() string {
	msgs := make([]string, 0, len(e.Errors))
	for _, idx := range slices.Sorted(maps.Keys(e.Errors)) {
		msgs = append(msgs, fmt.Sprintf("reading GPU %d: %v", idx, e.Errors[idx]))
	}
	return strings.Join(msgs, "; ")
}

// Unwrap returns the errors of the GPUs, in index order.
func (e *UnreadableGPUsError) Unwrap() []error {
	out := make([]error, 0, len(e.Errors))
	for _, idx := range slices.Sorted(maps.Keys(e.Errors)) {
		out = append(out, e.Errors[idx])
	}
	return out
}

// FailedGPUsError is the error of Manager.GPUs when NVML failed to read
// some GPUs for a reason that may pass (a timeout, ERROR_UNKNOWN: not
// Unreadable): the listing as a whole fails (SplitUnreadable returns it),
// since such a GPU may be sound and must not be reported gone, but GPUs
// still returns the GPUs it read beside it. Failed and Unreadable hold,
// per GPU index, why each other GPU could not be read (see GPUErrors).
type FailedGPUsError struct {
	Failed, Unreadable map[int]error
}

func (e *FailedGPUsError) Error() string {
	all := e.perGPU()
	msgs := make([]string, 0, len(all))
	for _, idx := range slices.Sorted(maps.Keys(all)) {
		msgs = append(msgs, fmt.Sprintf("reading GPU %d: %v", idx, all[idx]))
	}
	return strings.Join(msgs, "; ")
}

// Unwrap returns the errors of the GPUs, in index order.
func (e *FailedGPUsError) Unwrap() []error {
	all := e.perGPU()
	out := make([]error, 0, len(all))
	for _, idx := range slices.Sorted(maps.Keys(all)) {
		out = append(out, all[idx])
	}
	return out
}

func (e *FailedGPUsError) perGPU() map[int]error {
	out := maps.Clone(e.Unreadable)
	if out == nil {
		out = map[int]error{}
	}
	maps.Copy(out, e.Failed)
	return out
}

// GPUErrors reads the error of Manager.GPUs for a caller that needs some
// GPUs only: ok is true where err is nil or names the GPUs it could not
// read (UnreadableGPUsError, FailedGPUsError), whose errors perGPU holds by
// index (every other GPU was returned); false where the listing failed as
// a whole (counting GPUs, reading the driver version).
func GPUErrors(err error) (perGPU map[int]error, ok bool) {
	if err == nil {
		return nil, true
	}
	var f *FailedGPUsError
	if errors.As(err, &f) {
		return f.perGPU(), true
	}
	var u *UnreadableGPUsError
	if errors.As(err, &u) {
		return u.Errors, true
	}
	return nil, false
}

// SplitUnreadable splits the error of Manager.GPUs into the GPUs it could
// not read (by index; nil if none) and an error that failed the listing as
// a whole (nil when the GPUs returned beside err are every GPU NVML could
// read).
func SplitUnreadable(err error) (map[int]error, error) {
	var u *UnreadableGPUsError
	if errors.As(err, &u) {
		return u.Errors, nil
	}
	return nil, err
}
