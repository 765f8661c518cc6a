package chaos

import (
	"fmt"
	"time"

	"github.com/miglayout/miglayout/pkg/mig/nvmlsim"
	migslices "github.com/miglayout/miglayout/pkg/slices"
)

// deviceLife is what the monitor knows of one device UUID: from the polls,
// whether NVML destroyed it; from the replay, how the pool's complete views
// published it (UndrainedDestroyed).
type deviceLife struct {
	pool, name string
	// existed: a poll saw it, or a publication written since the monitor
	// started had it (one made and destroyed between two polls); only
	// then does its absence from a later poll say that NVML destroyed it.
	existed bool
	// destroyedAt is the first poll after that which lacked it.
	destroyedAt time.Time
	// lost: its GPU had fallen off the bus at the last poll that saw it.
	lost bool
	// published: a complete view of the pool had it; inView: the current
	// one has it (while the pool is hidden, the one before); tainted: its
	// drain taint there, or, once it left, in the last view that had it.
	published, inView, tainted bool
	// leftAt is when it left the view; listed: it left in a list made
	// after a watch ended, which shows none of the publications between.
	leftAt time.Time
	listed bool
}

// life returns the record of uuid, nil for one judged already. Called with
// mu held.
func (m *Monitor) life(uuid, pool, name string) *deviceLife {
	if m.judged[uuid] {
		return nil
	}
	if m.lives == nil {
		m.lives, m.judged = map[string]*deviceLife{}, map[string]bool{}
	}
	l := m.lives[uuid]
	if l == nil {
		l = &deviceLife{pool: pool, name: name}
		m.lives[uuid] = l
	}
	return l
}

// trackPublished records how a complete view of pool (view, e's) publishes
// each device UUID, and which UUIDs the view before (old: the last complete
// one, the one before the pool was hidden included) had that it lacks.
// Called with mu held.
func (m *Monitor) trackPublished(pool string, old, view map[string]published, e event) {
	in := map[string]bool{}
	for name, d := range view {
		if d.uuid == "" {
			continue
		}
		in[d.uuid] = true
		if l := m.life(d.uuid, pool, name); l != nil {
			l.published, l.inView, l.tainted = true, true, d.tainted
			// An initial list may show a pool the agent published
			// before NVML lost the device, for all the monitor knows.
			l.existed = l.existed || !e.initial
		}
	}
	for _, d := range old {
		if l := m.lives[d.uuid]; l != nil && !in[d.uuid] && l.inView {
			l.inView, l.leftAt, l.listed = false, e.at, e.initial
		}
	}
}

// trackNVML notes the device UUIDs NVML has in states (polled at now), and
// those it has destroyed since: a UUID is never given again, so one known to
// have existed that a poll lacks was destroyed. The instances of a GPU fallen
// off the bus are kept (they count as there). Called with mu held.
func (m *Monitor) trackNVML(states map[string]nvmlsim.State, now time.Time) {
	for pool, st := range states {
		there := map[string]bool{}
		for _, g := range st.GPUs {
			there[g.UUID] = true
			for _, gi := range g.GPUInstances {
				for _, ci := range gi.ComputeInstances {
					there[ci.UUID] = true
					if l := m.life(ci.UUID, pool, migslices.MIGDeviceName(g.Index, gi.Profile, gi.ProfileID, gi.Placement.Start)); l != nil {
						l.existed, l.lost = true, g.Lost
					}
				}
			}
		}
		for uuid, l := range m.lives {
			if l.pool == pool && l.existed && l.destroyedAt.IsZero() && !there[uuid] {
				l.destroyedAt = now
			}
		}
	}
}

// judgeDestroyed judges each device NVML destroyed by the publication that
// took its UUID out of the pool's complete view: it must have had the drain
// taint (UndrainedDestroyed). Called with mu held at the end of Checkpoint,
// once the events up to then are replayed: the agent withdraws a device
// before it destroys it, so the withdrawal was written before the poll that
// found the device gone. A device still in the view waits for its
// withdrawal (a pool that keeps publishing a device NVML lacks is
// Env.Check's pool mismatch). Exempt, each for a reason the drain does not
// cover:
//   - a device no complete view ever had: the scheduler never saw it, so
//     nothing could be allocated it (a GPU instance whose compute instance
//     create failed, rolled back with it; a device made and destroyed
//     within one pass);
//   - a device of a GPU that had fallen off the bus: the agent cannot touch
//     such a GPU, and withdrew its devices untainted as unreadable; what
//     destroys them is the GPU's recovery (a reboot or a reset), not the
//     agent;
//   - a device that left the view in a list made after a watch ended: the
//     publications between the two, the drain among them, went unseen.
//
// A pool hidden (its slices deleted by a kubelet restart, or a generation
// half written) needs no exemption: its view from before is kept, and the
// view it comes back with decides, as for allocations (PoolAbsence). The
// chaos faults make the agent's own NVML calls fail, lie or stall, and none
// destroys a device by itself, so every other destroy is the agent's.
func (m *Monitor) judgeDestroyed() {
	for uuid, l := range m.lives {
		if l.destroyedAt.IsZero() || l.inView {
			continue
		}
		delete(m.lives, uuid)
		m.judged[uuid] = true
		if !l.published || l.lost || l.listed || l.tainted {
			continue
		}
		at := l.destroyedAt
		if l.leftAt.After(at) {
			at = l.leftAt
		}
		m.add(Finding{Kind: UndrainedDestroyed, Pool: l.pool, Device: l.name, At: at,
			Detail: fmt.Sprintf("uuid %s, withdrawn from a publication without the drain taint", uuid)}, uuid)
	}
}
