package managerrun

import (
	"context"

	"github.com/KimMachineGun/automemlimit/memlimit"
	"k8s.io/klog/v2"
)

// MemoryLimitRatio is the share of the container's memory limit that
// SetMemoryLimit gives the Go runtime as its soft limit: the rest is left
// to memory the runtime does not count (stacks of cgo calls into NVML, the
// binary, page cache the container is charged for).
const MemoryLimitRatio = 0.9

// SetMemoryLimit sets the Go runtime's soft memory limit (GOMEMLIMIT) to
// MemoryLimitRatio of the container's cgroup memory limit
// (github.com/KimMachineGun/automemlimit, reading cgroup v2 or v1), so that
// the garbage collector works harder as the heap nears the limit instead
// of letting it grow to twice the live heap and the container be killed
// for memory. GOMEMLIMIT set in the environment wins (AUTOMEMLIMIT=off turns
// this off); without a cgroup limit (a bare process, the demo) the runtime
// is left unlimited. It returns the limit in bytes (math.MaxInt64 for
// none); an error reading the cgroup is logged and leaves the runtime's
// limit as it was.
func SetMemoryLimit(ctx context.Context) int64 {
	return setMemoryLimit(ctx, memlimit.FromCgroup)
}

func setMemoryLimit(ctx context.Context, provider memlimit.Provider) int64 {
	logger := klog.FromContext(ctx).WithName("memlimit")
	limit, err := memlimit.Set(memlimit.WithRatio(MemoryLimitRatio), memlimit.WithProvider(provider))
	if err != nil {
		logger.Info("Go memory limit not set from the container's", "err", err)
		return limit
	}
	logger.V(1).Info("Go memory limit", "bytes", limit)
	return limit
}
