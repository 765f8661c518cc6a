package agent

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// xidFaults marks devices by UUID with an Xid.
type xidFaults map[string]uint64

func (f xidFaults) XidOf(_ int, uuid string) (uint64, bool) {
	code, ok := f[uuid]
	return code, ok
}

// TestXidTaintsPublished: a device an Xid hit is published with the Xid
// taint, whose value is the Xid; where the API server drops taints, the
// first such publication fails as a drain would, and publications then
// leave the Xid taints out, as they do pending MIG mode changes' taints,
// until the server serves taints again.
func TestXidTaintsPublished(t *testing.T) {
	gpus := pendingEnableBesideMIGOff(t)
	gpus[0].GPU.MIGMode.Pending = false
	pub := &droppingPublisher{}
	inv := &PoolInventory{NodeName: "n1", Driver: "mig.miglayout.io", Publisher: pub, Faults: xidFaults{"GPU-b": 48},
		Live: strippingReader{pub: &pub.capturePublisher, served: &pub.served}, Timeout: 10 * time.Second}
	pub.inv = inv
	ctx := context.Background()
	xids := func() map[string]string {
		out := map[string]string{}
		for k := range wantedKeys(pub.last) {
			if k.xid != "" {
				out[k.name] = k.xid
			}
		}
		return out
	}
	if err := inv.Publish(ctx, gpus, nil); !errors.Is(err, ErrDrainTaintsDropped) {
		t.Fatalf("publication with an Xid taint, taints dropped: %v, want ErrDrainTaintsDropped", err)
	}
	if err := inv.Publish(ctx, gpus, nil); err != nil {
		t.Fatalf("publication after taints were found dropped: %v", err)
	}
	if diff := cmp.Diff(map[string]string{}, xids()); diff != "" {
		t.Errorf("Xid taints published while taints are left out (-want +got):\n%s", diff)
	}
	pub.served.Store(true)
	inv.taintsDroppedAt.Store(0) // PendingTaintsRetry passed
	if err := inv.Publish(ctx, gpus, nil); err != nil {
		t.Fatalf("publication with taints served: %v", err)
	}
	if diff := cmp.Diff(map[string]string{"gpu-1": "48"}, xids()); diff != "" {
		t.Errorf("Xid taints (-want +got):\n%s", diff)
	}
}
