package managerrun

import (
	"errors"
	"math"
	"os"
	"runtime/debug"
	"testing"

	"k8s.io/klog/v2/ktesting"
)

// TestSetMemoryLimitCgroupUnreadable: where the container's limit cannot be
// read (not "no limit": an error), the runtime's limit is left as it was
// and that limit is what SetMemoryLimit returns.
func TestSetMemoryLimitCgroupUnreadable(t *testing.T) {
	before := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(before) })
	const was = 512 << 20
	debug.SetMemoryLimit(was)
	t.Setenv("AUTOMEMLIMIT", "")
	os.Unsetenv("AUTOMEMLIMIT")
	t.Setenv("GOMEMLIMIT", "")
	_, ctx := ktesting.NewTestContext(t)
	got := setMemoryLimit(ctx, func() (uint64, error) { return 0, errors.New("cgroup unreadable") })
	if now := debug.SetMemoryLimit(-1); got != was || now != was {
		t.Errorf("limit %d (runtime's %d), want %d as it was (not %d)", got, now, was, int64(math.MaxInt64))
	}
}
