package agent

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"sync/atomic"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/dynamic-resource-allocation/resourceslice"
	"k8s.io/utils/clock"
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
	// Faults, when set, names the devices a hardware error hit (the kubelet
	// plugin's Xid marks): they are published with slices.XidTaint, left
	// out with the taints of pending MIG mode changes where the API server
	// drops taints.
	Faults DeviceFaults

	// Clock tells when taints were last found dropped; default the real
	// clock.
	Clock clock.PassiveClock

	// taintsDroppedAt is when the API server was last found storing a
	// publication without its taints (ErrDrainTaintsDropped), in Unix
	// nanoseconds, 0 for never: for PendingTaintsRetry after it,
	// publications that drain nothing leave out the taints of pending MIG
	// mode changes instead of failing on them every pass, then try them
	// again (the cluster's DRADeviceTaints may have been turned on since).
	taintsDroppedAt atomic.Int64

	droppedMu sync.Mutex
	// dropped counts, by DRA feature, the reports that the API server
	// dropped fields needing it (DroppedFields).
	dropped map[string]int

	publishErrMu sync.Mutex
	// publishErrs counts the errors of the ResourceSlice controller
	// writing this agent's slices (PublishError); lastPublishErr is the
	// last of them.
	publishErrs    int
	lastPublishErr error

	servedMu sync.Mutex
	// served is the last publication the API server was found serving
	// (waitServed); zero after one that was not.
	served servedPublication
	// deletions counts the pool deletions Republish was told of: a
	// publication found served before one is not recorded as served.
	deletions int

	// handMu makes Publish and Republish hand their publications to the
	// publisher one at a time; handed is the last one handed (nil before
	// the first).
	handMu sync.Mutex
	handed *resourceslice.DriverResources
}

// servedPublication is a publication's devices (wantedKeys) found served at
// a time, with the dropped-field reports and the publish errors counted
// before it was handed.
type servedPublication struct {
	keys    sets.Set[deviceKey]
	at      time.Time
	dropped map[string]int
	errs    int
}

// ServedRecheck is how long a publication found served is taken for
// served still: a pass that publishes the same devices (none drained)
// within it does not read the pool back from the API server. Every pass
// publishes, at least once a resync period, and the read bypasses caches:
// thousands of agents would list their slices every minute for nothing.
// Past it, the read shows a pool the API server lost (slices deleted and
// not made again).
const ServedRecheck = 10 * time.Minute

// DroppedFields records a report of the ResourceSlice controller that the
// API server stored a slice of this agent's without some fields (through
// the kubelet plugin's error handler, plugin.Config.OnDroppedFields): the
// certain sign that a DRA feature the slice uses is off. A publication
// waiting to be served fails with ErrDrainTaintsDropped (once served,
// taints aside) or ErrBindingConditionsDropped (at once) when such a report
// names DRADeviceTaints or DRADeviceBindingConditions.
func (p *PoolInventory) DroppedFields(err *resourceslice.DroppedFieldsError) {
	p.droppedMu.Lock()
	defer p.droppedMu.Unlock()
	if p.dropped == nil {
		p.dropped = map[string]int{}
	}
	for _, f := range err.DisabledFeatures() {
		p.dropped[f]++
	}
}

// PublishError records an error of the ResourceSlice controller writing
// this agent's slices (through the kubelet plugin's error handler,
// plugin.Config.OnPublishError), which the controller retries. A
// publication waiting to be served that times out names the last such
// error (the API server's reason where it refused a write), and a
// publication found served before any error since is no longer taken for
// served without a read.
func (p *PoolInventory) PublishError(err error) {
	p.publishErrMu.Lock()
	defer p.publishErrMu.Unlock()
	p.publishErrs++
	p.lastPublishErr = err
}

// publishErrors returns how many publish errors were recorded so far, and
// the last.
func (p *PoolInventory) publishErrors() (int, error) {
	p.publishErrMu.Lock()
	defer p.publishErrMu.Unlock()
	return p.publishErrs, p.lastPublishErr
}

// droppedReports returns how many reports named feature so far.
func (p *PoolInventory) droppedReports(feature string) int {
	p.droppedMu.Lock()
	defer p.droppedMu.Unlock()
	return p.dropped[feature]
}

// DRA features whose fields a publication may carry.
const (
	featureDeviceTaints      = "DRADeviceTaints"
	featureBindingConditions = "DRADeviceBindingConditions"
)

// Publish implements Inventory. GPU instances without a compute instance
// (a create interrupted by a crash) are not published: nothing can use them.
// The devices a pending MIG mode change removes at the GPU's next reset (the
// whole GPU while MIG waits to be enabled, its MIG devices while it waits to
// be disabled) are published tainted like draining ones, whoever asked for
// the change: no new claim is allocated a device about to disappear. Where
// the API server drops taints (ErrDrainTaintsDropped), publications that
// drain nothing leave those taints out for PendingTaintsRetry, then try
// them again.
func (p *PoolInventory) Publish(ctx context.Context, gpus []GPUState, draining sets.Set[string]) error {
	var faults map[string][]resourceapi.DeviceTaint
	if draining.Len() > 0 || !p.pendingTaintsLeftOut() {
		draining = draining.Union(p.pendingRemoval(gpus))
		faults = p.faultTaints(gpus)
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
	res, err := slices.BuildTaintedPool(p.NodeName, all, migs, draining, faults)
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
	before := map[string]int{featureDeviceTaints: p.droppedReports(featureDeviceTaints), featureBindingConditions: p.droppedReports(featureBindingConditions)}
	errsBefore, _ := p.publishErrors()
	if err := p.hand(ctx, res); err != nil {
		return fmt.Errorf("publishing pool %s: %w", p.NodeName, err)
	}
	want := wantedKeys(res)
	if draining.Len() == 0 && p.stillServed(want, before, errsBefore) {
		return nil
	}
	deletions := p.deletionsSeen()
	err = p.waitServed(ctx, res, before, errsBefore)
	p.recordServed(want, before, errsBefore, err, deletions)
	switch {
	case errors.Is(err, ErrDrainTaintsDropped):
		p.taintsDroppedAt.Store(p.now().UnixNano())
	case err == nil && draining.Len() > 0:
		p.taintsDroppedAt.Store(0)
	}
	return err
}

// hand hands res to the publisher and records it as the last handed.
func (p *PoolInventory) hand(ctx context.Context, res resourceslice.DriverResources) error {
	p.handMu.Lock()
	defer p.handMu.Unlock()
	if err := p.Publisher.PublishResources(ctx, res); err != nil {
		return err
	}
	p.handed = &res
	return nil
}

// RepublishRetry is how often Republish hands the last publication again
// while the API server serves no slice of the pool.
const RepublishRetry = 100 * time.Millisecond

// Republish implements Republisher: it hands the publisher the last
// publication again, then waits until the API server serves the pool whole
// (every slice of its newest generation, poolComplete; read bypassing
// caches), handing it again every RepublishRetry
// meanwhile, for at most Timeout (default 30 s). The kubeletplugin helper's
// ResourceSlice controller syncs the pool at once on every publication it
// is handed, but from its informer's cache: handed before that cache has
// seen the deletion, it writes nothing, and would write the slice again
// only after its sync delay (resourceslice.DefaultSyncDelay, 30 s). It
// reports false, and does nothing, before the first publication; without a
// Live reader it hands the publication once. A Publish under way hands its
// publication before or after each hand, never between: the pool written
// is the one the scheduler was shown last, drain taints included, until
// the pass's next publication replaces it. The publication found served
// before is forgotten, and so is one that a Publish whose wait began before
// this call finds served, so that the pass's next Publish reads its pool
// back from the API server.
func (p *PoolInventory) Republish(ctx context.Context) (bool, error) {
	handAgain := func() (bool, error) {
		p.handMu.Lock()
		defer p.handMu.Unlock()
		if p.handed == nil {
			return false, nil
		}
		if err := p.Publisher.PublishResources(ctx, *p.handed); err != nil {
			return true, fmt.Errorf("publishing pool %s again: %w", p.NodeName, err)
		}
		return true, nil
	}
	p.servedMu.Lock()
	p.served = servedPublication{}
	p.deletions++
	p.servedMu.Unlock()
	handed, err := handAgain()
	if !handed || err != nil || p.Live == nil {
		return handed, err
	}
	timeout := p.Timeout
	if timeout == 0 {
		timeout = 30 * time.Second
	}
	var listErr error
	err = wait.PollUntilContextTimeout(ctx, RepublishRetry, timeout, false, func(ctx context.Context) (bool, error) {
		var list resourceapi.ResourceSliceList
		if listErr = p.Live.List(ctx, &list, client.MatchingFields{"spec.nodeName": p.NodeName, "spec.driver": p.Driver}); listErr == nil && poolComplete(list.Items, p.NodeName) {
			return true, nil
		}
		_, err := handAgain()
		return false, err
	})
	if err != nil {
		return true, fmt.Errorf("waiting for the API server to serve pool %s again: %w", p.NodeName, errors.Join(err, listErr))
	}
	return true, nil
}

// poolComplete reports whether slices hold the whole newest generation of
// pool: as many slices of it as its ResourceSliceCount. The scheduler
// allocates nothing from a pool with fewer (one written slice by slice).
func poolComplete(slices []resourceapi.ResourceSlice, pool string) bool {
	newest, found := int64(0), false
	for _, sl := range slices {
		if sl.Spec.Pool.Name == pool && (!found || sl.Spec.Pool.Generation > newest) {
			newest, found = sl.Spec.Pool.Generation, true
		}
	}
	var n, want int64
	for _, sl := range slices {
		if sl.Spec.Pool.Name == pool && sl.Spec.Pool.Generation == newest {
			n++
			want = sl.Spec.Pool.ResourceSliceCount
		}
	}
	return found && n == want
}

// stillServed reports whether want is the publication last found served,
// less than ServedRecheck ago, with no dropped-field report (counted in
// dropped now) nor publish error (errs, PublishError's count now) since.
func (p *PoolInventory) stillServed(want sets.Set[deviceKey], dropped map[string]int, errs int) bool {
	if p.Live == nil {
		return false
	}
	p.servedMu.Lock()
	defer p.servedMu.Unlock()
	s := p.served
	return s.keys != nil && s.keys.Equal(want) && maps.Equal(s.dropped, dropped) && s.errs == errs && p.now().Sub(s.at) < ServedRecheck
}

// deletionsSeen is the number of pool deletions Republish was told of.
func (p *PoolInventory) deletionsSeen() int {
	p.servedMu.Lock()
	defer p.servedMu.Unlock()
	return p.deletions
}

// recordServed remembers publication want as served now where err is nil
// (the wait for it succeeded) and the pool was not deleted since the wait
// began (deletions is deletionsSeen then), and forgets the last one
// otherwise.
func (p *PoolInventory) recordServed(want sets.Set[deviceKey], dropped map[string]int, errs int, err error, deletions int) {
	p.servedMu.Lock()
	defer p.servedMu.Unlock()
	if err != nil || p.Live == nil || p.deletions != deletions {
		p.served = servedPublication{}
		return
	}
	p.served = servedPublication{keys: want, at: p.now(), dropped: dropped, errs: errs}
}

// PendingTaintsRetry is how long after the API server was found dropping
// taints publications that drain nothing leave out the taints of pending
// MIG mode changes (PoolInventory.Publish).
const PendingTaintsRetry = 10 * time.Minute

// pendingTaintsLeftOut reports whether taints were found dropped less than
// PendingTaintsRetry ago.
func (p *PoolInventory) pendingTaintsLeftOut() bool {
	at := p.taintsDroppedAt.Load()
	return at != 0 && p.now().Sub(time.Unix(0, at)) < PendingTaintsRetry
}

func (p *PoolInventory) now() time.Time {
	if p.Clock == nil {
		return time.Now()
	}
	return p.Clock.Now()
}

// faultTaints returns the slices.XidTaint of each device of gpus that an
// Xid hit (Faults), by published name; nil without Faults.
func (p *PoolInventory) faultTaints(gpus []GPUState) map[string][]resourceapi.DeviceTaint {
	if p.Faults == nil {
		return nil
	}
	out := map[string][]resourceapi.DeviceTaint{}
	for _, g := range gpus {
		xids := gpuXidsOf(p.Faults, p, g)
		if len(xids) == 1 && xids[0].Device == "" {
			// The GPU as a whole: every device it publishes.
			taint := []resourceapi.DeviceTaint{slices.XidTaint(uint64(xids[0].Xid))}
			if !g.GPU.MIGMode.Current {
				out[p.DeviceName(g.GPU, nil)] = taint
				continue
			}
			for i := range g.Devices {
				if d := &g.Devices[i]; d.CIID >= 0 && d.UUID != "" {
					out[p.DeviceName(g.GPU, d)] = taint
				}
			}
			continue
		}
		for _, x := range xids {
			out[x.Device] = []resourceapi.DeviceTaint{slices.XidTaint(uint64(x.Xid))}
		}
	}
	return out
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

// deviceKey is a device name with its "uuid" attribute (a MIG device
// destroyed and made again at the same placement keeps its name, not its
// UUID) and whether it carries the drain taint and binding conditions.
type deviceKey struct {
	name    string
	uuid    string
	drained bool
	binding bool
	// xid is the value of the device's slices.XidTaint, "" without one.
	xid string
}

func keyOf(d resourceapi.Device) deviceKey {
	drained, xid := slices.TaintsOf(d)
	k := deviceKey{name: d.Name, drained: drained, binding: len(d.BindingConditions) > 0, xid: xid}
	if a, ok := d.Attributes[slices.AttrUUID]; ok && a.StringValue != nil {
		k.uuid = *a.StringValue
	}
	return k
}

func wantedKeys(res resourceslice.DriverResources) sets.Set[deviceKey] {
	out := sets.New[deviceKey]()
	for _, pool := range res.Pools {
		for _, sl := range pool.Slices {
			for _, d := range sl.Devices {
				out.Insert(keyOf(d))
			}
		}
	}
	return out
}

// waitServed polls the API server until the node's slices of this driver,
// of the pool's newest generation, hold exactly the published devices,
// with their UUIDs and taints. It fails at once when the
// API server is reported dropping binding conditions the publication has
// (DroppedFields, counted from before). Reported dropping its taints, it
// waits on until the slices hold the published devices, taints aside, and
// then fails with ErrDrainTaintsDropped, unless they hold them with their
// taints (the report was of another write): callers that go on where
// taints are dropped (a withdrawal, a republication) rely on the devices
// being served, and a report may come from another write than this
// publication's. A
// publication that is not served in time (an update refused, a slow API
// server) is only that, not a sign that a feature is off; the error wraps
// the last publish error recorded since errsBefore (PublishError), if any:
// an admission policy's or RBAC's Forbidden, an Invalid slice. It does not
// fail sooner on one: the ResourceSlice controller's errors do not name
// their pool, and one of another pool of the driver on the node (a slice
// left by an older version that the node policy keeps the agent from
// deleting) would fail publications served a moment later. Where the last
// reads of the pool failed (RBAC, a network policy), the error wraps the
// last read's error.
func (p *PoolInventory) waitServed(ctx context.Context, res resourceslice.DriverResources, before map[string]int, errsBefore int) error {
	if p.Live == nil {
		return nil
	}
	timeout := p.Timeout
	if timeout == 0 {
		timeout = 30 * time.Second
	}
	want := wantedKeys(res)
	drains, binds := false, false
	for k := range want {
		drains, binds = drains || k.drained || k.xid != "", binds || k.binding
	}
	var got sets.Set[deviceKey]
	var listErr error // the last failed read, while no read succeeds after it
	// taintsDropped: a report of dropped taints came; served: the pool as
	// published, taints included (a report may be of another write).
	taintsDropped, served := false, false
	published := want
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		if binds && p.droppedReports(featureBindingConditions) > before[featureBindingConditions] {
			return false, ErrBindingConditionsDropped
		}
		if drains && !taintsDropped && p.droppedReports(featureDeviceTaints) > before[featureDeviceTaints] {
			taintsDropped, want = true, untainted(want)
		}
		var list resourceapi.ResourceSliceList
		if err := p.Live.List(ctx, &list, client.MatchingFields{"spec.nodeName": p.NodeName, "spec.driver": p.Driver}); err != nil {
			if ctx.Err() == nil {
				listErr = err
			}
			return false, nil // maybe transient; keep polling until the timeout
		}
		listErr = nil
		got = newestGenerationKeys(list.Items, p.NodeName)
		if served = got.Equal(published); served || !taintsDropped {
			return served, nil
		}
		return untainted(got).Equal(want), nil
	})
	switch {
	case err == nil && taintsDropped && !served:
		return fmt.Errorf("pool %s served without its taints: %w", p.NodeName, ErrDrainTaintsDropped)
	case err == nil:
		return nil
	case errors.Is(err, ErrBindingConditionsDropped):
		return fmt.Errorf("waiting for the API server to serve pool %s: %w", p.NodeName, err)
	case listErr != nil:
		return fmt.Errorf("waiting for the API server to serve pool %s: listing its ResourceSlices: %w", p.NodeName, errors.Join(listErr, err))
	}
	if n, last := p.publishErrors(); n > errsBefore {
		return fmt.Errorf("waiting for the API server to serve pool %s (%d devices wanted, %d served as published): %w; the last error writing its ResourceSlices: %w",
			p.NodeName, want.Len(), want.Intersection(got).Len(), err, last)
	}
	return fmt.Errorf("waiting for the API server to serve pool %s (%d devices wanted, %d served as published): %w",
		p.NodeName, want.Len(), want.Intersection(got).Len(), err)
}

// newestGenerationKeys returns the devices of pool in slices, of its newest
// generation only: the scheduler ignores the slices of older generations
// (the structured allocator takes a pool at its newest generation, and
// only once every slice of it is there), so devices of an older slice
// still listed do not make up for those of a newer one not yet written.
func newestGenerationKeys(slices []resourceapi.ResourceSlice, pool string) sets.Set[deviceKey] {
	newest := int64(0)
	for _, sl := range slices {
		if sl.Spec.Pool.Name == pool {
			newest = max(newest, sl.Spec.Pool.Generation)
		}
	}
	out := sets.New[deviceKey]()
	for _, sl := range slices {
		if sl.Spec.Pool.Name != pool || sl.Spec.Pool.Generation != newest {
			continue
		}
		for _, d := range sl.Spec.Devices {
			out.Insert(keyOf(d))
		}
	}
	return out
}

// untainted is keys without their taints (drain and Xid).
func untainted(keys sets.Set[deviceKey]) sets.Set[deviceKey] {
	out := make(sets.Set[deviceKey], len(keys))
	for k := range keys {
		k.drained, k.xid = false, ""
		out.Insert(k)
	}
	return out
}

// ErrDrainTaintsDropped: the API server stored the pool without its drain
// taints (the ResourceSlice controller reports it, see DroppedFields). It
// drops device taints when the DRADeviceTaints feature is off (Kubernetes
// 1.34 and 1.35 by default), so no drain can keep the scheduler off a
// device: the agent refuses to repartition. A publication whose only taints
// are those of a pending MIG mode change or of an Xid returns it too.
var ErrDrainTaintsDropped = errors.New("the API server drops the devices' drain taints: DRA device taints (feature gate DRADeviceTaints, on by default from Kubernetes 1.36) are off on this cluster, so devices cannot be drained before they are destroyed")

// ErrBindingConditionsDropped: the API server stored the pool without its
// binding conditions (reported as for ErrDrainTaintsDropped). It drops them
// where DRA device binding conditions are off (feature gate
// DRADeviceBindingConditions, and on 1.36 DRAResourceClaimDeviceStatus; on
// by default from Kubernetes 1.36): the
// agent was started with --device-binding-conditions on a cluster that
// cannot honour them, and refuses to go on as if it could.
var ErrBindingConditionsDropped = errors.New("the API server drops the devices' binding conditions: DRA device binding conditions (feature gate DRADeviceBindingConditions, and on Kubernetes 1.36 DRAResourceClaimDeviceStatus; on by default from 1.36) are off on this cluster; turn them on in kube-apiserver and kube-scheduler, or run the agent without --device-binding-conditions")

// DeviceName implements Inventory with the names of package slices.
func (p *PoolInventory) DeviceName(g gpu.GPU, d *gpu.MIGDevice) string {
	if d == nil {
		return slices.GPUDeviceName(g.Index)
	}
	return slices.MIGDeviceName(g.Index, d.Profile, d.ProfileID, d.Placement.Start)
}
