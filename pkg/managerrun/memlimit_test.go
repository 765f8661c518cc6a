package managerrun

import (
	"cmp"
	"errors"
	"math"
	"os"
	"runtime/debug"
	"testing"

	"github.com/KimMachineGun/automemlimit/memlimit"
	"k8s.io/klog/v2/ktesting"
)

// TestSetMemoryLimit: the Go runtime's soft limit becomes 90 % of the
// container's memory limit; GOMEMLIMIT in the environment wins; no
// container limit leaves the runtime unlimited; where the limit cannot be
// read (not "no limit": an error), the runtime's limit is left as it was and
// is what SetMemoryLimit returns.
func TestSetMemoryLimit(t *testing.T) {
	before := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(before) })
	const gib = 1 << 30
	for name, tc := range map[string]struct {
		env      string
		provider memlimit.Provider
		was      int64 // the runtime's limit before (0: none)
		want     int64
	}{
		"a 1 GiB container":   {provider: memlimit.Limit(gib), want: gib * 9 / 10},
		"GOMEMLIMIT set":      {env: "123MiB", provider: memlimit.Limit(gib), want: 123 << 20},
		"no container limit":  {provider: func() (uint64, error) { return 0, memlimit.ErrNoLimit }, want: math.MaxInt64},
		"a 256 MiB container": {provider: memlimit.Limit(256 << 20), want: 256 << 20 * 9 / 10},
		"an unreadable cgroup": {provider: func() (uint64, error) { return 0, errors.New("cgroup unreadable") },
			was: 512 << 20, want: 512 << 20},
	} {
		t.Run(name, func(t *testing.T) {
			debug.SetMemoryLimit(cmp.Or(tc.was, math.MaxInt64))
			t.Setenv("AUTOMEMLIMIT", "")
			os.Unsetenv("AUTOMEMLIMIT")
			t.Setenv("GOMEMLIMIT", tc.env)
			if tc.env != "" {
				// What the runtime does with GOMEMLIMIT at start.
				debug.SetMemoryLimit(tc.want)
			}
			_, ctx := ktesting.NewTestContext(t)
			got := setMemoryLimit(ctx, tc.provider)
			if now := debug.SetMemoryLimit(-1); got != tc.want || now != tc.want {
				t.Errorf("limit %d (runtime's %d), want %d", got, now, tc.want)
			}
		})
	}
}
