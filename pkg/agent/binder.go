package agent

import (
	"context"
	"fmt"
	stdslices "slices"
	"sync"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	resourceac "k8s.io/client-go/applyconfigurations/resource/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/miglayout/miglayout/pkg/eventnote"
	"github.com/miglayout/miglayout/pkg/slices"
)

// Condition reasons the Binder writes on a claim's device status, and the
// event it records on a claim whose allocation it refuses.
const (
	// ReasonDeviceReady: the device is published and kept; the pod may bind.
	ReasonDeviceReady = "DeviceReady"
	// ReasonDeviceRemoved: the device is being drained for a repartition or
	// is gone; the scheduler deallocates the claim and tries again.
	ReasonDeviceRemoved = "DeviceRemoved"
	// EventBindingRefused (Warning, on the ResourceClaim).
	EventBindingRefused = "BindingRefused"
)

// binderFieldManager owns the agent's entries of status.devices.
const binderFieldManager = "miglayout-agent"

// Binder answers the binding conditions of this node's devices
// (slices.RequireBinding): for every claim allocated one of them whose
// status does not say yet, it writes BindingConditionReady or
// BindingConditionRemoved into the claim's status.devices, as the Gate
// decides. It runs beside the NodeReconciler, whose passes block for the
// settle period, so that pods are not held while a drain waits.
type Binder struct {
	Client   client.Client
	Gate     *BindingGate
	Driver   string
	NodeName string
	// Recorder records events; SetupWithManager wraps it in
	// eventnote.Distinct, so that an event with a new note is never folded into
	// the series of an earlier one.
	Recorder events.EventRecorder
	Metrics  *Metrics
	// Retry is how soon a claim is looked at again while the agent has not
	// published its pool; default 500 ms.
	Retry time.Duration

	mu sync.Mutex
	// promised: confirmations decided (the gate holds their devices in
	// use) whose write has not succeeded yet, by allocation and device. A
	// failed write may still have been applied, so the promise stands and
	// the same answer is written again, until the claim shows it or that
	// allocation is gone (the claim deleted, deallocated, or allocated
	// anew: a promise never answers another allocation).
	promised map[promise]bool
}

// allocation identifies one allocation of a claim: the scheduler stamps each
// with its time (the binding timeout runs from it).
type allocation struct {
	claim     types.NamespacedName
	uid       types.UID
	allocated string
}

type promise struct {
	alloc  allocation
	device string
}

func allocationOf(claim *resourceapi.ResourceClaim) allocation {
	a := allocation{claim: client.ObjectKeyFromObject(claim), uid: claim.UID}
	if claim.Status.Allocation != nil && claim.Status.Allocation.AllocationTimestamp != nil {
		a.allocated = claim.Status.Allocation.AllocationTimestamp.UTC().Format(time.RFC3339Nano)
	}
	return a
}

// SetupWithManager registers the Binder for the claims with an unanswered
// binding condition on this node's pool.
func (b *Binder) SetupWithManager(mgr ctrl.Manager) error {
	b.Recorder = eventnote.Distinct(b.Recorder)
	pending := predicate.NewPredicateFuncs(func(o client.Object) bool {
		claim, ok := o.(*resourceapi.ResourceClaim)
		return ok && (len(b.unanswered(claim)) > 0 || b.hasPromise(client.ObjectKeyFromObject(claim)))
	})
	return ctrl.NewControllerManagedBy(mgr).
		Named("binding-conditions").
		For(&resourceapi.ResourceClaim{}, builder.WithPredicates(pending)).
		WithOptions(controller.Options{MaxConcurrentReconciles: 4}).
		Complete(b)
}

// unanswered returns the devices of this node's pool allocated to claim with
// BindingConditionReady whose status has neither condition True, each once
// (two requests with admin access may be allocated one device).
func (b *Binder) unanswered(claim *resourceapi.ResourceClaim) []string {
	if claim.Status.Allocation == nil {
		return nil
	}
	var out []string
	for _, r := range claim.Status.Allocation.Devices.Results {
		if r.Driver != b.Driver || r.Pool != b.NodeName || !slices.RequiresBinding(r) {
			continue
		}
		if answered(claim, r.Driver, r.Pool, r.Device) || stdslices.Contains(out, r.Device) {
			continue
		}
		out = append(out, r.Device)
	}
	return out
}

// answered reports whether claim's status.devices has one of the binding
// conditions True for the device.
func answered(claim *resourceapi.ResourceClaim, driver, pool, device string) bool {
	st := deviceStatus(claim, driver, pool, device)
	return st != nil && (apimeta.IsStatusConditionTrue(st.Conditions, slices.BindingConditionReady) ||
		apimeta.IsStatusConditionTrue(st.Conditions, slices.BindingConditionRemoved))
}

// confirmed reports whether claim's status.devices has BindingConditionReady
// True for the device.
func confirmed(claim *resourceapi.ResourceClaim, driver, pool, device string) bool {
	st := deviceStatus(claim, driver, pool, device)
	return st != nil && apimeta.IsStatusConditionTrue(st.Conditions, slices.BindingConditionReady)
}

func deviceStatus(claim *resourceapi.ResourceClaim, driver, pool, device string) *resourceapi.AllocatedDeviceStatus {
	for i := range claim.Status.Devices {
		d := &claim.Status.Devices[i]
		if d.Driver == driver && d.Pool == pool && d.Device == device && d.ShareID == nil {
			return d
		}
	}
	return nil
}

// Reconcile answers one claim's unanswered devices in one server-side apply
// of the claim's status (the agent's entries of status.devices, those it
// answered before included), made on the claim as read (resourceVersion
// precondition: an apply based on a stale read fails with a conflict and is
// retried, so it never drops an answer it has not seen).
func (b *Binder) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	logger := klog.FromContext(ctx).WithValues("claim", req.NamespacedName)
	var claim resourceapi.ResourceClaim
	if err := b.Client.Get(ctx, req.NamespacedName, &claim); err != nil {
		if apierrors.IsNotFound(err) {
			b.release(req.NamespacedName, nil, nil)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	alloc := allocationOf(&claim)
	todo := b.unanswered(&claim)
	// Promises of other allocations, or of devices answered since.
	b.release(req.NamespacedName, &alloc, todo)
	if len(todo) == 0 {
		return ctrl.Result{}, nil
	}
	decided := map[string]BindingDecision{}
	for _, dev := range todo {
		if b.promisedTo(alloc, dev) {
			decided[dev] = BindingConfirm
			continue
		}
		d := b.Gate.Decide(dev)
		if d == BindingUnknown {
			for dev, d := range decided {
				if d == BindingConfirm && !b.promisedTo(alloc, dev) {
					b.Gate.Written(dev)
				}
			}
			return ctrl.Result{RequeueAfter: b.retry()}, nil
		}
		decided[dev] = d
	}
	for dev, d := range decided {
		if d == BindingConfirm {
			b.promise(alloc, dev)
		}
	}

	now := metav1.Now()
	status := resourceac.ResourceClaimStatus()
	applied := map[string]bool{} // a device has one entry, however many requests it serves
	for _, r := range claim.Status.Allocation.Devices.Results {
		if r.Driver != b.Driver || r.Pool != b.NodeName || !slices.RequiresBinding(r) || applied[r.Device] {
			continue
		}
		applied[r.Device] = true
		var cond *metav1ac.ConditionApplyConfiguration
		switch d, ok := decided[r.Device]; {
		case ok && d == BindingConfirm:
			cond = condition(slices.BindingConditionReady, ReasonDeviceReady, "the device is published and not being repartitioned", claim.Generation, now)
		case ok:
			cond = condition(slices.BindingConditionRemoved, ReasonDeviceRemoved,
				fmt.Sprintf("device %s of node %s is being removed by a MIG repartition; the claim needs another device", r.Device, b.NodeName), claim.Generation, now)
		default:
			// Answered before: apply it again, or this apply would drop it.
			st := deviceStatus(&claim, r.Driver, r.Pool, r.Device)
			for _, t := range []string{slices.BindingConditionReady, slices.BindingConditionRemoved} {
				if c := apimeta.FindStatusCondition(st.Conditions, t); c != nil && c.Status == metav1.ConditionTrue {
					cond = condition(c.Type, c.Reason, c.Message, c.ObservedGeneration, c.LastTransitionTime)
				}
			}
		}
		status.WithDevices(resourceac.AllocatedDeviceStatus().
			WithDriver(r.Driver).WithPool(r.Pool).WithDevice(r.Device).WithConditions(cond))
	}
	apply := resourceac.ResourceClaim(claim.Name, claim.Namespace).WithResourceVersion(claim.ResourceVersion).WithStatus(status)
	if err := b.Client.Status().Apply(ctx, apply, client.FieldOwner(binderFieldManager), client.ForceOwnership); err != nil {
		if apierrors.IsNotFound(err) {
			b.release(req.NamespacedName, nil, nil)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, fmt.Errorf("writing binding conditions of claim %s: %w", req.NamespacedName, err)
	}
	for dev, d := range decided {
		if d == BindingConfirm {
			b.releaseWritten(alloc, dev)
			logger.V(2).Info("Confirmed device for binding", "device", dev)
			b.Metrics.countBinding("ready")
			continue
		}
		logger.Info("Refused device for binding: it is being repartitioned away", "device", dev)
		b.Metrics.countBinding("refused")
		if b.Recorder != nil {
			note := fmt.Sprintf("device %s of node %s is being removed by a MIG repartition; the scheduler will allocate another", dev, b.NodeName)
			b.Recorder.Eventf(&claim, nil, "Warning", EventBindingRefused, "Bind", "%s", note)
		}
	}
	return ctrl.Result{}, nil
}

func (b *Binder) promise(a allocation, dev string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.promised == nil {
		b.promised = map[promise]bool{}
	}
	b.promised[promise{a, dev}] = true
}

func (b *Binder) promisedTo(a allocation, dev string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.promised[promise{a, dev}]
}

func (b *Binder) hasPromise(claim types.NamespacedName) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	for p := range b.promised {
		if p.alloc.claim == claim {
			return true
		}
	}
	return false
}

// release ends, telling the gate they are written, the promises of the
// claim that belong to another allocation than current (all of them when
// current is nil) or to a device not in keep.
func (b *Binder) release(claim types.NamespacedName, current *allocation, keep []string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for p := range b.promised {
		if p.alloc.claim != claim {
			continue
		}
		if current != nil && p.alloc == *current && stdslices.Contains(keep, p.device) {
			continue
		}
		delete(b.promised, p)
		b.Gate.Written(p.device)
	}
}

// releaseWritten ends the promise of one device whose answer is written.
func (b *Binder) releaseWritten(a allocation, dev string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.promised[promise{a, dev}] {
		delete(b.promised, promise{a, dev})
		b.Gate.Written(dev)
	}
}

func condition(typ, reason, msg string, gen int64, at metav1.Time) *metav1ac.ConditionApplyConfiguration {
	return metav1ac.Condition().WithType(typ).WithStatus(metav1.ConditionTrue).WithReason(reason).
		WithMessage(msg).WithObservedGeneration(gen).WithLastTransitionTime(at)
}

func (b *Binder) retry() time.Duration {
	if b.Retry > 0 {
		return b.Retry
	}
	return 500 * time.Millisecond
}
