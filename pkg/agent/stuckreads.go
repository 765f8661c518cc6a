package agent

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/util/sets"
)

// StuckReadAfter is how long the reads of one GPU may keep failing with an
// error that may pass (ERROR_UNKNOWN, a timeout: gpu.FailedGPUsError, or
// its MIG devices' listing) before the agent takes the GPU as unreadable:
// its devices withdrawn from the pool, GPUUnreadable in its status, the
// node's other GPUs going on. Until then every pass fails as a whole, so
// that one odd answer never withdraws a sound GPU's devices. A GPU whose
// handle NVML cannot determine ("Unknown Error", after an Xid 79 or a GSP
// failure) stays so until a reset; without this its devices stayed
// published to the scheduler and every change on the node waited, with no
// word of the GPU.
const StuckReadAfter = time.Minute

// now is the Repartitioner's clock.
func (r *Repartitioner) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// readOf is one read of a GPU that may fail: the GPU itself (its handle
// and properties, Manager.GPUs) or its MIG devices' listing.
type readOf struct {
	gpu  int
	what string
}

const (
	readGPU        = "gpu"
	readMIGDevices = "mig-devices"
)

// noteFailedRead records that read failed with err at now, an error that
// may pass, and returns err marked as stuck once that read has failed in a
// row for StuckReadAfter or longer (nil before).
func (r *Repartitioner) noteFailedRead(read readOf, err error, now time.Time) error {
	if r.failingReads == nil {
		r.failingReads = map[readOf]time.Time{}
	}
	if r.triedReads != nil {
		r.triedReads.Insert(read)
	}
	since, ok := r.failingReads[read]
	if !ok {
		r.failingReads[read] = now
		since = now
	}
	if now.Sub(since) < StuckReadAfter {
		return nil
	}
	return fmt.Errorf("failing since %s (%s): %w", since.UTC().Format(time.RFC3339), now.Sub(since).Round(time.Second), err)
}

// beginReads starts an observation's count of the reads it tries; the
// function returned ends it, forgetting since when the reads it did not
// note failed (read fine, unreadable, or not tried: an observation that
// stopped at an earlier GPU's failure), so that a failing run counts only
// reads that failed one after another.
func (r *Repartitioner) beginReads() (end func()) {
	r.triedReads = sets.New[readOf]()
	return func() {
		for read := range r.failingReads {
			if !r.triedReads.Has(read) {
				delete(r.failingReads, read)
			}
		}
		r.triedReads = nil
	}
}

// stuckReads notes the failed reads of a GPU listing (failed, by index)
// and returns them all marked as stuck, or nil while any of them is not
// yet.
func (r *Repartitioner) stuckReads(failed map[int]error, now time.Time) map[int]error {
	stuck := map[int]error{}
	for idx, err := range failed {
		if s := r.noteFailedRead(readOf{idx, readGPU}, err, now); s != nil {
			stuck[idx] = s
		}
	}
	if len(stuck) < len(failed) {
		return nil
	}
	return stuck
}
