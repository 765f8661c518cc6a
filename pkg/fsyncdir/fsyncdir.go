// Package fsyncdir syncs a directory, so that a rename made in it (a file
// replaced whole, as renameio does) survives a power loss.
package fsyncdir

import (
	"errors"
	"os"
	"syscall"
)

// Sync fsyncs directory dir. EINVAL, ENOTSUP or EOPNOTSUPP (a file system
// that does not sync directories: it gives what it can) is no error;
// other errors are os.Open's, fsync(2)'s or close(2)'s.
func Sync(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = syncFile(d)
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if errors.Is(err, syscall.EINVAL) || errors.Is(err, syscall.ENOTSUP) || errors.Is(err, syscall.EOPNOTSUPP) {
		return nil
	}
	return err
}

// syncFile is (*os.File).Sync; a variable so that tests can make it fail.
var syncFile = (*os.File).Sync
