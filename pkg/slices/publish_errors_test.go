package slices

import (
	"context"
	"errors"
	"maps"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/resourceslice"

	"github.com/miglayout/miglayout/pkg/mig"
	"github.com/miglayout/miglayout/pkg/mig/gpu"
)

// recordingPublisher keeps what it is handed and answers err.
type recordingPublisher struct {
	got []resourceslice.DriverResources
	err error
}

func (p *recordingPublisher) PublishResources(_ context.Context, res resourceslice.DriverResources) error {
	p.got = append(p.got, res)
	return p.err
}

func publishInventory() Inventory {
	return Inventory{
		GPUs: []gpu.GPU{{Index: 0, UUID: "GPU-0", MIGMode: gpu.MIGMode{Current: true, Pending: true}}},
		MIGs: map[int][]gpu.MIGDevice{0: {
			{GPUIndex: 0, UUID: "MIG-a", Profile: "1g.10gb", ProfileID: 19, Placement: mig.Placement{Start: 0, Size: 1}, GIID: 1, CIID: 0},
			{GPUIndex: 0, UUID: "MIG-b", Profile: "1g.10gb", ProfileID: 19, Placement: mig.Placement{Start: 1, Size: 1}, GIID: 2, CIID: 0},
		}},
	}
}

// A pool that cannot be built (here: a node name that is no DNS subdomain)
// is not handed to the publisher at all: publishing an empty pool instead
// would withdraw every device of the node.
func TestPublishInvalidPoolPublishesNothing(t *testing.T) {
	p := &recordingPublisher{}
	err := Publish(t.Context(), p, "Node_A", publishInventory(), nil)
	if err == nil || !errors.Is(err, ErrInvalid) {
		t.Errorf("Publish(Node_A) = %v, want an error wrapping ErrInvalid", err)
	}
	if len(p.got) != 0 {
		t.Errorf("Publish(Node_A) handed %d pools to the publisher, want none: %+v", len(p.got), p.got)
	}
}

// Publish hands the pool, drain taints included, to the publisher, and
// returns the publisher's failure.
func TestPublishHandsPoolAndReturnsPublisherError(t *testing.T) {
	failed := errors.New("publisher stopped")
	p := &recordingPublisher{err: failed}
	err := Publish(t.Context(), p, "node-a", publishInventory(), sets.New("gpu-0-mig-1g10gb-19-1"))
	if !errors.Is(err, failed) || !strings.Contains(err.Error(), "node-a") {
		t.Errorf("Publish with a failing publisher = %v, want an error naming node-a and wrapping %v", err, failed)
	}
	if len(p.got) != 1 {
		t.Fatalf("publisher handed %d pools, want 1", len(p.got))
	}
	tainted := map[string]int{}
	for _, s := range p.got[0].Pools["node-a"].Slices {
		for _, d := range s.Devices {
			tainted[d.Name] = len(d.Taints)
		}
	}
	if want := map[string]int{"gpu-0-mig-1g10gb-19-0": 0, "gpu-0-mig-1g10gb-19-1": 1}; !maps.Equal(tainted, want) {
		t.Errorf("published devices and their taint counts %v, want %v", tainted, want)
	}
}
