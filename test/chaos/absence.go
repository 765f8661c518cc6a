package chaos

import (
	"fmt"
	"slices"
	"time"
)

// PoolAbsence is a period during which a monitored pool had no ResourceSlice
// at all, until it was published again, complete. The kubelet deletes a
// node's slices when it starts, and a driver's once its plugin has been
// unreachable for its wipe delay (30 s); the agent publishes the pool again.
// The scheduler allocates nothing from an absent pool, nor from an
// incomplete one (fewer slices of its generation than their
// ResourceSliceCount: a new generation being written, or the slices being
// deleted, one by one), so neither withdraws a device by itself: the monitor
// keeps the pool's view from before, judges allocations written meanwhile
// (decided on the view before) against it, and compares it with the pool
// once the pool is complete again. An allocated device the pool is then
// without is WithdrawnAllocated; one it has with another UUID,
// AllocatedDestroyed. Only absences are recorded.
type PoolAbsence struct {
	Pool string
	// Deleted is when the pool's last slice was deleted; Published when the
	// pool was complete again (zero while it is not).
	Deleted, Published time.Time
}

func (a PoolAbsence) String() string {
	if a.Published.IsZero() {
		return fmt.Sprintf("pool %s deleted at %s, not published again", a.Pool, a.Deleted.Format("15:04:05.000"))
	}
	return fmt.Sprintf("pool %s deleted at %s, published again %dms later", a.Pool, a.Deleted.Format("15:04:05.000"),
		a.Published.Sub(a.Deleted).Milliseconds())
}

// hasSlice reports whether the pool has a slice. Called with mu held.
func (m *Monitor) hasSlice(pool string) bool {
	for _, s := range m.slices {
		if s.Spec.Pool.Name == pool {
			return true
		}
	}
	return false
}

// poolHidden records that the scheduler sees nothing of pool since at (its view
// was before): it is incomplete, or, where gone, has no slice at all (an absence).
// The view before is kept until the pool is complete again (poolBack). Called with
// mu held.
func (m *Monitor) poolHidden(pool string, before map[string]published, at time.Time, gone bool) {
	if _, ok := m.absent[pool]; !ok {
		m.absent[pool], m.hiddenAt[pool] = before, at
	}
	if gone && m.openAbsence(pool) < 0 {
		m.absences = append(m.absences, PoolAbsence{Pool: pool, Deleted: at})
	}
}

// openAbsence is the index of pool's absence still going on, -1 if none.
// Called with mu held.
func (m *Monitor) openAbsence(pool string) int {
	for i := len(m.absences) - 1; i >= 0; i-- {
		if a := m.absences[i]; a.Pool == pool && a.Published.IsZero() {
			return i
		}
	}
	return -1
}

// poolBack ends pool's hiding, if it was hidden (poolHidden), at at: the pool
// is complete again. It returns the pool's view before it was hidden, and ends
// its absence if it was absent. Called with mu held.
func (m *Monitor) poolBack(pool string, at time.Time) (map[string]published, bool) {
	before, ok := m.absent[pool]
	if !ok {
		return nil, false
	}
	delete(m.absent, pool)
	delete(m.hiddenAt, pool)
	if i := m.openAbsence(pool); i >= 0 {
		m.absences[i].Published = at
	}
	return before, true
}

// seenView is what the scheduler last saw published of pool: its view, or
// while it is hidden (absent or incomplete), its view before. Called with mu
// held.
func (m *Monitor) seenView(pool string) map[string]published {
	if before, ok := m.absent[pool]; ok {
		return before
	}
	return m.views[pool]
}

// Absences returns the absences of the given pools (nil: all) that lasted
// until since or later: those that ended at or after since, and those
// still going on.
func (m *Monitor) Absences(since time.Time, pools ...string) []PoolAbsence {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []PoolAbsence
	for _, a := range m.absences {
		if (a.Published.IsZero() || !a.Published.Before(since)) && (len(pools) == 0 || slices.Contains(pools, a.Pool)) {
			out = append(out, a)
		}
	}
	return out
}

// absenceLine sums up the absences of the pools the kubelets deleted, at their
// restart or after an agent outage past the wipe delay (their lengths, ds): how
// many, and how long until published again. Empty without one.
func absenceLine(ds []time.Duration) string {
	if len(ds) == 0 {
		return ""
	}
	s := slices.Sorted(slices.Values(ds))
	return fmt.Sprintf("pools deleted by a kubelet: %d, published again after p50 %dms, max %dms.\n",
		len(s), s[(len(s)-1)/2].Milliseconds(), s[len(s)-1].Milliseconds())
}

// Incomplete returns the given pools (nil: all) that the scheduler sees
// nothing of now though they have slices (fewer or more of their generation
// than their ResourceSliceCount), with since when.
func (m *Monitor) Incomplete(pools ...string) map[string]time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[string]time.Time{}
	for pool, at := range m.hiddenAt {
		if m.hasSlice(pool) && (len(pools) == 0 || slices.Contains(pools, pool)) {
			out[pool] = at
		}
	}
	return out
}
