package nvmlsim

import (
	"fmt"
	"slices"
	"strings"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// Fault makes one future call of an operation fail. Faults live in the state,
// so one injected through any Sim on a state file reaches every process
// sharing it. Each call of Op counts down Nth; the call that brings it to
// zero triggers the fault, which is then removed.
type Fault struct {
	// Op is the operation: a name from MutatingOps or ReadOps, e.g.
	// "CreateGpuInstanceWithPlacement", "CreateComputeInstance",
	// "GpuInstance.Destroy", "ComputeInstance.Destroy", "SetMigMode".
	// Device methods are named bare ("GetMigMode"), whether called on the
	// handle or through the Interface (DeviceGetMigMode); GPU and compute
	// instance methods carry a "GpuInstance." or "ComputeInstance." prefix,
	// except CreateComputeInstance (GpuInstance.CreateComputeInstance is
	// accepted as an alias).
	Op string `json:"op"`
	// Nth is the call that fails, counting from the injection: 1 = the next.
	Nth int `json:"nth"`
	// Return is the code the call returns (for SetMigMode both codes); it
	// must not be SUCCESS unless Lie is set. For ResetGPU the error wraps it.
	Return nvml.Return `json:"return"`
	// Lie makes the call report SUCCESS and do nothing instead: a destroy
	// that leaves the instance, a create that returns a handle to nothing
	// (every call on it gives ERROR_INVALID_ARGUMENT), a SetMigMode or
	// ResetGPU that changes nothing. Only for MutatingOps.
	Lie bool `json:"lie,omitempty"`
}

// MutatingOps are the operations that change hardware state; Latency applies
// to them and Fault.Lie is allowed for them.
var MutatingOps = []string{
	"SetMigMode",
	"CreateGpuInstance",
	"CreateGpuInstanceWithPlacement",
	"CreateComputeInstance",
	"GpuInstance.CreateComputeInstance", // alias of CreateComputeInstance
	"GpuInstance.Destroy",
	"ComputeInstance.Destroy",
	"ResetGPU",
}

// ReadOps are the read-only operations a Fault may name.
var ReadOps = []string{
	"DeviceGetCount", "DeviceGetHandleByIndex", "DeviceGetHandleByUUID",
	"GetName", "GetUUID", "GetIndex", "GetMemoryInfo", "GetPciInfo", "GetMinorNumber",
	"GetCudaComputeCapability", "GetArchitecture", "GetBrand", "GetMigMode",
	"GetGpuInstanceProfileInfo", "GetGpuInstancePossiblePlacements", "GetGpuInstanceRemainingCapacity",
	"GetGpuInstances", "GetGpuInstanceById", "GetMaxMigDeviceCount", "GetMigDeviceHandleByIndex",
	"IsMigDeviceHandle", "GetGpuInstanceId", "GetComputeInstanceId", "GetDeviceHandleFromMigDeviceHandle",
	"GetComputeRunningProcesses",
	"GpuInstance.GetInfo", "GpuInstance.GetComputeInstanceProfileInfo", "GpuInstance.GetComputeInstances",
	"GpuInstance.GetComputeInstanceById", "GpuInstance.GetComputeInstanceRemainingCapacity",
	"ComputeInstance.GetInfo",
}

// canonicalOp maps aliases to the name the simulator counts calls under.
func canonicalOp(op string) string {
	if op == "GpuInstance.CreateComputeInstance" {
		return "CreateComputeInstance"
	}
	return op
}

// InjectFault adds f. It fails for an unknown Op, Nth < 1, a SUCCESS Return
// without Lie, or Lie on a read-only operation. It needs no Init.
func (s *Sim) InjectFault(f Fault) error {
	mutating := slices.Contains(MutatingOps, f.Op)
	switch {
	case !mutating && !slices.Contains(ReadOps, f.Op):
		return fmt.Errorf("injecting fault: unknown operation %q (known: %s, %s)", f.Op, strings.Join(MutatingOps, ", "), strings.Join(ReadOps, ", "))
	case f.Nth < 1:
		return fmt.Errorf("injecting fault on %s: Nth %d is not >= 1", f.Op, f.Nth)
	case f.Lie && !mutating:
		return fmt.Errorf("injecting fault on %s: Lie is only for mutating operations", f.Op)
	case f.Lie && f.Return != nvml.SUCCESS:
		return fmt.Errorf("injecting fault on %s: Lie reports SUCCESS, Return %v must be left SUCCESS", f.Op, f.Return)
	case !f.Lie && f.Return == nvml.SUCCESS:
		return fmt.Errorf("injecting fault on %s: Return must be an error code (or set Lie)", f.Op)
	}
	f.Op = canonicalOp(f.Op)
	if err := s.update(func(st *fileState) (bool, error) {
		st.Faults = append(st.Faults, f)
		return true, nil
	}); err != nil {
		return fmt.Errorf("injecting fault on %s: %w", f.Op, err)
	}
	return nil
}

// ClearFaults removes every pending fault. It needs no Init.
func (s *Sim) ClearFaults() error {
	if err := s.update(func(st *fileState) (bool, error) {
		changed := len(st.Faults) > 0
		st.Faults = nil
		return changed, nil
	}); err != nil {
		return fmt.Errorf("clearing faults: %w", err)
	}
	return nil
}

// takeFault counts one call of op against the pending faults. It returns the
// fault this call triggers (the first in injection order, if several do;
// every triggered fault is removed) and whether any fault was counted.
func (st *fileState) takeFault(op string) (*Fault, bool) {
	var hit *Fault
	counted := false
	kept := st.Faults[:0]
	for _, f := range st.Faults {
		if f.Op != op {
			kept = append(kept, f)
			continue
		}
		counted = true
		f.Nth--
		if f.Nth > 0 {
			kept = append(kept, f)
			continue
		}
		if hit == nil {
			hit = &f
		}
	}
	st.Faults = kept
	if len(st.Faults) == 0 {
		st.Faults = nil
	}
	return hit, counted
}
