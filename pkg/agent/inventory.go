package agent

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/dynamic-resource-allocation/resourceslice"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/miglayout/miglayout/pkg/mig/gpu"
	"github.com/miglayout/miglayout/pkg/slices"
)

// PoolInventory publishes the node's pool with the device model of package
// slices through a slices.Publisher (the kubelet plugin helper, whose
// ResourceSlice controller updates the node's slices in place).
//
// The helper writes slices asynchronously; Publish waits until the API server
// serves exactly the devices and drain taints just published, so that the
// settle period of a drain starts only once the scheduler can see the taint.
type PoolInventory struct {
	NodeName  string
	Driver    string
	Publisher slices.Publisher
	// Live reads ResourceSlices from the API server, bypassing caches.
	Live client.Reader
	// Timeout bounds the wait for the API server to serve a publication;
	// default 30 s.
	Timeout time.Duration
	// Binding, when set, publishes every device with binding conditions
	// (slices.RequireBinding) and is told each publication before it is
	// handed to the publisher.
	Binding *BindingGate

	// taintsDropped remembers that the API server served a publication
	// without its taints (ErrDrainTaintsDropped): later publications that
	// drain nothing leave out the taints of pending MIG mode changes
	// instead of waiting Timeout for them every pass.
	taintsDropped atomic.Bool
}

// Publish implements Inventory. GPU instances without a compute instance
// (a create interrupted by a crash) are not published: nothing can use them.
// The devices a pending MIG mode change removes at the GPU's next reset (the
// whole GPU while MIG waits to be enabled, its MIG devices while it waits to
// be disabled) are published tainted like draining ones, whoever asked for
// the change: no new claim is allocated a device about to disappear.
func (p *PoolInventory) Publish(ctx context.Context, gpus []GPUState, draining sets.Set[string]) error {
	if draining.Len() > 0 || !p.taintsDropped.Load() {
		draining = draining.Union(p.pendingRemoval(gpus))
	}
	all := make([]gpu.GPU, 0, len(gpus))
	migs := map[int][]gpu.MIGDevice{}
	for _, g := range gpus {
		all = append(all, g.GPU)
		for _, d := range g.Devices {
			if d.CIID >= 0 {
				migs[g.GPU.Index] = append(migs[g.GPU.Index], d)
			}
		}
	}
	res, err := slices.BuildPool(p.NodeName, all, migs, draining)
	if err != nil {
		return fmt.Errorf("building pool: %w", err)
	}
	if p.Binding != nil {
		slices.RequireBinding(&res)
		names := sets.New[string]()
		for k := range wantedKeys(res) {
			names.Insert(k.name)
		}
		p.Binding.Publishing(names, draining)
	}
	if err := p.Publisher.PublishResources(ctx, res); err != nil {
		return fmt.Errorf("publishing pool %s: %w", p.NodeName, err)
	}
	err = p.waitServed(ctx, res)
	switch {
	case errors.Is(err, ErrDrainTaintsDropped):
		p.taintsDropped.Store(true)
	case err == nil && draining.Len() > 0:
		p.taintsDropped.Store(false)
	}
	return err
}

// pendingRemoval returns the published names of the devices that a pending
// MIG mode change removes.
func (p *PoolInventory) pendingRemoval(gpus []GPUState) sets.Set[string] {
	out := sets.New[string]()
	for _, g := range gpus {
		switch m := g.GPU.MIGMode; {
		case m.Current == m.Pending:
		case !m.Current:
			out.Insert(p.DeviceName(g.GPU, nil))
		default:
			for i := range g.Devices {
				if g.Devices[i].CIID >= 0 {
					out.Insert(p.DeviceName(g.GPU, &g.Devices[i]))
				}
			}
		}
	}
	return out
}

// deviceKey is a device name with whether it carries the drain taint and
// binding conditions.
type deviceKey struct {
	name    string
	drained bool
	binding bool
}

func wantedKeys(res resourceslice.DriverResources) sets.Set[deviceKey] {
	out := sets.New[deviceKey]()
	for _, pool := range res.Pools {
		for _, sl := range pool.Slices {
			for _, d := range sl.Devices {
				out.Insert(deviceKey{d.Name, hasDrainTaint(d), len(d.BindingConditions) > 0})
			}
		}
	}
	return out
}

func hasDrainTaint(d resourceapi.Device) bool {
	for _, t := range d.Taints {
		if t.Key == slices.DrainTaint().Key {
			return true
		}
	}
	return false
}

// waitServed polls the API server until the node's slices of this driver
// hold exactly the published devices and taints.
func (p *PoolInventory) waitServed(ctx context.Context, res resourceslice.DriverResources) error {
	if p.Live == nil {
		return nil
	}
	timeout := p.Timeout
	if timeout == 0 {
		timeout = 30 * time.Second
	}
	want := wantedKeys(res)
	var got sets.Set[deviceKey]
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		var list resourceapi.ResourceSliceList
		if err := p.Live.List(ctx, &list, client.MatchingFields{"spec.nodeName": p.NodeName, "spec.driver": p.Driver}); err != nil {
			return false, nil // transient; keep polling until the timeout
		}
		got = sets.New[deviceKey]()
		for _, sl := range list.Items {
			if sl.Spec.Pool.Name != p.NodeName {
				continue
			}
			for _, d := range sl.Spec.Devices {
				got.Insert(deviceKey{d.Name, hasDrainTaint(d), len(d.BindingConditions) > 0})
			}
		}
		return got.Equal(want), nil
	})
	if err != nil {
		if bindingDropped(want, got) {
			return fmt.Errorf("waiting for the API server to serve pool %s: %w", p.NodeName, ErrBindingConditionsDropped)
		}
		if taintsDropped(want, got) {
			return fmt.Errorf("waiting for the API server to serve pool %s: %w", p.NodeName, ErrDrainTaintsDropped)
		}
		return fmt.Errorf("waiting for the API server to serve pool %s (%d devices wanted, %d served): %w", p.NodeName, want.Len(), got.Len(), err)
	}
	return nil
}

// ErrDrainTaintsDropped: the API server serves every device published but
// none of the drain taints. It drops device taints when the DRADeviceTaints
// feature is off (Kubernetes 1.34 and 1.35 by default), so no drain can
// keep the scheduler off a device: the agent refuses to repartition.
var ErrDrainTaintsDropped = errors.New("the API server drops the devices' drain taints: DRA device taints (feature gate DRADeviceTaints, on by default from Kubernetes 1.36) are off on this cluster, so devices cannot be drained before they are destroyed")

// ErrBindingConditionsDropped: the API server serves every device published
// but without binding conditions. It drops them where DRA device binding
// conditions are off (feature gate DRADeviceBindingConditions, and on 1.36
// DRAResourceClaimDeviceStatus; on by default from Kubernetes 1.36): the
// agent was started with --device-binding-conditions on a cluster that
// cannot honour them, and refuses to go on as if it could.
var ErrBindingConditionsDropped = errors.New("the API server drops the devices' binding conditions: DRA device binding conditions (feature gate DRADeviceBindingConditions, and on Kubernetes 1.36 DRAResourceClaimDeviceStatus; on by default from 1.36) are off on this cluster; turn them on in kube-apiserver and kube-scheduler, or run the agent without --device-binding-conditions")

// bindingDropped reports whether got has every device of want (with or
// without its taint), none with binding conditions, while want has them.
func bindingDropped(want, got sets.Set[deviceKey]) bool {
	served := sets.New[string]()
	for k := range got {
		if k.binding {
			return false
		}
		served.Insert(k.name)
	}
	binding := 0
	for k := range want {
		if !served.Has(k.name) {
			return false
		}
		if k.binding {
			binding++
		}
	}
	return binding > 0 && got.Len() == want.Len()
}

// taintsDropped reports whether got has every device of want, with no
// taint, while want taints some.
func taintsDropped(want, got sets.Set[deviceKey]) bool {
	tainted := 0
	for k := range want {
		if !got.Has(deviceKey{k.name, false, k.binding}) {
			return false
		}
		if k.drained {
			tainted++
		}
	}
	return tainted > 0 && got.Len() == want.Len()
}

// DeviceName implements Inventory with the names of package slices.
func (p *PoolInventory) DeviceName(g gpu.GPU, d *gpu.MIGDevice) string {
	if d == nil {
		return slices.GPUDeviceName(g.Index)
	}
	return slices.MIGDeviceName(g.Index, d.Profile, d.ProfileID, d.Placement.Start)
}
