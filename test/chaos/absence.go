package chaos

import (
	"fmt"
	"slices"
	"time"
)

// PoolAbsence is a period during which a monitored pool had no ResourceSlice
// at all. The kubelet deletes a node's slices when it starts, and a driver's
// once its plugin has been unreachable for its wipe delay (30 s); the agent
// publishes the pool again. The scheduler allocates nothing from an absent
// pool, so an absence withdraws no device by itself: the monitor keeps the
// pool's view from before the deletion, judges allocations written meanwhile
// (decided on the view before) against it, and compares it with the pool
// once the pool is published again. An allocated device the pool is then
// without is WithdrawnAllocated; one it has with another UUID,
// AllocatedDestroyed.
type PoolAbsence struct {
	Pool string
	// Deleted is when the pool's last slice was deleted; Published when a
	// slice of the pool was published again (zero while the pool is absent).
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

// poolDeleted records that pool's last slice was deleted at at, when its
// view was before. Called with mu held.
func (m *Monitor) poolDeleted(pool string, before map[string]published, at time.Time) {
	if _, ok := m.absent[pool]; ok {
		return
	}
	m.absent[pool] = before
	m.absences = append(m.absences, PoolAbsence{Pool: pool, Deleted: at})
}

// poolBack ends pool's absence, if it was absent, at at: a slice of it was
// published again. It returns the pool's view before the deletion. Called
// with mu held.
func (m *Monitor) poolBack(pool string, at time.Time) (map[string]published, bool) {
	before, ok := m.absent[pool]
	if !ok {
		return nil, false
	}
	delete(m.absent, pool)
	for i := len(m.absences) - 1; i >= 0; i-- {
		if a := &m.absences[i]; a.Pool == pool && a.Published.IsZero() {
			a.Published = at
			break
		}
	}
	return before, true
}

// seenView is what the scheduler last saw published of pool: its view, or
// while it is absent, its view before the deletion. Called with mu held.
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

// absenceLine sums up the absences of the pools kubelet restarts deleted
// (their lengths, ds): how many, and how long until published again. Empty
// without one.
func absenceLine(ds []time.Duration) string {
	if len(ds) == 0 {
		return ""
	}
	s := slices.Sorted(slices.Values(ds))
	return fmt.Sprintf("pools deleted by a kubelet restart: %d, published again after p50 %dms, max %dms.\n",
		len(s), s[(len(s)-1)/2].Milliseconds(), s[len(s)-1].Milliseconds())
}
