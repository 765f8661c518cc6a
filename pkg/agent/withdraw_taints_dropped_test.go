package agent

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/resourceslice"

	"github.com/miglayout/miglayout/pkg/mig"
	"github.com/miglayout/miglayout/pkg/mig/gpu"
)

// unwrittenPublisher stores nothing it is handed (its write has not landed,
// or failed) while the ResourceSlice controller reports, for some other
// write, that the API server dropped device taints.
type unwrittenPublisher struct{ inv *PoolInventory }

func (u *unwrittenPublisher) PublishResources(context.Context, resourceslice.DriverResources) error {
	go u.report()
	return nil
}

// report reports a slice of another write stored without its taint.
func (u *unwrittenPublisher) report() {
	desired := &resourceapi.ResourceSlice{Spec: resourceapi.ResourceSliceSpec{Devices: []resourceapi.Device{{Name: "d",
		Taints: []resourceapi.DeviceTaint{{Key: "k", Effect: resourceapi.DeviceTaintEffectNoSchedule}}}}}}
	actual := &resourceapi.ResourceSlice{Spec: resourceapi.ResourceSliceSpec{Devices: []resourceapi.Device{{Name: "d"}}}}
	u.inv.DroppedFields(&resourceslice.DroppedFieldsError{PoolName: "n1", DesiredSlice: desired, ActualSlice: actual})
}

// sevenSmallBesidePendingEnable is GPU 0 split into seven 1g.10gb devices,
// and GPU 1 with MIG mode off and waiting to be enabled: its pending
// change's taint is in every publication, the withdrawal's too.
func sevenSmallBesidePendingEnable(t *testing.T) []GPUState {
	t.Helper()
	a100, err := mig.DefaultCatalog().Model("A100-SXM4-80GB")
	if err != nil {
		t.Fatal(err)
	}
	p, err := a100.Profile("1g.10gb")
	if err != nil {
		t.Fatal(err)
	}
	g := GPUState{GPU: gpu.GPU{Index: 0, UUID: "GPU-0", ProductName: "NVIDIA A100-SXM4-80GB", Model: a100, MemoryMiB: 81920,
		MIGCapable: true, MIGMode: gpu.MIGMode{Current: true, Pending: true}}}
	for s := range 7 {
		g.Devices = append(g.Devices, gpu.MIGDevice{GPUIndex: 0, Profile: p.Name, ProfileID: p.ID, Placement: mig.Placement{Start: s, Size: 1},
			GIID: s + 1, UUID: fmt.Sprintf("MIG-0-%d", s), MemoryMiB: p.MemoryMiB, Multiprocessors: p.Multiprocessors})
	}
	pending := pendingEnableBesideMIGOff(t)[0]
	pending.GPU.Index, pending.GPU.UUID = 1, "GPU-1"
	return []GPUState{g, pending}
}

// TestWithdrawServedDespiteDroppedTaints: where the API server drops device
// taints, a withdrawal goes on (to destroy the withdrawn devices) only once
// the API server serves the pool without them; a report of dropped taints
// is no sign that the withdrawal was written.
func TestWithdrawServedDespiteDroppedTaints(t *testing.T) {
	for name, tc := range map[string]struct {
		wantWritten bool
	}{
		"written without its taints": {wantWritten: true},
		"not written":                {wantWritten: false},
	} {
		t.Run(name, func(t *testing.T) {
			gpus := sevenSmallBesidePendingEnable(t)
			ctx := context.Background()
			inv := &PoolInventory{NodeName: "n1", Driver: "mig.miglayout.io", Timeout: 500 * time.Millisecond}
			stored := &capturePublisher{}
			if tc.wantWritten {
				pub := &droppingPublisher{}
				pub.inv, inv.Publisher, stored = inv, pub, &pub.capturePublisher
			} else {
				pub := &unwrittenPublisher{inv: inv}
				inv.Publisher = pub
				// What the drain publication stored before the writes
				// stopped landing.
				if err := (&PoolInventory{NodeName: "n1", Driver: "mig.miglayout.io", Publisher: stored}).Publish(ctx, gpus, nil); err != nil {
					t.Fatal(err)
				}
			}
			inv.Live = strippingReader{pub: stored}
			r := &Repartitioner{Inventory: inv}
			x := inv.DeviceName(gpus[0].GPU, &gpus[0].Devices[3])
			err := r.withdraw(ctx, gpus, []*gpuPlan{{index: 0, drain: []string{x}}})

			served := sets.New[string]()
			for _, pool := range stored.last.Pools {
				for _, sl := range pool.Slices {
					for _, d := range sl.Devices {
						served.Insert(d.Name)
					}
				}
			}
			if served.Has(x) == tc.wantWritten {
				t.Fatalf("the API server serves %s: %t, want %t", x, served.Has(x), !tc.wantWritten)
			}
			switch {
			case tc.wantWritten && err != nil:
				t.Errorf("withdrawal served without its taints: %v, want nil (the pass goes on)", err)
			case !tc.wantWritten && err == nil:
				t.Errorf("withdrawal not served returned nil: the pass would destroy %s while the API server still publishes it", x)
			case !tc.wantWritten && errors.Is(err, ErrDrainTaintsDropped):
				t.Errorf("withdrawal not served: %v, want an error that is not ErrDrainTaintsDropped (which withdraw takes for served)", err)
			}
		})
	}
}

// reportingPublisher stores what it is handed, taints included (the API
// server serves taints), while the ResourceSlice controller reports, for
// another, older write, that taints were dropped.
type reportingPublisher struct {
	capturePublisher
	inv *PoolInventory
}

func (r *reportingPublisher) PublishResources(ctx context.Context, res resourceslice.DriverResources) error {
	_ = r.capturePublisher.PublishResources(ctx, res)
	(&unwrittenPublisher{inv: r.inv}).report()
	return nil
}

// TestDrainServedWithTaintsDespiteAnotherWritesReport: a report of dropped
// taints that is not this publication's (the API server serves its taints)
// does not fail the drain, nor leave later publications' pending taints
// out.
func TestDrainServedWithTaintsDespiteAnotherWritesReport(t *testing.T) {
	gpus := pendingEnableBesideMIGOff(t)
	inv := &PoolInventory{NodeName: "n1", Driver: "mig.miglayout.io", Timeout: 2 * time.Second}
	pub := &reportingPublisher{inv: inv}
	inv.Publisher = pub
	served := &atomic.Bool{}
	served.Store(true)
	inv.Live = strippingReader{pub: &pub.capturePublisher, served: served}
	if err := inv.Publish(context.Background(), gpus, sets.New("gpu-1")); err != nil {
		t.Errorf("drain served with its taints: %v, want nil", err)
	}
	if inv.pendingTaintsLeftOut() {
		t.Errorf("pending taints left out for PendingTaintsRetry, though the API server serves them")
	}
}
