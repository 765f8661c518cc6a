package agent

import (
	"context"
	"errors"
	"testing"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/resourceslice"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/miglayout/miglayout/pkg/mig"
	"github.com/miglayout/miglayout/pkg/mig/gpu"
)

// bindingDroppingServer is an API server without DRA device binding
// conditions: it stores each published slice without them, the
// ResourceSlice controller reporting it (DroppedFields), and serves what
// it stored.
type bindingDroppingServer struct {
	inv    *PoolInventory
	stored []resourceapi.ResourceSlice
}

func (s *bindingDroppingServer) PublishResources(_ context.Context, res resourceslice.DriverResources) error {
	s.stored = nil
	for name, pool := range res.Pools {
		for i, sl := range pool.Slices {
			desired := &resourceapi.ResourceSlice{Spec: resourceapi.ResourceSliceSpec{Driver: "mig.miglayout.io", NodeName: ptr.To("n1"),
				Pool: resourceapi.ResourcePool{Name: name}, Devices: sl.Devices}}
			actual := desired.DeepCopy()
			for j := range actual.Spec.Devices {
				actual.Spec.Devices[j].BindingConditions = nil
				actual.Spec.Devices[j].BindingFailureConditions = nil
			}
			s.stored = append(s.stored, *actual)
			s.inv.DroppedFields(&resourceslice.DroppedFieldsError{PoolName: name, SliceIndex: i, DesiredSlice: desired, ActualSlice: actual})
		}
	}
	return nil
}

func (s *bindingDroppingServer) Get(context.Context, client.ObjectKey, client.Object, ...client.GetOption) error {
	return errors.New("not served")
}

func (s *bindingDroppingServer) List(_ context.Context, list client.ObjectList, _ ...client.ListOption) error {
	list.(*resourceapi.ResourceSliceList).Items = append([]resourceapi.ResourceSlice(nil), s.stored...)
	return nil
}

// TestPublishFailsWhereBindingConditionsAreDropped: with binding
// conditions on, a publication the API server stores without them fails
// with ErrBindingConditionsDropped, rather than being taken for served.
func TestPublishFailsWhereBindingConditionsAreDropped(t *testing.T) {
	a100, err := mig.DefaultCatalog().Model("A100-SXM4-80GB")
	if err != nil {
		t.Fatal(err)
	}
	gpus := []GPUState{{GPU: gpu.GPU{Index: 0, UUID: "GPU-a", ProductName: "NVIDIA A100-SXM4-80GB", Model: a100, MemoryMiB: 81920, MIGCapable: true}}}
	srv := &bindingDroppingServer{}
	inv := &PoolInventory{NodeName: "n1", Driver: "mig.miglayout.io", Publisher: srv, Live: srv, Binding: &BindingGate{}, Timeout: 10 * time.Second}
	srv.inv = inv
	if err := inv.Publish(context.Background(), gpus, sets.New[string]()); !errors.Is(err, ErrBindingConditionsDropped) {
		t.Errorf("publication stored without its binding conditions: %v, want ErrBindingConditionsDropped", err)
	}
}
