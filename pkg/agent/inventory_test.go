package agent

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/resourceslice"
	testclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/miglayout/miglayout/pkg/mig"
	"github.com/miglayout/miglayout/pkg/mig/gpu"
	migslices "github.com/miglayout/miglayout/pkg/slices"
)

// capturePublisher keeps the last pool handed to it.
type capturePublisher struct{ last resourceslice.DriverResources }

func (c *capturePublisher) PublishResources(_ context.Context, res resourceslice.DriverResources) error {
	c.last = res
	return nil
}

// TestPublishTaintsPendingModeChange: the devices a pending MIG mode change
// removes at the GPU's next reset are published with the drain taint, like
// draining ones (nothing new is allocated a device about to disappear);
// devices of GPUs without a pending change are tainted only when draining.
func TestPublishTaintsPendingModeChange(t *testing.T) {
	a100, err := mig.DefaultCatalog().Model("A100-SXM4-80GB")
	if err != nil {
		t.Fatal(err)
	}
	g := func(idx int, current, pending bool) gpu.GPU {
		return gpu.GPU{Index: idx, UUID: "GPU-" + string(rune('a'+idx)), ProductName: "NVIDIA A100-SXM4-80GB", Model: a100,
			MemoryMiB: 81920, MIGCapable: true, MIGMode: gpu.MIGMode{Current: current, Pending: pending}}
	}
	mdev := func(gi int, prof string, start int) gpu.MIGDevice {
		p, err := a100.Profile(prof)
		if err != nil {
			t.Fatal(err)
		}
		return gpu.MIGDevice{GPUIndex: gi, Profile: prof, ProfileID: p.ID, Placement: mig.Placement{Start: start, Size: p.Placements[0].Size},
			GIID: start + 1, CIID: 0, UUID: "MIG-" + prof, MemoryMiB: p.MemoryMiB}
	}
	tests := map[string]struct {
		gpus     []GPUState
		draining sets.Set[string]
		want     []string // tainted devices
	}{
		"enable pending: the whole GPU goes at the reset": {
			gpus: []GPUState{{GPU: g(0, false, true)}, {GPU: g(1, false, false)}},
			want: []string{"gpu-0"},
		},
		"disable pending: the MIG devices go": {
			gpus: []GPUState{{GPU: g(0, true, false), Devices: []gpu.MIGDevice{mdev(0, "3g.40gb", 0), mdev(0, "3g.40gb", 4)}}},
			want: []string{"gpu-0-mig-3g40gb-9-0", "gpu-0-mig-3g40gb-9-4"},
		},
		"no change pending: only what drains": {
			gpus:     []GPUState{{GPU: g(0, true, true), Devices: []gpu.MIGDevice{mdev(0, "3g.40gb", 0), mdev(0, "3g.40gb", 4)}}, {GPU: g(1, false, false)}},
			draining: sets.New("gpu-0-mig-3g40gb-9-4"),
			want:     []string{"gpu-0-mig-3g40gb-9-4"},
		},
		"pending and draining together": {
			gpus:     []GPUState{{GPU: g(0, false, true)}, {GPU: g(1, true, true), Devices: []gpu.MIGDevice{mdev(1, "7g.80gb", 0)}}},
			draining: sets.New("gpu-1-mig-7g80gb-0-0"),
			want:     []string{"gpu-0", "gpu-1-mig-7g80gb-0-0"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			pub := &capturePublisher{}
			inv := &PoolInventory{NodeName: "n1", Driver: "mig.miglayout.io", Publisher: pub}
			if err := inv.Publish(context.Background(), tc.gpus, tc.draining); err != nil {
				t.Fatal(err)
			}
			var tainted []string
			for k := range wantedKeys(pub.last) {
				if k.drained {
					tainted = append(tainted, k.name)
				}
			}
			if diff := cmp.Diff(tc.want, sets.List(sets.New(tainted...))); diff != "" {
				t.Errorf("tainted devices (-want +got):\n%s", diff)
			}
		})
	}
}

// strippingReader serves what capturePublisher was last handed, as the
// API server does where DRA device taints are off: without taints.
type strippingReader struct {
	client.Reader
	pub *capturePublisher
	// served, when set and true, serves taints (DRADeviceTaints turned on).
	served *atomic.Bool
}

func (r strippingReader) List(_ context.Context, list client.ObjectList, _ ...client.ListOption) error {
	out := list.(*resourceapi.ResourceSliceList)
	out.Items = nil
	for name, pool := range r.pub.last.Pools {
		for _, sl := range pool.Slices {
			devs := make([]resourceapi.Device, len(sl.Devices))
			for i, d := range sl.Devices {
				if r.served == nil || !r.served.Load() {
					d.Taints = nil
				}
				devs[i] = d
			}
			out.Items = append(out.Items, resourceapi.ResourceSlice{Spec: resourceapi.ResourceSliceSpec{
				Driver: "mig.miglayout.io", NodeName: ptr.To("n1"), Pool: resourceapi.ResourcePool{Name: name}, Devices: devs}})
		}
	}
	return nil
}

// droppingPublisher captures a publication and, where it has taints,
// reports them dropped as the ResourceSlice controller does when the API
// server stores slices without them (strippingReader serves them so).
type droppingPublisher struct {
	capturePublisher
	inv *PoolInventory
	// served: the API server stores taints (DRADeviceTaints turned on).
	served atomic.Bool
}

func (d *droppingPublisher) PublishResources(ctx context.Context, res resourceslice.DriverResources) error {
	_ = d.capturePublisher.PublishResources(ctx, res)
	if d.served.Load() {
		return nil
	}
	for name, pool := range res.Pools {
		for i, sl := range pool.Slices {
			desired := &resourceapi.ResourceSlice{Spec: resourceapi.ResourceSliceSpec{Devices: sl.Devices}}
			actual := desired.DeepCopy()
			dropped := false
			for j := range actual.Spec.Devices {
				dropped = dropped || len(actual.Spec.Devices[j].Taints) > 0
				actual.Spec.Devices[j].Taints = nil
			}
			if dropped {
				go d.inv.DroppedFields(&resourceslice.DroppedFieldsError{PoolName: name, SliceIndex: i, DesiredSlice: desired, ActualSlice: actual})
			}
		}
	}
	return nil
}

// TestPublishPendingTaintsDropped: where the API server drops device taints,
// the first publication with a pending MIG mode change's taint reports
// ErrDrainTaintsDropped; later ones that drain nothing publish without that
// taint and do not wait for it again; a drain still tries its taints.
func TestPublishPendingTaintsDropped(t *testing.T) {
	gpus := pendingEnableBesideMIGOff(t)
	pub := &droppingPublisher{}
	inv := &PoolInventory{NodeName: "n1", Driver: "mig.miglayout.io", Publisher: pub, Live: strippingReader{pub: &pub.capturePublisher}, Timeout: 10 * time.Second}
	pub.inv = inv
	ctx := context.Background()
	if err := inv.Publish(ctx, gpus, nil); !errors.Is(err, ErrDrainTaintsDropped) {
		t.Fatalf("first publication: %v, want ErrDrainTaintsDropped", err)
	}
	for range 3 {
		if err := inv.Publish(ctx, gpus, nil); err != nil {
			t.Fatalf("publication after taints were found dropped: %v, want nil", err)
		}
		for k := range wantedKeys(pub.last) {
			if k.drained {
				t.Errorf("device %s published tainted after taints were found dropped", k.name)
			}
		}
	}
	if err := inv.Publish(ctx, gpus, sets.New("gpu-1")); !errors.Is(err, ErrDrainTaintsDropped) {
		t.Errorf("drain: %v, want ErrDrainTaintsDropped (taints tried again)", err)
	}
}

// TestPublishPendingTaintsRetried: taints found dropped are left out of the
// pending MIG mode change's device for PendingTaintsRetry only: once the
// API server serves taints (DRADeviceTaints turned on while the agent
// runs), the device is published tainted again after that time, though no
// drain on the node ever served a taint meanwhile.
func TestPublishPendingTaintsRetried(t *testing.T) {
	a100, err := mig.DefaultCatalog().Model("A100-SXM4-80GB")
	if err != nil {
		t.Fatal(err)
	}
	gpus := []GPUState{{GPU: gpu.GPU{Index: 0, UUID: "GPU-a", ProductName: "NVIDIA A100-SXM4-80GB", Model: a100, MemoryMiB: 81920,
		MIGCapable: true, MIGMode: gpu.MIGMode{Current: false, Pending: true}}}}
	pub := &droppingPublisher{}
	clk := testclock.NewFakePassiveClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	inv := &PoolInventory{NodeName: "n1", Driver: "mig.miglayout.io", Publisher: pub, Clock: clk,
		Live: strippingReader{pub: &pub.capturePublisher, served: &pub.served}, Timeout: 10 * time.Second}
	pub.inv = inv
	ctx := context.Background()
	if err := inv.Publish(ctx, gpus, nil); !errors.Is(err, ErrDrainTaintsDropped) {
		t.Fatalf("first publication: %v, want ErrDrainTaintsDropped", err)
	}
	pub.served.Store(true)
	tainted := func() bool {
		for k := range wantedKeys(pub.last) {
			if k.name == "gpu-0" && k.drained {
				return true
			}
		}
		return false
	}
	clk.SetTime(clk.Now().Add(PendingTaintsRetry - time.Second))
	if err := inv.Publish(ctx, gpus, nil); err != nil || tainted() {
		t.Fatalf("publication within PendingTaintsRetry: err %v, gpu-0 tainted %t; want nil and untainted", err, tainted())
	}
	clk.SetTime(clk.Now().Add(time.Second))
	for i := range 2 {
		if err := inv.Publish(ctx, gpus, nil); err != nil {
			t.Fatalf("publication %d after PendingTaintsRetry: %v", i, err)
		}
		if !tainted() {
			t.Errorf("publication %d after PendingTaintsRetry: gpu-0 (MIG enable pending) published untainted though the API server serves taints now", i)
		}
	}
}

// staleReader serves the pool as it was before any publication: the API
// server never got the updates (refused, or the controller backs off).
type staleReader struct{ client.Reader }

func (staleReader) List(_ context.Context, list client.ObjectList, _ ...client.ListOption) error {
	list.(*resourceapi.ResourceSliceList).Items = []resourceapi.ResourceSlice{{Spec: resourceapi.ResourceSliceSpec{
		Driver: "mig.miglayout.io", NodeName: ptr.To("n1"), Pool: resourceapi.ResourcePool{Name: "n1"},
		Devices: []resourceapi.Device{{Name: "gpu-0"}, {Name: "gpu-1"}}}}}
	return nil
}

// TestPublishNotServedIsNotTaintsDropped: a publication the API server does
// not serve in time, with no report of dropped fields, is a plain timeout:
// not taken for DRA device taints being off, so later publications still
// taint the devices a pending MIG mode change removes.
func TestPublishNotServedIsNotTaintsDropped(t *testing.T) {
	a100, err := mig.DefaultCatalog().Model("A100-SXM4-80GB")
	if err != nil {
		t.Fatal(err)
	}
	gpus := []GPUState{{GPU: gpu.GPU{Index: 0, UUID: "GPU-a", ProductName: "NVIDIA A100-SXM4-80GB", Model: a100, MemoryMiB: 81920, MIGCapable: true}},
		{GPU: gpu.GPU{Index: 1, UUID: "GPU-b", ProductName: "NVIDIA A100-SXM4-80GB", Model: a100, MemoryMiB: 81920,
			MIGCapable: true, MIGMode: gpu.MIGMode{Current: false, Pending: true}}}}
	pub := &capturePublisher{}
	inv := &PoolInventory{NodeName: "n1", Driver: "mig.miglayout.io", Publisher: pub, Live: staleReader{}, Timeout: 200 * time.Millisecond}
	ctx := context.Background()
	err = inv.Publish(ctx, gpus, sets.New("gpu-0"))
	if err == nil || errors.Is(err, ErrDrainTaintsDropped) {
		t.Fatalf("drain never served: %v, want a timeout, not ErrDrainTaintsDropped", err)
	}
	_ = inv.Publish(ctx, gpus, nil)
	tainted := false
	for k := range wantedKeys(pub.last) {
		tainted = tainted || k.name == "gpu-1" && k.drained
	}
	if !tainted {
		t.Errorf("gpu-1 (MIG enable pending) published without the drain taint after a timeout")
	}
}

// forbiddenReader refuses every list, as an API server does where the
// agent's RBAC lacks list on ResourceSlices.
type forbiddenReader struct{ client.Reader }

func (forbiddenReader) List(context.Context, client.ObjectList, ...client.ListOption) error {
	return apierrors.NewForbidden(resourceapi.Resource("resourceslices"), "", errors.New("RBAC: list not allowed"))
}

// TestPublishNotReadableSaysWhy: where the pool cannot be read back at all,
// the publication's error names the read's error, not only the timeout
// (nor "0 served", as though the slices had been read).
func TestPublishNotReadableSaysWhy(t *testing.T) {
	a100, err := mig.DefaultCatalog().Model("A100-SXM4-80GB")
	if err != nil {
		t.Fatal(err)
	}
	gpus := []GPUState{{GPU: gpu.GPU{Index: 0, UUID: "GPU-a", ProductName: "NVIDIA A100-SXM4-80GB", Model: a100, MemoryMiB: 81920, MIGCapable: true}}}
	inv := &PoolInventory{NodeName: "n1", Driver: "mig.miglayout.io", Publisher: &capturePublisher{}, Live: forbiddenReader{}, Timeout: 200 * time.Millisecond}
	err = inv.Publish(context.Background(), gpus, nil)
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "RBAC: list not allowed") {
		t.Errorf("publication with the pool unreadable: %v, want the Forbidden error of the list", err)
	}
}

// oldUUIDReader serves the pool as last published, except that for its
// first stale reads the device named keeps the "uuid" attribute it had
// before: the API server still serves a device of that name destroyed and
// made again at the same placement.
type oldUUIDReader struct {
	client.Reader
	pub     *capturePublisher
	device  string
	stale   int
	listing int
}

func (r *oldUUIDReader) List(_ context.Context, list client.ObjectList, _ ...client.ListOption) error {
	r.listing++
	var items []resourceapi.ResourceSlice
	for name, pool := range r.pub.last.Pools {
		for _, sl := range pool.Slices {
			devices := make([]resourceapi.Device, len(sl.Devices))
			for i, d := range sl.Devices {
				d = *d.DeepCopy()
				if d.Name == r.device && r.listing <= r.stale {
					d.Attributes[migslices.AttrUUID] = resourceapi.DeviceAttribute{StringValue: ptr.To("MIG-old")}
				}
				devices[i] = d
			}
			items = append(items, resourceapi.ResourceSlice{Spec: resourceapi.ResourceSliceSpec{
				Driver: "mig.miglayout.io", NodeName: ptr.To(name), Pool: resourceapi.ResourcePool{Name: name}, Devices: devices}})
		}
	}
	list.(*resourceapi.ResourceSliceList).Items = items
	return nil
}

// wholeA100 is the catalog's A100-SXM4-80GB and its 7g.80gb profile.
func wholeA100(t *testing.T) (*mig.Model, *mig.Profile) {
	t.Helper()
	a100, err := mig.DefaultCatalog().Model("A100-SXM4-80GB")
	if err != nil {
		t.Fatal(err)
	}
	p, err := a100.Profile("7g.80gb")
	if err != nil {
		t.Fatal(err)
	}
	return a100, p
}

// wholeGPU is GPU 0, an A100 with MIG on and one 7g.80gb device of uuid.
func wholeGPU(t *testing.T, uuid string) []GPUState {
	t.Helper()
	a100, p := wholeA100(t)
	return []GPUState{{GPU: gpu.GPU{Index: 0, UUID: "GPU-a", ProductName: "NVIDIA A100-SXM4-80GB", Model: a100, MemoryMiB: 81920,
		MIGCapable: true, MIGMode: gpu.MIGMode{Current: true, Pending: true}},
		Devices: []gpu.MIGDevice{{Profile: "7g.80gb", ProfileID: p.ID, Placement: p.Placements[0], GIID: 0, CIID: 0, UUID: uuid, MemoryMiB: p.MemoryMiB}}}}
}

// TestPublishWaitsForNewUUIDs: a publication is served once the API server
// shows each device with the UUID published, not only its name: a MIG
// device made again at the same placement has a new UUID.
func TestPublishWaitsForNewUUIDs(t *testing.T) {
	gpus := wholeGPU(t, "MIG-new")
	pub := &capturePublisher{}
	live := &oldUUIDReader{pub: pub, device: "gpu-0-mig-7g80gb-0-0", stale: 3}
	inv := &PoolInventory{NodeName: "n1", Driver: "mig.miglayout.io", Publisher: pub, Live: live, Timeout: 10 * time.Second}
	if err := inv.Publish(context.Background(), gpus, nil); err != nil {
		t.Fatalf("Publish: %v", err)
	}
	if live.listing <= live.stale {
		t.Errorf("Publish returned after %d reads, while the first %d served the old UUID", live.listing, live.stale)
	}
}
