package plugin

import (
	"context"
	"errors"
	"fmt"
	"maps"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/klog/v2"
)

// UnprepareResourceClaims implements kubeletplugin.DRAPlugin: it removes the
// claim's CDI spec, then its checkpoint entry (in this order, so that a crash
// in between leaves the devices recorded as prepared, which is the safe
// side). A claim that is not prepared is no error.
func (p *Plugin) UnprepareResourceClaims(ctx context.Context, claims []kubeletplugin.NamespacedObject) (map[types.UID]error, error) {
	logger := klog.FromContext(ctx)
	out := make(map[types.UID]error, len(claims))
	released := false
	p.mu.Lock()
	for _, c := range claims {
		was := p.claims[c.UID]
		err := p.unprepareClaim(ctx, c)
		if err != nil {
			logger.Error(err, "Unpreparing claim failed", "claim", c)
		} else {
			logger.V(2).Info("Unprepared claim", "claim", c)
			released = released || len(was.Devices) > 0
		}
		out[c.UID] = err
	}
	p.mu.Unlock()
	p.unprepared(released)
	return out, nil
}

// unprepared calls Config.OnUnprepared where released; p.mu is not held.
func (p *Plugin) unprepared(released bool) {
	if released && p.cfg.OnUnprepared != nil {
		p.cfg.OnUnprepared()
	}
}

// unprepareClaim; p.mu is held.
func (p *Plugin) unprepareClaim(ctx context.Context, c kubeletplugin.NamespacedObject) error {
	if err := p.cdi.RemoveSpec(specName(p.cfg.DriverName, c.UID)); err != nil {
		return fmt.Errorf("unpreparing claim %s: removing CDI spec: %w", c, err)
	}
	if _, ok := p.claims[c.UID]; !ok {
		return nil
	}
	next := maps.Clone(p.claims)
	delete(next, c.UID)
	if err := writeCheckpoint(p.checkpointPath, next); err != nil {
		if !errors.Is(err, errNotDurable) {
			return fmt.Errorf("unpreparing claim %s: %w", c, err)
		}
		// The file no longer holds the claim: memory follows it. After a
		// power loss the claim may come back from the file, its devices
		// counted as prepared until it is unprepared again.
		klog.FromContext(ctx).Error(err, "Checkpoint written, but a power loss may undo it", "claim", c)
	}
	p.claims = next
	return nil
}
