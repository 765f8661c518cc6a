package agent

import (
	"context"
	"testing"

	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/miglayout/miglayout/pkg/mig"
	"github.com/miglayout/miglayout/pkg/mig/gpu"
)

// TestPublishTellsTheBindingGate: with binding conditions on, each
// publication tells the gate what it publishes and drains, before the
// publisher gets it: an allocation of a published device is confirmed, one
// of a draining device or of a device not published is refused.
func TestPublishTellsTheBindingGate(t *testing.T) {
	a100, err := mig.DefaultCatalog().Model("A100-SXM4-80GB")
	if err != nil {
		t.Fatal(err)
	}
	gpus := []GPUState{
		{GPU: gpu.GPU{Index: 0, UUID: "GPU-a", ProductName: "NVIDIA A100-SXM4-80GB", Model: a100, MemoryMiB: 81920, MIGCapable: true}},
		{GPU: gpu.GPU{Index: 1, UUID: "GPU-b", ProductName: "NVIDIA A100-SXM4-80GB", Model: a100, MemoryMiB: 81920, MIGCapable: true}},
	}
	gate := &BindingGate{}
	pub := &capturePublisher{}
	inv := &PoolInventory{NodeName: "n1", Driver: "mig.miglayout.io", Publisher: pub, Binding: gate}
	if err := inv.Publish(context.Background(), gpus, sets.New("gpu-1")); err != nil {
		t.Fatal(err)
	}
	for dev, want := range map[string]BindingDecision{"gpu-0": BindingConfirm, "gpu-1": BindingRefuse, "gpu-2": BindingRefuse} {
		if got := gate.Decide(dev); got != want {
			t.Errorf("Decide(%s) after the publication = %v, want %v", dev, got, want)
		}
	}
	for k := range wantedKeys(pub.last) {
		if !k.binding {
			t.Errorf("device %s published without binding conditions", k.name)
		}
	}
}
