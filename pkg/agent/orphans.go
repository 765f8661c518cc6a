package agent

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/events"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// Defaults of OrphanedClaims.
const (
	// DefaultOrphanGrace is how long a prepared claim must be seen gone
	// before its preparation is released.
	DefaultOrphanGrace = 10 * time.Minute
	// maxOrphanInterval bounds the period of OrphanedClaims' sweeps.
	maxOrphanInterval = time.Minute
)

// PreparedClaims is the kubelet plugin's record of the claims it prepared,
// as OrphanedClaims needs it.
type PreparedClaims interface {
	// PreparedClaimRefs returns the prepared claims: namespace, name, UID.
	PreparedClaimRefs() []kubeletplugin.NamespacedObject
	// ReleaseOrphan unprepares the claim of uid as the kubelet's unprepare
	// would, and returns the names of the devices it released; released
	// is false where the claim is not prepared (any more), was prepared
	// anew meanwhile, or stillGone says it is not gone. stillGone is asked
	// last, with no prepare of the claim able to come between its answer
	// and the release. It refuses, with an error, a claim a process still
	// runs on. On an error the claim stays prepared.
	ReleaseOrphan(ctx context.Context, uid types.UID, stillGone func(context.Context) (bool, error)) (devices []string, released bool, err error)
}

// OrphanedClaims releases the preparations of claims the kubelet will
// never unprepare: a ResourceClaim deleted (or its name taken by a new
// object, of another UID), or one that still exists but whose allocation
// names no device of the node's pool any more (deallocated once its pods
// ended, as a standalone claim is), while the kubelet plugin still records
// it as prepared. The kubelet unprepares a claim before the claim can go
// or lose its allocation, unless its own record of the claim was lost (its
// DRA state file, removed as the kubelet asks when it finds the file
// corrupt; a node re-provisioned with the plugin's directory kept) or the
// pod and claim were force-deleted while the plugin could not be reached. Such a record
// would keep its devices from ever being destroyed (the GPU Blocked,
// reason DeviceInUse) or prepared for another claim.
//
// Every Interval the prepared claims are looked up in the cache; a claim
// the cache has seen gone for at least Grace is looked up once more in the
// API server (Live), and released only if it is gone there too and no
// process runs on its devices (the plugin checks NVML): a container of a
// force-deleted pod keeps its claim's preparation until it stops, however
// long that takes, so its device is never prepared for another claim
// meanwhile. Grace gives the kubelet, which unprepares such a claim itself
// once it has stopped the containers, the time to do so. A claim that is
// being deleted but still exists (finalizers) is not gone. The times seen
// gone are kept in memory: an agent that restarts starts the grace again.
type OrphanedClaims struct {
	// Claims are the kubelet plugin's prepared claims. Required.
	Claims PreparedClaims
	// Cached reads ResourceClaims from the agent's cache (every claim's
	// identity is kept there: CacheOptions). Required.
	Cached client.Reader
	// Live reads a ResourceClaim from the API server before its
	// preparation is released. Required.
	Live client.Reader
	// NodeName names the node's NodeMigLayout, on which a release is
	// recorded as an event (EventOrphanedClaimReleased), if it exists, and
	// the node's pool. Required.
	NodeName string
	// Driver is the DRA driver name the node's pool is published under: a
	// claim allocated no device of Driver's pool NodeName is released as a
	// deleted one is. Required.
	Driver string
	// Recorder records the events; nil records none.
	Recorder events.EventRecorder
	// Metrics count the releases; nil counts none.
	Metrics *Metrics
	// Grace is how long a claim must be seen gone before it is released;
	// default DefaultOrphanGrace.
	Grace time.Duration
	// Interval is the period of the sweeps; default a tenth of Grace,
	// between 1 s and 1 minute.
	Interval time.Duration
	// Now is the clock; nil is time.Now.
	Now func() time.Time

	goneSince map[types.UID]time.Time // only Sweep touches it
}

// Start sweeps at once and then every Interval until ctx ends
// (manager.Runnable). Errors are logged; the claims they concern are
// looked at again in the next sweep.
func (o *OrphanedClaims) Start(ctx context.Context) error {
	logger := klog.FromContext(ctx).WithName("orphaned-claims")
	ctx = klog.NewContext(ctx, logger)
	wait.UntilWithContext(ctx, func(ctx context.Context) {
		if err := o.Sweep(ctx); err != nil && ctx.Err() == nil {
			logger.Error(err, "Looking for prepared claims that no longer exist or hold no device of the node")
		}
	}, o.interval())
	return nil
}

// NeedLeaderElection implements manager.LeaderElectionRunnable: every
// agent sweeps its own node's claims.
func (o *OrphanedClaims) NeedLeaderElection() bool { return false }

// Sweep looks up every prepared claim once and releases those seen gone
// for Grace and gone in the API server too. It returns the errors of the
// lookups and releases, joined.
func (o *OrphanedClaims) Sweep(ctx context.Context) error {
	if o.Driver == "" || o.NodeName == "" {
		// Every claim would look allocated elsewhere.
		return fmt.Errorf("sweeping orphaned claims: the driver name (%q) and node name (%q) are both required", o.Driver, o.NodeName)
	}
	now := o.now()
	next := map[types.UID]time.Time{}
	var errs []error
	for _, ref := range o.Claims.PreparedClaimRefs() {
		since, suspected := o.goneSince[ref.UID]
		gone, err := o.claimGone(ctx, o.Cached, ref)
		if err != nil {
			errs = append(errs, err)
			if suspected {
				next[ref.UID] = since
			}
			continue
		}
		if !gone {
			continue
		}
		if !suspected {
			since = now
		}
		if now.Sub(since) < o.grace() {
			next[ref.UID] = since
			continue
		}
		// Confirmed in the API server last, with the plugin's record
		// locked: a claim allocated here again since is prepared afresh
		// by the kubelet, not released under it.
		devices, released, err := o.Claims.ReleaseOrphan(ctx, ref.UID, func(ctx context.Context) (bool, error) {
			return o.claimGone(ctx, o.Live, ref)
		})
		if err != nil {
			errs = append(errs, err)
			next[ref.UID] = since
			continue
		}
		// Not released: gone from the plugin's record, or the API server
		// shows the claim here (the cache lags: seen anew from the next
		// sweep on).
		if released {
			o.record(ctx, ref, devices, since)
		}
	}
	o.goneSince = next
	return errors.Join(errs...)
}

// claimGone reports whether ref's claim is gone in r: not found, its name
// taken by an object of another UID, or allocated no device of the node's
// pool (AllocatedIn; a claim allocated elsewhere is reduced to its
// identity in the cache, ClaimTransform, as one allocated nothing is).
func (o *OrphanedClaims) claimGone(ctx context.Context, r client.Reader, ref kubeletplugin.NamespacedObject) (bool, error) {
	var claim resourceapi.ResourceClaim
	err := r.Get(ctx, ref.NamespacedName, &claim)
	switch {
	case apierrors.IsNotFound(err):
		return true, nil
	case err != nil:
		return false, fmt.Errorf("reading prepared ResourceClaim %s: %w", ref.NamespacedName, err)
	}
	return claim.UID != ref.UID || AllocatedIn([]resourceapi.ResourceClaim{claim}, o.Driver, o.NodeName).Len() == 0, nil
}

// record tells of ref's release: a log line, the metric and, where the
// node has a NodeMigLayout, a Warning event on it.
func (o *OrphanedClaims) record(ctx context.Context, ref kubeletplugin.NamespacedObject, devices []string, since time.Time) {
	note := fmt.Sprintf("released the preparation of ResourceClaim %s (UID %s), gone or no longer allocated on this node since %s at the latest, which the kubelet never unprepared; devices: %s",
		ref.NamespacedName, ref.UID, since.UTC().Format(time.RFC3339), strings.Join(devices, ", "))
	klog.FromContext(ctx).Info("Released the preparation of a claim that no longer exists or is no longer allocated on this node", "claim", ref, "devices", devices, "goneSince", since)
	o.Metrics.countOrphanReleased()
	if o.Recorder == nil || o.NodeName == "" {
		return
	}
	var nml v1alpha1.NodeMigLayout
	if err := o.Cached.Get(ctx, types.NamespacedName{Name: o.NodeName}, &nml); err != nil {
		return // no NodeMigLayout: the log line tells
	}
	o.Recorder.Eventf(&nml, nil, "Warning", EventOrphanedClaimReleased, "Unprepare", "%s", truncate(note, maxEventNote))
}

func (o *OrphanedClaims) grace() time.Duration {
	if o.Grace > 0 {
		return o.Grace
	}
	return DefaultOrphanGrace
}

func (o *OrphanedClaims) interval() time.Duration {
	if o.Interval > 0 {
		return o.Interval
	}
	return min(max(o.grace()/10, time.Second), maxOrphanInterval)
}

func (o *OrphanedClaims) now() time.Time {
	if o.Now != nil {
		return o.Now()
	}
	return time.Now()
}
