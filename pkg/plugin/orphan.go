package plugin

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/klog/v2"
)

// ReleaseOrphan unprepares the claim of uid as UnprepareResourceClaims
// would (its CDI spec removed, then its checkpoint entry), for a claim the
// kubelet will never unprepare: the ResourceClaim no longer exists (the
// kubelet's own record of it was lost, or the plugin was down when the
// claim went). It returns the claim's record, and false where the claim is
// not prepared here (any more). The caller decides that the claim is gone;
// the plugin has no view of the API server. Config.OnUnprepared is called
// after a claim with devices is released.
//
// Errors: those of unpreparing (the CDI spec could not be removed, the
// checkpoint could not be written); the claim then stays prepared.
func (p *Plugin) ReleaseOrphan(ctx context.Context, uid types.UID) (PreparedClaim, bool, error) {
	p.mu.Lock()
	pc, ok := p.claims[uid]
	if !ok {
		p.mu.Unlock()
		return PreparedClaim{}, false, nil
	}
	obj := kubeletplugin.NamespacedObject{UID: uid, NamespacedName: types.NamespacedName{Namespace: pc.Namespace, Name: pc.Name}}
	err := p.unprepareClaim(ctx, obj)
	p.mu.Unlock()
	if err != nil {
		return pc, false, fmt.Errorf("releasing the preparation of a claim that no longer exists: %w", err)
	}
	klog.FromContext(ctx).Info("Unprepared a claim that no longer exists", "claim", obj, "devices", len(pc.Devices))
	p.unprepared(len(pc.Devices) > 0)
	return pc, true, nil
}
