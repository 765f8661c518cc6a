package agent

import (
	"context"
	"errors"
	"testing"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/resourceslice"
	testclock "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// countingReader serves the pool as last published and counts its reads.
type countingReader struct {
	strippingReader
	reads int
}

func (r *countingReader) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	r.reads++
	return r.strippingReader.List(ctx, list, opts...)
}

// TestPublishSameServedReadsNothing: a publication of the devices last
// found served, none drained, is not read back from the API server (every
// pass publishes; thousands of agents would list their slices every minute
// for nothing), until ServedRecheck has passed; a drain, other devices, a
// dropped-field report or a publish error since (a write of the slices
// failed), or a publication not served are read back.
func TestPublishSameServedReadsNothing(t *testing.T) {
	gpus := func(uuid string) []GPUState { return wholeGPU(t, uuid) }
	const device = "gpu-0-mig-7g80gb-0-0"
	pub := &droppingPublisher{}
	pub.served.Store(true)
	clk := testclock.NewFakePassiveClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	live := &countingReader{strippingReader: strippingReader{pub: &pub.capturePublisher, served: &pub.served}}
	inv := &PoolInventory{NodeName: "n1", Driver: "mig.miglayout.io", Publisher: pub, Clock: clk, Live: live, Timeout: 10 * time.Second}
	pub.inv = inv
	ctx := context.Background()
	publish := func(step string, g []GPUState, draining sets.Set[string], wantRead bool) {
		t.Helper()
		before := live.reads
		if err := inv.Publish(ctx, g, draining); err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		if read := live.reads > before; read != wantRead {
			t.Errorf("%s: pool read back %t, want %t", step, read, wantRead)
		}
	}
	publish("first publication", gpus("MIG-1"), nil, true)
	publish("the same again", gpus("MIG-1"), nil, false)
	clk.SetTime(clk.Now().Add(ServedRecheck - time.Second))
	publish("the same before ServedRecheck", gpus("MIG-1"), nil, false)
	clk.SetTime(clk.Now().Add(time.Second))
	publish("the same at ServedRecheck", gpus("MIG-1"), nil, true)
	publish("a drain", gpus("MIG-1"), sets.New(device), true)
	publish("the same drain again", gpus("MIG-1"), sets.New(device), true)
	publish("undrained", gpus("MIG-1"), nil, true)
	publish("a device made again (new UUID)", gpus("MIG-2"), nil, true)
	inv.DroppedFields(droppedTaints())
	publish("after a dropped-field report", gpus("MIG-2"), nil, true)
	publish("the same after it", gpus("MIG-2"), nil, false)
	inv.PublishError(errors.New("processing ResourceSlice objects: update resource slice: etcdserver: request timed out"))
	publish("after a publish error", gpus("MIG-2"), nil, true)
	publish("the same after that", gpus("MIG-2"), nil, false)

	// A publication not served is read back the next time.
	inv.Live = staleReader{}
	inv.Timeout = 100 * time.Millisecond
	if err := inv.Publish(ctx, gpus("MIG-3"), nil); err == nil {
		t.Fatal("a publication the API server does not serve succeeded")
	}
	inv.Live, inv.Timeout = live, 10*time.Second
	publish("the same as one that was not served", gpus("MIG-3"), nil, true)
}

// droppedTaints is a report that the API server stored a slice without
// the taint of its device.
func droppedTaints() *resourceslice.DroppedFieldsError {
	desired := &resourceapi.ResourceSlice{Spec: resourceapi.ResourceSliceSpec{Devices: []resourceapi.Device{{Name: "gpu-1",
		Taints: []resourceapi.DeviceTaint{{Key: "example.com/t", Effect: resourceapi.DeviceTaintEffectNoSchedule}}}}}}
	actual := desired.DeepCopy()
	actual.Spec.Devices[0].Taints = nil
	return &resourceslice.DroppedFieldsError{PoolName: "n1", DesiredSlice: desired, ActualSlice: actual}
}
