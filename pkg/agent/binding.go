package agent

import (
	"sync"

	"k8s.io/apimachinery/pkg/util/sets"
)

// BindingGate decides, for devices published with binding conditions
// (slices.RequireBinding), whether the agent confirms an allocation
// (BindingConditionReady) or refuses it (BindingConditionRemoved), and
// serialises those decisions with drains: once a device is draining, no new
// confirmation of it is decided, and an allocation confirmed before (or whose
// confirmation, decided before the drain, is still being written or
// retried) keeps the device in use.
//
// PoolInventory updates it before each publication; the Binder asks it; the
// live re-check of a drain (ClaimAllocations) ignores allocations it refused.
// The zero value knows nothing and confirms nothing until the first
// publication. Safe for concurrent use.
type BindingGate struct {
	mu        sync.Mutex
	known     bool
	published sets.Set[string]
	draining  sets.Set[string]
	// withdrawn are the devices published once and not now (withdrawn
	// after their drain, or destroyed): refused like draining ones.
	withdrawn sets.Set[string]
	// writing counts confirmations decided but not yet written.
	writing map[string]int
}

// BindingDecision is the gate's answer for one allocated device.
type BindingDecision int

const (
	// BindingUnknown: the agent has not published its pool yet; ask again
	// later.
	BindingUnknown BindingDecision = iota
	// BindingConfirm: the device is published and not draining; the caller
	// writes BindingConditionReady and then calls Written.
	BindingConfirm
	// BindingRefuse: the device is draining or no longer published.
	BindingRefuse
)

// Publishing records the devices about to be published and which of them
// are draining. Call it before the publication: from then on allocations of
// draining devices are refused.
func (g *BindingGate) Publishing(devices, draining sets.Set[string]) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.known = true
	g.withdrawn = g.withdrawn.Union(g.published).Difference(devices)
	g.published = devices.Clone()
	g.draining = draining.Clone()
}

// Decide answers for an allocation of device. A BindingConfirm holds the
// device in use until Written: call it once the condition is written, never
// after a failed write (the server may have applied it); retry the write
// instead.
func (g *BindingGate) Decide(device string) BindingDecision {
	g.mu.Lock()
	defer g.mu.Unlock()
	switch {
	case !g.known:
		return BindingUnknown
	case !g.published.Has(device) || g.draining.Has(device):
		return BindingRefuse
	}
	if g.writing == nil {
		g.writing = map[string]int{}
	}
	g.writing[device]++
	return BindingConfirm
}

// Written ends a confirmation Decide returned for device.
func (g *BindingGate) Written(device string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.writing[device] <= 1 {
		delete(g.writing, device)
		return
	}
	g.writing[device]--
}

// Refusable returns the devices an allocation of which, not shown
// confirmed in its claim's status, a drain can ignore: draining, or
// withdrawn from the pool since they were published (so refused whenever
// the Binder gets to it), with no confirmation decided and not yet
// written. Take it before reading the claims: a confirmation written after
// this call was decided before the drain and is still counted here, one
// written before is in the claims read after.
func (g *BindingGate) Refusable() sets.Set[string] {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := sets.New[string]()
	if !g.known {
		return out
	}
	for dev := range g.draining.Union(g.withdrawn) {
		if g.writing[dev] == 0 {
			out.Insert(dev)
		}
	}
	return out
}
