package gpu

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/go-multierror"

	"github.com/miglayout/miglayout/pkg/mig"
)

func TestNVMLErrorMapping(t *testing.T) {
	all := []error{ErrInUse, ErrInsufficientResources, ErrNotSupported, ErrResetRequired, ErrNotFound, ErrNoPermission, ErrGPULost, ErrNVML}
	tests := []struct {
		ret   nvml.Return
		stale bool
		want  error
	}{
		{nvml.ERROR_IN_USE, false, ErrInUse},
		{nvml.ERROR_INSUFFICIENT_RESOURCES, false, ErrInsufficientResources},
		{nvml.ERROR_NOT_SUPPORTED, false, ErrNotSupported},
		{nvml.ERROR_RESET_REQUIRED, false, ErrResetRequired},
		{nvml.ERROR_NOT_FOUND, false, ErrNotFound},
		{nvml.ERROR_NOT_FOUND, true, ErrNotFound},
		{nvml.ERROR_INVALID_ARGUMENT, true, ErrNotFound},
		{nvml.ERROR_INVALID_ARGUMENT, false, ErrNVML},
		{nvml.ERROR_NO_PERMISSION, false, ErrNoPermission},
		{nvml.ERROR_GPU_IS_LOST, false, ErrGPULost},
		{nvml.ERROR_UNKNOWN, true, ErrNVML},
		{nvml.ERROR_UNINITIALIZED, false, ErrNVML},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("%d/stale=%v", int32(tc.ret), tc.stale), func(t *testing.T) {
			var err error = &NVMLError{Op: "nvmlDeviceX", Return: tc.ret, Stale: tc.stale}
			err = fmt.Errorf("doing something on GPU 0: %w", err)
			for _, s := range all {
				if got := errors.Is(err, s); got != (s == tc.want) {
					t.Errorf("errors.Is(%v, %v) = %v, want %v", err, s, got, s == tc.want)
				}
			}
			code, ok := ReturnCode(err)
			if !ok || code != tc.ret {
				t.Errorf("ReturnCode = %v, %v; want %v, true", code, ok, tc.ret)
			}
			msg := err.Error()
			for _, want := range []string{"nvmlDeviceX", tc.ret.Error(), fmt.Sprintf("code %d", int32(tc.ret))} {
				if !strings.Contains(msg, want) {
					t.Errorf("message %q lacks %q", msg, want)
				}
			}
		})
	}
}

func TestReturnCodeThroughMultierror(t *testing.T) {
	cause := fmt.Errorf("creating compute instance: %w", &NVMLError{Op: "nvmlGpuInstanceCreateComputeInstance", Return: nvml.ERROR_INSUFFICIENT_RESOURCES})
	rb := fmt.Errorf("rolling back: %w", &NVMLError{Op: "nvmlGpuInstanceDestroy", Return: nvml.ERROR_IN_USE})
	err := fmt.Errorf("creating MIG device: %w", multierror.Append(cause, rb))
	if !errors.Is(err, ErrInsufficientResources) || !errors.Is(err, ErrInUse) {
		t.Errorf("multierror hides a sentinel: %v", err)
	}
	if code, ok := ReturnCode(err); !ok || code != nvml.ERROR_INSUFFICIENT_RESOURCES {
		t.Errorf("ReturnCode = %v, %v; want the first error's code", code, ok)
	}
	if _, ok := ReturnCode(errors.New("plain")); ok {
		t.Errorf("ReturnCode of a non-NVML error reports ok")
	}
	if _, ok := ReturnCode(nil); ok {
		t.Errorf("ReturnCode(nil) reports ok")
	}
}

// An Init failure must come back as the clear error, and no other NVML call
// may be made: mock.Interface panics on any method whose Func is nil.
func TestNewNVMLInitFailure(t *testing.T) {
	tests := []struct {
		ret      nvml.Return
		wantMsg  string
		sentinel error
	}{
		{nvml.ERROR_LIBRARY_NOT_FOUND, "initialising NVML: libnvidia-ml.so.1 not found: is the NVIDIA driver installed and the agent running with the driver's libraries mounted?", ErrNVML},
		{nvml.ERROR_DRIVER_NOT_LOADED, "initialising NVML: the NVIDIA kernel driver is not loaded", ErrNVML},
		{nvml.ERROR_NO_PERMISSION, "initialising NVML: no permission", ErrNoPermission},
		{nvml.ERROR_UNKNOWN, "initialising NVML: nvmlInit", ErrNVML},
	}
	for _, tc := range tests {
		t.Run(tc.ret.Error(), func(t *testing.T) {
			lib := &mock.Interface{InitFunc: func() nvml.Return { return tc.ret }}
			var m *NVMLManager
			var err error
			func() {
				defer func() {
					if r := recover(); r != nil {
						t.Fatalf("NewNVML made an NVML call after Init failed: %v", r)
					}
				}()
				m, err = NewNVML(lib, mig.DefaultCatalog())
			}()
			if err == nil || m != nil {
				t.Fatalf("NewNVML = %v, %v; want nil and an error", m, err)
			}
			if !strings.HasPrefix(err.Error(), tc.wantMsg) {
				t.Errorf("error %q does not start with %q", err, tc.wantMsg)
			}
			if code, ok := ReturnCode(err); !ok || code != tc.ret {
				t.Errorf("ReturnCode = %v, %v; want %v", code, ok, tc.ret)
			}
			if !errors.Is(err, tc.sentinel) {
				t.Errorf("error %v does not wrap %v", err, tc.sentinel)
			}
			if n := len(lib.InitCalls()); n != 1 {
				t.Errorf("Init called %d times, want 1", n)
			}
		})
	}
}

func TestShutdown(t *testing.T) {
	lib := &mock.Interface{
		InitFunc:     func() nvml.Return { return nvml.SUCCESS },
		ShutdownFunc: func() nvml.Return { return nvml.SUCCESS },
	}
	m, err := NewNVML(lib, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Shutdown(); err != nil {
		t.Fatal(err)
	}
	if err := m.Shutdown(); err != nil {
		t.Errorf("second Shutdown: %v", err)
	}
	if n := len(lib.ShutdownCalls()); n != 1 {
		t.Errorf("nvmlShutdown called %d times, want 1", n)
	}
	// After Shutdown no NVML call may be made (the mock would panic).
	if _, err := m.GPUs(t.Context()); !errors.Is(err, ErrShutdown) {
		t.Errorf("GPUs after Shutdown = %v, want ErrShutdown", err)
	}
	if err := m.DestroyMIGDevice(t.Context(), 0, mig.Device{Profile: "1g.10gb", Start: 0}); !errors.Is(err, ErrShutdown) {
		t.Errorf("DestroyMIGDevice after Shutdown = %v, want ErrShutdown", err)
	}
}

func busID(s string) [32]int8 {
	var b [32]int8
	for i := range len(s) {
		b[i] = int8(s[i])
	}
	return b
}

func TestHelpers(t *testing.T) {
	for v, want := range map[int]string{13000: "13.0", 12080: "12.8", 12020: "12.2"} {
		if got := cudaVersion(v); got != want {
			t.Errorf("cudaVersion(%d) = %q, want %q", v, got, want)
		}
	}
	// A100-SXM4-80GB numbers: 81920 MiB total.
	total := uint64(81920) << 20
	names := []struct {
		idx  int
		info nvml.GpuInstanceProfileInfo
		want string
	}{
		{nvml.GPU_INSTANCE_PROFILE_1_SLICE, nvml.GpuInstanceProfileInfo{SliceCount: 1, MemorySizeMB: 9728}, "1g.10gb"},
		{nvml.GPU_INSTANCE_PROFILE_1_SLICE_REV1, nvml.GpuInstanceProfileInfo{SliceCount: 1, MemorySizeMB: 9728}, "1g.10gb+me"},
		{nvml.GPU_INSTANCE_PROFILE_1_SLICE_REV2, nvml.GpuInstanceProfileInfo{SliceCount: 1, MemorySizeMB: 19968}, "1g.20gb"},
		{nvml.GPU_INSTANCE_PROFILE_3_SLICE, nvml.GpuInstanceProfileInfo{SliceCount: 3, MemorySizeMB: 40192}, "3g.40gb"},
		{nvml.GPU_INSTANCE_PROFILE_7_SLICE, nvml.GpuInstanceProfileInfo{SliceCount: 7, MemorySizeMB: 80896}, "7g.80gb"},
		{nvml.GPU_INSTANCE_PROFILE_1_SLICE_NO_ME, nvml.GpuInstanceProfileInfo{SliceCount: 1, MemorySizeMB: 9728}, "1g.10gb-me"},
		{nvml.GPU_INSTANCE_PROFILE_2_SLICE_ALL_ME, nvml.GpuInstanceProfileInfo{SliceCount: 2, MemorySizeMB: 19968}, "2g.20gb+me.all"},
		{nvml.GPU_INSTANCE_PROFILE_4_SLICE_GFX, nvml.GpuInstanceProfileInfo{SliceCount: 4, MemorySizeMB: 40192}, "4g.40gb+gfx"},
		// An index go-nvlib does not name: nvidia-smi's suffix on the plain
		// profile's name (never the catalog's 3g.40gb).
		{nvml.GPU_INSTANCE_PROFILE_3_SLICE_GFX, nvml.GpuInstanceProfileInfo{SliceCount: 3, MemorySizeMB: 40192}, "3g.40gb+gfx"},
		// An index newer than both: the plain profile's name.
		{nvml.GPU_INSTANCE_PROFILE_COUNT, nvml.GpuInstanceProfileInfo{SliceCount: 1, MemorySizeMB: 9728}, "1g.10gb"},
	}
	for _, tc := range names {
		if got := derivedProfileName(tc.idx, tc.info, total); got != tc.want {
			t.Errorf("derivedProfileName(%d, %+v) = %q, want %q", tc.idx, tc.info, got, tc.want)
		}
	}
	for n, want := range map[uint32]int{1: nvml.COMPUTE_INSTANCE_PROFILE_1_SLICE, 3: nvml.COMPUTE_INSTANCE_PROFILE_3_SLICE, 7: nvml.COMPUTE_INSTANCE_PROFILE_7_SLICE} {
		if got, err := ciProfileIndex(n); err != nil || got != want {
			t.Errorf("ciProfileIndex(%d) = %d, %v; want %d", n, got, err, want)
		}
	}
	if _, err := ciProfileIndex(5); !errors.Is(err, ErrNotSupported) {
		t.Errorf("ciProfileIndex(5) = %v, want ErrNotSupported", err)
	}
}

// TestUnreadable: the NVML codes that last while the node runs as it is make
// a GPU unreadable (left out of the inventory); those that may pass, and
// errors without an NVML code, do not.
func TestUnreadable(t *testing.T) {
	for ret, want := range map[nvml.Return]bool{
		nvml.ERROR_GPU_IS_LOST: true, nvml.ERROR_NO_PERMISSION: true, nvml.ERROR_OPERATING_SYSTEM: true,
		nvml.ERROR_INSUFFICIENT_POWER: true, nvml.ERROR_IRQ_ISSUE: true, nvml.ERROR_RESET_REQUIRED: true,
		nvml.ERROR_UNKNOWN: false, nvml.ERROR_TIMEOUT: false, nvml.ERROR_INVALID_ARGUMENT: false, nvml.ERROR_NOT_FOUND: false,
	} {
		err := fmt.Errorf("reading GPU 1: %w", &NVMLError{Op: "nvmlDeviceGetHandleByIndex", Return: ret})
		if got := Unreadable(err); got != want {
			t.Errorf("Unreadable(%v) = %v, want %v", ret, got, want)
		}
	}
	if Unreadable(errors.New("context canceled")) {
		t.Error("an error without an NVML code is unreadable")
	}
}

// TestChangedMeanwhileKeepsTheCodeNotTheNotFound: a stale handle met on the
// way (changedMeanwhile) keeps NVML's return code for ReturnCode and the
// metrics, but is not ErrNotFound: what was sought may well be there still.
func TestChangedMeanwhileKeepsTheCodeNotTheNotFound(t *testing.T) {
	stale := fmt.Errorf("reading a GPU instance: %w", staleErr("nvmlGpuInstanceGetInfo", nvml.ERROR_INVALID_ARGUMENT))
	if !errors.Is(stale, ErrNotFound) {
		t.Fatal("a stale handle's error is not ErrNotFound to begin with")
	}
	err := fmt.Errorf("listing MIG devices of GPU 0: %w", meanwhile(stale))
	if errors.Is(err, ErrNotFound) {
		t.Errorf("%v is ErrNotFound", err)
	}
	if code, ok := ReturnCode(err); !ok || code != nvml.ERROR_INVALID_ARGUMENT {
		t.Errorf("ReturnCode(%v) = %v, %t; want ERROR_INVALID_ARGUMENT, true", err, code, ok)
	}
	if err.Error() != "listing MIG devices of GPU 0: "+stale.Error() {
		t.Errorf("text %q lost the cause's", err)
	}
}

// TestChangedMeanwhileOfNotFoundIsNotErrNotFound: changedMeanwhile is made
// of any error that is ErrNotFound on the way to a GI (walk, destroyOnce),
// NVML's ERROR_NOT_FOUND as well as a stale handle's INVALID_ARGUMENT, and
// is never ErrNotFound itself: destroy's caller would take the GPU instance
// sought, which may well be there still, for gone.
func TestChangedMeanwhileOfNotFoundIsNotErrNotFound(t *testing.T) {
	for _, stale := range []bool{true, false} {
		cause := fmt.Errorf("listing processes on GI 1 CI 0: %w", &NVMLError{Op: "nvmlDeviceGetComputeRunningProcesses", Return: nvml.ERROR_NOT_FOUND, Stale: stale})
		if !errors.Is(cause, ErrNotFound) {
			t.Fatal("ERROR_NOT_FOUND is not ErrNotFound to begin with")
		}
		err := fmt.Errorf("the GPU's instances kept changing while the GPU instance was destroyed: %w", meanwhile(cause))
		if errors.Is(err, ErrNotFound) {
			t.Errorf("stale=%t: %v is ErrNotFound: the GPU instance would be taken for gone", stale, err)
		}
	}
}

// TestNVLibNames: the bus ID, brand and architecture go-nvlib spells,
// NVML's errors as *NVMLError with their return code kept, and a value
// newer than go-nvlib knows as "Unknown".
func TestNVLibNames(t *testing.T) {
	type want struct {
		BusID, Brand, Arch string
		Err                nvml.Return
	}
	device := func(bus string, busRet nvml.Return, brand nvml.BrandType, brandRet nvml.Return, arch nvml.DeviceArchitecture, archRet nvml.Return) *mock.Device {
		return &mock.Device{
			GetPciInfoFunc:      func() (nvml.PciInfo, nvml.Return) { return nvml.PciInfo{BusId: busID(bus)}, busRet },
			GetBrandFunc:        func() (nvml.BrandType, nvml.Return) { return brand, brandRet },
			GetArchitectureFunc: func() (nvml.DeviceArchitecture, nvml.Return) { return arch, archRet },
		}
	}
	ok := nvml.SUCCESS
	for name, tc := range map[string]struct {
		dev  *mock.Device
		want want
	}{
		"an H100 on domain 0": {dev: device("00000000:B7:00.0", ok, nvml.BRAND_NVIDIA, ok, nvml.DEVICE_ARCH_HOPPER, ok),
			want: want{BusID: "0000:b7:00.0", Brand: "Nvidia", Arch: "Hopper"}},
		"an A100 with its Tesla brand": {dev: device("00000000:07:00.0", ok, nvml.BRAND_TESLA, ok, nvml.DEVICE_ARCH_AMPERE, ok),
			want: want{BusID: "0000:07:00.0", Brand: "Tesla", Arch: "Ampere"}},
		"a domain above 0xffff keeps 8 digits": {dev: device("00010000:0A:00.0", ok, nvml.BRAND_NVIDIA, ok, nvml.DEVICE_ARCH_ADA, ok),
			want: want{BusID: "00010000:0a:00.0", Brand: "Nvidia", Arch: "Ada Lovelace"}},
		"an architecture and a brand newer than go-nvlib": {dev: device("00000000:07:00.0", ok, 9999, ok, 9999, ok),
			want: want{BusID: "0000:07:00.0", Brand: "Unknown", Arch: "Unknown"}},
		"the PCI info of a GPU fallen off the bus": {dev: device("", nvml.ERROR_GPU_IS_LOST, nvml.BRAND_NVIDIA, ok, nvml.DEVICE_ARCH_HOPPER, ok),
			want: want{Err: nvml.ERROR_GPU_IS_LOST}},
		"the brand of a GPU fallen off the bus": {dev: device("00000000:07:00.0", ok, 0, nvml.ERROR_GPU_IS_LOST, nvml.DEVICE_ARCH_HOPPER, ok),
			want: want{Err: nvml.ERROR_GPU_IS_LOST}},
		"the architecture NVML cannot read": {dev: device("00000000:07:00.0", ok, nvml.BRAND_NVIDIA, ok, 0, nvml.ERROR_UNKNOWN),
			want: want{Err: nvml.ERROR_UNKNOWN}},
	} {
		t.Run(name, func(t *testing.T) {
			var got want
			var err error
			got.BusID, got.Brand, got.Arch, err = nvlibNames(tc.dev)
			var nerr *NVMLError
			if errors.As(err, &nerr) {
				got.Err = nerr.Return
			} else if err != nil {
				t.Fatalf("nvlibNames: %v, want an *NVMLError or none", err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("nvlibNames (-want +got):\n%s", diff)
			}
			if tc.want.Err == nvml.ERROR_GPU_IS_LOST && !Unreadable(err) {
				t.Errorf("nvlibNames of a GPU fallen off the bus: %v, want it Unreadable", err)
			}
		})
	}
}
