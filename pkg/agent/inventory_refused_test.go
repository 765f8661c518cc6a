package agent

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/resourceslice"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/miglayout/miglayout/pkg/mig"
	"github.com/miglayout/miglayout/pkg/mig/gpu"
)

// failingWritePublisher takes each publication as the ResourceSlice
// controller does, and then reports err writing it (PublishError), as the
// kubelet plugin's error handler does.
type failingWritePublisher struct {
	capturePublisher
	inv *PoolInventory
	err error
}

func (f *failingWritePublisher) PublishResources(ctx context.Context, res resourceslice.DriverResources) error {
	_ = f.capturePublisher.PublishResources(ctx, res)
	if f.err != nil {
		f.inv.PublishError(fmt.Errorf("processing ResourceSlice objects: update resource slice: %w", f.err))
	}
	return nil
}

func oneA100(t *testing.T) []GPUState {
	t.Helper()
	a100, err := mig.DefaultCatalog().Model("A100-SXM4-80GB")
	if err != nil {
		t.Fatal(err)
	}
	return []GPUState{{GPU: gpu.GPU{Index: 0, UUID: "GPU-a", ProductName: "NVIDIA A100-SXM4-80GB", Model: a100, MemoryMiB: 81920, MIGCapable: true}}}
}

// TestPublishRefusedSaysWhy: a publication the API server does not serve
// because it refuses the slices' writes (an admission policy's Forbidden,
// an Invalid slice, a conflict) times out naming the API server's error,
// not only the deadline.
func TestPublishRefusedSaysWhy(t *testing.T) {
	slicesGR := schema.GroupResource{Group: "resource.k8s.io", Resource: "resourceslices"}
	for name, refused := range map[string]error{
		"Forbidden by a policy": apierrors.NewForbidden(slicesGR, "n1-abc", errors.New("ValidatingAdmissionPolicy 'miglayout-agent-node-scope' denied request")),
		"Invalid":               apierrors.NewInvalid(schema.GroupKind{Group: "resource.k8s.io", Kind: "ResourceSlice"}, "n1-abc", nil),
		"a conflict":            apierrors.NewConflict(slicesGR, "n1-abc", errors.New("the object has been modified")),
	} {
		t.Run(name, func(t *testing.T) {
			inv := &PoolInventory{NodeName: "n1", Driver: "mig.miglayout.io", Live: staleReader{}, Timeout: 200 * time.Millisecond}
			inv.Publisher = &failingWritePublisher{inv: inv, err: refused}
			err := inv.Publish(context.Background(), oneA100(t), sets.New("gpu-0"))
			if err == nil || !errors.Is(err, refused) || !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), refused.Error()) {
				t.Errorf("publication refused: %v, want the timeout with the API server's error %q", err, refused)
			}
		})
	}
}

// TestPublishServedDespiteAnotherWritesError: a publish error reported
// while a publication is served (a write of another pool of the driver
// refused, an earlier publication's retry) does not fail it.
func TestPublishServedDespiteAnotherWritesError(t *testing.T) {
	served := &atomic.Bool{}
	served.Store(true)
	forbidden := apierrors.NewForbidden(schema.GroupResource{Group: "resource.k8s.io", Resource: "resourceslices"}, "other-pool-abc", errors.New("denied"))
	pub := &failingWritePublisher{err: forbidden}
	inv := &PoolInventory{NodeName: "n1", Driver: "mig.miglayout.io", Publisher: pub,
		Live: strippingReader{pub: &pub.capturePublisher, served: served}, Timeout: 10 * time.Second}
	pub.inv = inv
	if err := inv.Publish(context.Background(), oneA100(t), sets.New("gpu-0")); err != nil {
		t.Errorf("a served publication failed on another write's error: %v", err)
	}
}

// TestNewestGenerationKeys: the devices of a pool are those of its newest
// generation: a slice of an older one, still listed while the newer one is
// written, does not count (the scheduler ignores it), nor does another
// pool's.
func TestNewestGenerationKeys(t *testing.T) {
	slice := func(pool string, gen int64, devices ...string) resourceapi.ResourceSlice {
		sl := resourceapi.ResourceSlice{Spec: resourceapi.ResourceSliceSpec{Pool: resourceapi.ResourcePool{Name: pool, Generation: gen, ResourceSliceCount: 2}}}
		for _, d := range devices {
			sl.Spec.Devices = append(sl.Spec.Devices, resourceapi.Device{Name: d})
		}
		return sl
	}
	got := newestGenerationKeys([]resourceapi.ResourceSlice{
		slice("n1", 2, "gpu-0"), slice("n1", 1, "gpu-1"), slice("n1", 3, "gpu-2"), slice("n2", 4, "gpu-3"),
	}, "n1")
	if want := sets.New(deviceKey{name: "gpu-2"}); !got.Equal(want) {
		t.Errorf("devices %v, want %v (generation 3's alone)", got.UnsortedList(), want.UnsortedList())
	}
}

// olderGenerationReader serves the devices last published in a slice of
// generation 1 beside a slice of generation 2 without them: the new
// generation not written whole yet.
type olderGenerationReader struct {
	client.Reader
	pub *capturePublisher
}

func (r olderGenerationReader) List(_ context.Context, list client.ObjectList, _ ...client.ListOption) error {
	out := list.(*resourceapi.ResourceSliceList)
	out.Items = []resourceapi.ResourceSlice{{Spec: resourceapi.ResourceSliceSpec{Driver: "mig.miglayout.io",
		Pool: resourceapi.ResourcePool{Name: "n1", Generation: 2, ResourceSliceCount: 2}}}}
	for name, pool := range r.pub.last.Pools {
		for _, sl := range pool.Slices {
			out.Items = append(out.Items, resourceapi.ResourceSlice{Spec: resourceapi.ResourceSliceSpec{Driver: "mig.miglayout.io",
				Pool: resourceapi.ResourcePool{Name: name, Generation: 1, ResourceSliceCount: 1}, Devices: sl.Devices}})
		}
	}
	return nil
}

// TestPublishNotServedByAnOlderGeneration: devices listed only in a slice
// of an older generation than the pool's newest are not served (the
// scheduler reads the newest generation alone): the publication waits.
func TestPublishNotServedByAnOlderGeneration(t *testing.T) {
	pub := &capturePublisher{}
	inv := &PoolInventory{NodeName: "n1", Driver: "mig.miglayout.io", Publisher: pub, Live: olderGenerationReader{pub: pub}, Timeout: 200 * time.Millisecond}
	if err := inv.Publish(context.Background(), oneA100(t), nil); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("publication served only by an older generation: %v, want a timeout", err)
	}
}
