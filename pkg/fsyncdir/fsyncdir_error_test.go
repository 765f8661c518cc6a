package fsyncdir

import (
	"errors"
	"os"
	"syscall"
	"testing"
)

// TestSyncReturnsFsyncErrors: an fsync(2) error other than a file system
// not syncing directories (EIO: the rename may not last) is returned, not
// taken as done; EINVAL and EOPNOTSUPP are.
func TestSyncReturnsFsyncErrors(t *testing.T) {
	for name, tc := range map[string]struct {
		err  error
		want error
	}{
		"EIO":        {err: syscall.EIO, want: syscall.EIO},
		"EINVAL":     {err: syscall.EINVAL},
		"EOPNOTSUPP": {err: syscall.EOPNOTSUPP},
		"none":       {},
	} {
		t.Run(name, func(t *testing.T) {
			syncFile = func(*os.File) error { return tc.err }
			t.Cleanup(func() { syncFile = (*os.File).Sync })
			if err := Sync(t.TempDir()); !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
				t.Errorf("Sync: %v, want %v", err, tc.want)
			}
		})
	}
}
