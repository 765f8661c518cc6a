package plugin

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/klog/v2"
)

// ReleaseOrphan unprepares the claim of uid as UnprepareResourceClaims
// would (its CDI spec removed, then its checkpoint entry), for a claim the
// kubelet will never unprepare: the ResourceClaim no longer exists, or no
// longer holds the devices (the kubelet's own record of it was lost, or the
// plugin was down when the claim went). It returns the claim's record, and
// false where the claim is not prepared here (any more), was prepared anew
// meanwhile, or stillGone says it is not gone. The caller decides that the
// claim is gone (the plugin has no view of the API server): stillGone, when
// not nil, is asked last, with the plugin's record locked, so that no
// prepare of the claim (allocated again since the caller last looked) comes
// between its answer and the release; it is given at most
// orphanConfirmTimeout. Config.OnUnprepared is called after a claim with
// devices is released.
//
// A claim a process still runs on (NVML lists one on any of the devices it
// holds exclusively: a container of a force-deleted pod that outlived the
// grace period, the kubelet down) is not released: the error wraps
// ErrOrphanInUse. Its devices are found by UUID (running), on a GPU NVML
// renumbered too; those on a GPU fallen off the bus are not asked, nor
// those it holds with admin access, whose processes
// are those of the claim that holds the device (NVML does not say whose a
// process is). A device given to another claim meanwhile would otherwise
// be prepared for two containers at once.
//
// Errors: ErrOrphanInUse; NVML's, where the processes cannot be listed;
// stillGone's; those of unpreparing (the CDI spec could not be removed,
// the checkpoint could not be written). The claim then stays prepared.
func (p *Plugin) ReleaseOrphan(ctx context.Context, uid types.UID, stillGone func(context.Context) (bool, error)) (PreparedClaim, bool, error) {
	p.mu.Lock()
	pc, ok := p.claims[uid]
	p.mu.Unlock()
	if !ok {
		return PreparedClaim{}, false, nil
	}
	obj := kubeletplugin.NamespacedObject{UID: uid, NamespacedName: types.NamespacedName{Namespace: pc.Namespace, Name: pc.Name}}
	busy, err := p.running(ctx, exclusive(pc))
	if err != nil {
		return pc, false, fmt.Errorf("releasing the preparation of claim %s: %w", obj, err)
	}
	if len(busy) > 0 {
		return pc, false, fmt.Errorf("releasing the preparation of claim %s: %w: %s", obj, ErrOrphanInUse, strings.Join(busy, ", "))
	}
	released, err := p.releaseLocked(ctx, obj, pc, stillGone)
	if err != nil || !released {
		return pc, false, err
	}
	klog.FromContext(ctx).Info("Unprepared a claim that no longer exists or holds none of its devices", "claim", obj, "devices", len(pc.Devices))
	p.unprepared(len(pc.Devices) > 0)
	return pc, true, nil
}

// releaseLocked is the end of ReleaseOrphan, under p.mu: it unprepares
// the claim of pc if its record is still pc and stillGone agrees.
func (p *Plugin) releaseLocked(ctx context.Context, obj kubeletplugin.NamespacedObject, pc PreparedClaim, stillGone func(context.Context) (bool, error)) (bool, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if cur, ok := p.claims[obj.UID]; !ok || !equality.Semantic.DeepEqual(cur, pc) {
		return false, nil // unprepared or prepared anew meanwhile
	}
	if stillGone != nil {
		confirmCtx, cancel := context.WithTimeout(ctx, orphanConfirmTimeout)
		gone, err := stillGone(confirmCtx)
		cancel()
		if err != nil {
			return false, fmt.Errorf("releasing the preparation of claim %s: %w", obj, err)
		}
		if !gone {
			return false, nil
		}
	}
	if err := p.unprepareClaim(ctx, obj); err != nil {
		return false, fmt.Errorf("releasing the preparation of claim %s: %w", obj, err)
	}
	return true, nil
}

// orphanConfirmTimeout bounds ReleaseOrphan's stillGone, which runs with
// every prepare and unprepare of the node waiting.
const orphanConfirmTimeout = 10 * time.Second

// ErrOrphanInUse is wrapped by ReleaseOrphan's error for a claim a process
// still runs on, and by a prepare's for a claim allocated other devices
// than it was prepared with while a process runs on one of those
// (staleInUse).
var ErrOrphanInUse = errors.New("a process still runs on its devices")
