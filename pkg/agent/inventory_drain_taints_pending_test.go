package agent

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/miglayout/miglayout/pkg/mig"
	"github.com/miglayout/miglayout/pkg/mig/gpu"
)

// TestDrainTaintsPendingModeChangeWhileTaintsLeftOut: taints were found
// dropped a moment ago, so publications that drain nothing leave out the
// taint of GPU 0's pending MIG mode change. A drain publication taints it
// all the same, beside the draining device; once such a drain is served
// with its taints, publications that drain nothing taint it again too.
func TestDrainTaintsPendingModeChangeWhileTaintsLeftOut(t *testing.T) {
	gpus := pendingEnableBesideMIGOff(t)
	pub := &droppingPublisher{}
	inv := &PoolInventory{NodeName: "n1", Driver: "mig.miglayout.io", Publisher: pub,
		Live: strippingReader{pub: &pub.capturePublisher, served: &pub.served}, Timeout: 10 * time.Second}
	pub.inv = inv
	ctx := context.Background()
	if err := inv.Publish(ctx, gpus, nil); !errors.Is(err, ErrDrainTaintsDropped) {
		t.Fatalf("first publication: %v, want ErrDrainTaintsDropped", err)
	}
	pub.served.Store(true) // DRADeviceTaints turned on since
	tainted := func() []string {
		var out []string
		for k := range wantedKeys(pub.last) {
			if k.drained {
				out = append(out, k.name)
			}
		}
		return sets.List(sets.New(out...))
	}
	if err := inv.Publish(ctx, gpus, nil); err != nil {
		t.Fatalf("publication draining nothing: %v", err)
	}
	if diff := cmp.Diff([]string{}, tainted()); diff != "" {
		t.Errorf("tainted devices of a publication draining nothing, taints found dropped a moment ago (-want +got):\n%s", diff)
	}
	if err := inv.Publish(ctx, gpus, sets.New("gpu-1")); err != nil {
		t.Fatalf("drain of gpu-1: %v, want it served", err)
	}
	if diff := cmp.Diff([]string{"gpu-0", "gpu-1"}, tainted()); diff != "" {
		t.Errorf("tainted devices of the drain of gpu-1 (-want +got):\n%s", diff)
	}
	if err := inv.Publish(ctx, gpus, nil); err != nil {
		t.Fatalf("publication after the drain: %v", err)
	}
	if diff := cmp.Diff([]string{"gpu-0"}, tainted()); diff != "" {
		t.Errorf("tainted devices of a publication draining nothing after a drain was served with its taints (-want +got):\n%s", diff)
	}
}

// pendingEnableBesideMIGOff is two A100s with MIG off: GPU 0 (GPU-a) with
// MIG mode on pending, GPU 1 (GPU-b) without.
func pendingEnableBesideMIGOff(t *testing.T) []GPUState {
	t.Helper()
	a100, err := mig.DefaultCatalog().Model("A100-SXM4-80GB")
	if err != nil {
		t.Fatal(err)
	}
	return []GPUState{{GPU: gpu.GPU{Index: 0, UUID: "GPU-a", ProductName: "NVIDIA A100-SXM4-80GB", Model: a100, MemoryMiB: 81920,
		MIGCapable: true, MIGMode: gpu.MIGMode{Current: false, Pending: true}}},
		{GPU: gpu.GPU{Index: 1, UUID: "GPU-b", ProductName: "NVIDIA A100-SXM4-80GB", Model: a100, MemoryMiB: 81920, MIGCapable: true}}}
}
