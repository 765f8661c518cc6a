package plugin

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/klog/v2"

	"github.com/miglayout/miglayout/pkg/mig"
	"github.com/miglayout/miglayout/pkg/mig/gpu"
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
// ErrOrphanInUse. Its devices on a GPU NVML cannot read are not asked
// (onReadableGPUs), nor those it holds with admin access, whose processes
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
	busy, err := p.running(ctx, p.onReadableGPUs(ctx, exclusive(pc)))
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

// onReadableGPUs returns pc without its devices on GPUs that fell off the
// bus or need a reset (NVML's ERROR_GPU_IS_LOST, ERROR_RESET_REQUIRED),
// whose processes cannot be listed. Such a GPU has no device published, so
// no other claim can be given one of them while it stays so, and it comes
// back only through a reset or a reboot, which ends its processes: a claim
// is not held prepared, nor a prepare failed, on their account. Any other
// error, unreadable ones included (NVML denied the GPU: its processes may
// run on), leaves the devices in, and listing them fails.
func (p *Plugin) onReadableGPUs(ctx context.Context, pc PreparedClaim) PreparedClaim {
	_, err := p.cfg.GPUs.GPUs(ctx)
	perGPU, ok := gpu.GPUErrors(err)
	if !ok {
		return pc
	}
	pc.Devices = slices.DeleteFunc(slices.Clone(pc.Devices), func(d PreparedDevice) bool {
		code, _ := gpu.ReturnCode(perGPU[d.GPUIndex])
		return code == nvml.ERROR_GPU_IS_LOST || code == nvml.ERROR_RESET_REQUIRED
	})
	return pc
}

// running returns the devices of pc a compute process runs on now, with
// the processes' IDs ("gpu-0-mig-3g40gb-9-4 (pid 4242)"). A device that no
// longer exists runs nothing.
func (p *Plugin) running(ctx context.Context, pc PreparedClaim) ([]string, error) {
	inv, err := p.readInventory(ctx, pc.gpuIndexes())
	if err != nil {
		return nil, err
	}
	var busy []string
	migProcs := map[int]map[mig.Device][]gpu.Process{} // by GPU: one NVML read each
	for _, d := range pc.Devices {
		src, ok := inv.Lookup(d.Device)
		if !ok {
			continue
		}
		var procs []gpu.Process
		if src.MIG != nil {
			byDevice, read := migProcs[src.GPU.Index]
			if !read {
				if byDevice, err = p.cfg.GPUs.MIGProcesses(ctx, src.GPU.Index); err != nil {
					return nil, err
				}
				migProcs[src.GPU.Index] = byDevice
			}
			procs = byDevice[src.MIG.Device()]
		} else if procs, err = p.cfg.GPUs.GPUProcesses(ctx, src.GPU.Index); err != nil {
			return nil, err
		}
		if len(procs) > 0 {
			pids := make([]string, len(procs))
			for i, pr := range procs {
				pids[i] = fmt.Sprint(pr.PID)
			}
			busy = append(busy, fmt.Sprintf("%s (pid %s)", d.Device, strings.Join(pids, ", ")))
		}
	}
	return busy, nil
}
