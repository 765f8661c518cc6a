package agent

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/resourceslice"

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

// TestPublishRefusedSaysWhy: a publication whose slices the API server
// refuses for good (an admission policy's Forbidden, an Invalid slice)
// fails at once with ErrSlicesRefused and the API server's message, rather
// than after the wait's timeout with a bare deadline; one refused for a
// reason a retry may mend (a conflict) times out naming it.
func TestPublishRefusedSaysWhy(t *testing.T) {
	slicesGR := schema.GroupResource{Group: "resource.k8s.io", Resource: "resourceslices"}
	for name, tc := range map[string]struct {
		err         error
		timeout     time.Duration
		wantRefused bool
	}{
		"Forbidden by a policy": {err: apierrors.NewForbidden(slicesGR, "n1-abc", errors.New("ValidatingAdmissionPolicy 'miglayout-agent-node-scope' denied request")),
			timeout: 5 * time.Second, wantRefused: true},
		"Invalid": {err: apierrors.NewInvalid(schema.GroupKind{Group: "resource.k8s.io", Kind: "ResourceSlice"}, "n1-abc", nil),
			timeout: 5 * time.Second, wantRefused: true},
		"a conflict": {err: apierrors.NewConflict(slicesGR, "n1-abc", errors.New("the object has been modified")),
			timeout: 200 * time.Millisecond},
	} {
		t.Run(name, func(t *testing.T) {
			inv := &PoolInventory{NodeName: "n1", Driver: "mig.miglayout.io", Live: staleReader{}, Timeout: tc.timeout}
			inv.Publisher = &failingWritePublisher{inv: inv, err: tc.err}
			err := inv.Publish(context.Background(), oneA100(t), sets.New("gpu-0"))
			if got := errors.Is(err, ErrSlicesRefused); got != tc.wantRefused {
				t.Errorf("publication refused: %v; ErrSlicesRefused %v, want %v", err, got, tc.wantRefused)
			}
			if err == nil || !errors.Is(err, tc.err) || !strings.Contains(err.Error(), tc.err.Error()) {
				t.Errorf("publication refused: %v, want the API server's error %q wrapped", err, tc.err)
			}
		})
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
