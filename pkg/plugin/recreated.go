package plugin

import (
	"context"
	"errors"
	"fmt"
	"slices"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
)

// RefreshRecreated brings up to date the preparation of each claim whose
// MIG devices were created again since it was prepared (the same names, at
// the same placements, with new UUIDs and capability nodes: the GPU was
// reset, by its driver's recovery or nvidia-smi, and the agent made its
// layout again) while the claim's pod kept running: its CDI spec and
// checkpoint entry are rewritten as a prepare of it would rewrite them
// (PrepareResourceClaims on a recreated device). The kubelet prepares a
// claim again only after its own restart, so without this every restart
// of the pod's containers would get the spec naming the destroyed device's
// UUID, and fail to start, until the pod is deleted. The CDI device IDs
// the kubelet holds do not change.
//
// The agent calls it after a pass that changed GPUs. A claim some device
// of which does not exist (yet), or lies on another board, is left as it
// is (ErrDeviceGone is no error here: the kubelet's next prepare of it
// reports it); the errors, by claim, are those of reading NVML or of
// preparing the claim afresh (a GPU being reconfigured: the next pass
// tries again).
//
// NVML is read once for all the claims (the node's GPUs, and the MIG
// devices of those the claims' devices lie on), and again only to prepare
// a claim afresh.
func (p *Plugin) RefreshRecreated(ctx context.Context) map[types.UID]error {
	failed := map[types.UID]error{}
	var claims []PreparedClaim
	var idxs []int
	for _, pc := range p.PreparedClaims() {
		if len(pc.Devices) == 0 {
			continue
		}
		claims = append(claims, pc)
		for _, idx := range pc.gpuIndexes() {
			if !slices.Contains(idxs, idx) {
				idxs = append(idxs, idx)
			}
		}
	}
	if len(claims) == 0 {
		return failed
	}
	reading := p.readGPUs(ctx, idxs)
	for _, pc := range claims {
		inv, err := reading.inventory(pc.gpuIndexes())
		if err == nil {
			err = p.reprepareWith(pc, inv, true)
		}
		switch {
		case err == nil, errors.Is(err, ErrDeviceGone), errors.Is(err, errSuperseded):
			continue
		case !errors.Is(err, errRecreated):
			failed[pc.UID] = fmt.Errorf("checking the devices of claim %s/%s: %w", pc.Namespace, pc.Name, err)
			continue
		}
		klog.FromContext(ctx).Info("Claim's devices were created again while it stayed prepared; writing its CDI spec for them", "claim", klog.KRef(pc.Namespace, pc.Name), "detail", err)
		// Only while the record is still pc: the kubelet may unprepare
		// the claim meanwhile.
		if _, err := p.prepareClaimIf(ctx, p.claimOf(pc), &pc); err != nil && !errors.Is(err, errSuperseded) {
			failed[pc.UID] = err
		}
	}
	return failed
}

// claimOf is the ResourceClaim pc was prepared for, as far as a prepare
// reads it: its identity and this driver's allocation results (one per
// request of each device).
func (p *Plugin) claimOf(pc PreparedClaim) *resourceapi.ResourceClaim {
	claim := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{UID: pc.UID, Namespace: pc.Namespace, Name: pc.Name}}
	claim.Status.Allocation = &resourceapi.AllocationResult{}
	for _, d := range pc.Devices {
		for _, req := range slices.Sorted(slices.Values(d.Requests)) {
			claim.Status.Allocation.Devices.Results = append(claim.Status.Allocation.Devices.Results, resourceapi.DeviceRequestAllocationResult{
				Request: req, Driver: p.cfg.DriverName, Pool: d.Pool, Device: d.Device, AdminAccess: ptr.To(d.AdminAccess)})
		}
	}
	return claim
}
