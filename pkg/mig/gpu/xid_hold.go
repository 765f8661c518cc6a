package gpu

import (
	"context"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// A GPU instance's ID follows from its placement, so a GPU instance made
// where one was destroyed gets its ID again. An Xid event names the GPU
// instance by ID: resolved to MIG devices after such a destroy and create,
// it would blame the new device. So every change of a GPU's instances
// first reads the events pending on the running watches' sets and
// resolves them (each watch delivers them before its next wait): a destroy
// through holdXids, a create through readXids.

// maxXidsHeld bounds how many events one read takes from one set (an Xid
// storm): the rest are read by the watch, after the change.
const maxXidsHeld = 1024

// holdXids prepares a destroy on GPU idx: it lists the GPU's MIG devices,
// reads the pending events of every running watch and resolves their Xids,
// and holds the watches off (xidMu) until the returned function is called
// once the destroy is done. That reads the events posted during the
// destroy, and resolves those of GPU idx against the listing made before
// it, which still has the devices destroyed. A compute instance made again
// during the destroy (remakeCI) is the exception: an Xid of the new one
// posted then names the device it replaced. The destroy waits for a
// watch's current wait to end (xidWaitStep). Without a watch it does
// nothing. The caller holds the manager's read lock.
func (m *NVMLManager) holdXids(ctx context.Context, idx int) func() {
	m.xidMu.Lock()
	if len(m.xidWatches) == 0 {
		return m.xidMu.Unlock
	}
	listings := map[int]migListing{idx: m.listMIGDevices(ctx, idx)}
	m.readXidsLocked(ctx, listings)
	return func() {
		m.readXidsLocked(ctx, listings)
		m.xidMu.Unlock()
	}
}

// readXids reads the pending events of every running watch and resolves
// their Xids, before a create on a GPU: an Xid posted before the create is
// of a GPU instance there or gone (destroyed by someone else, nvidia-smi),
// never of the one made, which may get a gone one's ID. The caller holds
// the manager's read lock.
func (m *NVMLManager) readXids(ctx context.Context) {
	m.xidMu.Lock()
	defer m.xidMu.Unlock()
	m.readXidsLocked(ctx, map[int]migListing{})
}

// readXidsLocked reads the events pending on every running watch's set (up
// to maxXidsHeld each) and resolves their Xids against listings, each GPU
// listed once (added to listings where missing). An nvmlEventSetWait
// error stops the read: the watch meets it at its next wait. The caller
// holds xidMu.
func (m *NVMLManager) readXidsLocked(ctx context.Context, listings map[int]migListing) {
	for w := range m.xidWatches {
		for range maxXidsHeld {
			ev, ret := w.set.Wait(0)
			if ret != nvml.SUCCESS {
				break
			}
			if ev.EventType&nvml.EventTypeXidCriticalError == 0 {
				continue
			}
			x := w.xidOf(ev)
			if w.resolves(x) {
				l, ok := listings[x.GPUIndex]
				if !ok {
					l = m.listMIGDevices(ctx, x.GPUIndex)
					listings[x.GPUIndex] = l
				}
				x.resolve(l)
			}
			w.read = append(w.read, x)
		}
	}
}
