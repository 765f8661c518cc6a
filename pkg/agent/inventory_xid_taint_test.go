package agent

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/miglayout/miglayout/pkg/mig"
	"github.com/miglayout/miglayout/pkg/mig/gpu"
)

// xidFaults holds Xid marks by "<GPU index>/<MIG device UUID>", "" for
// the GPU as a whole; as the kubelet plugin, a GPU's mark covers its
// devices.
type xidFaults map[string]uint64

func (f xidFaults) XidOf(idx int, _, uuid string) (uint64, bool) {
	if code, ok := f[fmt.Sprintf("%d/%s", idx, uuid)]; ok {
		return code, ok
	}
	code, ok := f[fmt.Sprintf("%d/", idx)]
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
	inv := &PoolInventory{NodeName: "n1", Driver: "mig.miglayout.io", Publisher: pub, Faults: xidFaults{"1/": 48},
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

// TestFaultTaints: an Xid of a GPU as a whole taints every device it
// publishes (the whole GPU with MIG mode off, each MIG device with MIG
// mode on); one of a MIG device, that device only.
func TestFaultTaints(t *testing.T) {
	mk := func(idx int, migOn bool, uuids ...string) GPUState {
		g := GPUState{GPU: gpu.GPU{Index: idx, UUID: fmt.Sprintf("GPU-%d", idx), MIGMode: gpu.MIGMode{Current: migOn, Pending: migOn}}}
		for i, u := range uuids {
			g.Devices = append(g.Devices, gpu.MIGDevice{GPUIndex: idx, Profile: "1g.10gb", ProfileID: 19, Placement: mig.Placement{Start: i, Size: 1}, UUID: u})
		}
		return g
	}
	gpus := []GPUState{mk(0, true, "MIG-a", "MIG-b"), mk(1, true, "MIG-c", "MIG-d"), mk(2, false), mk(3, true, "MIG-e")}
	inv := &PoolInventory{NodeName: "n1", Faults: xidFaults{"0/": 48, "1/MIG-c": 94, "2/": 79}}
	got := map[string]string{}
	for name, taints := range inv.faultTaints(gpus) {
		for _, taint := range taints {
			got[name] = taint.Key + "=" + taint.Value
		}
	}
	want := map[string]string{
		"gpu-0-mig-1g10gb-19-0": "miglayout.io/xid=48", "gpu-0-mig-1g10gb-19-1": "miglayout.io/xid=48",
		"gpu-1-mig-1g10gb-19-0": "miglayout.io/xid=94",
		"gpu-2":                 "miglayout.io/xid=79",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Xid taints (-want +got):\n%s", diff)
	}
}
