package agent

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"

	"github.com/miglayout/miglayout/api/v1alpha1"
	"github.com/miglayout/miglayout/pkg/mig"
	"github.com/miglayout/miglayout/pkg/mig/gpu"
)

// Repartitioner brings a node's GPUs to their desired layouts. It holds no
// Kubernetes client: the caller passes the desired GPU specs in and writes the
// results to NodeMigLayout status.
type Repartitioner struct {
	GPUs        gpu.Manager
	Inventory   Inventory
	Allocations Allocations
	Prepared    Prepared
	Locks       GPULocks
	Journal     *Journal
	// SettlePeriod is how long a drain waits between publishing the taint
	// and re-checking allocations: it must cover the scheduler's decisions
	// already in flight when the taint was published.
	SettlePeriod time.Duration
	// Sleep waits for d or until ctx ends; nil means a timer.
	Sleep func(ctx context.Context, d time.Duration) error
	// Metrics, when set, records phase durations and results.
	Metrics *Metrics
	// Driver is the DRA driver name the node's devices are published under.
	Driver string
	// Now is the clock of StuckReadAfter; nil means time.Now.
	Now func() time.Time
	// Reread, when set, reads the node's desired GPU specs again right
	// before each GPU's NVML work, once the GPU is shown Repartitioning
	// (the agent: live from the API server). A GPU whose spec changed
	// meanwhile (an Auto plan cancelled its change before anything was
	// destroyed: the pods it was for are gone) is not repartitioned in
	// this pass, and its drained devices are published untainted again;
	// the pass the spec change starts works from the new spec. An error is
	// logged and the pass goes on with the specs it was given.
	Reread func(ctx context.Context) ([]v1alpha1.GPUSpec, error)

	// refreshed is set once refreshRecreated has brought every preparation
	// up to date, and cleared before each GPU's NVML work (which may make
	// prepared devices again): false in a new agent process, so that one
	// that stopped between making devices and the refresh refreshes in its
	// first pass. Passes run one at a time.
	refreshed bool
	// counted are the GPU indices NVML counted at the last observe, read
	// or not (unknownIn); nil before the first.
	counted sets.Set[int]
	// failingReads holds, by read (a GPU's, or its MIG devices' listing),
	// since when it has failed in a row with an error that may pass
	// (StuckReadAfter).
	failingReads map[readOf]time.Time
	// triedReads are the reads an observation noted failing (beginReads).
	triedReads sets.Set[readOf]
	// awaitingReboot holds, by GPU UUID, the MIG mode (true: enabled) a
	// SetMIGMode of this process left pending that only a reboot applies
	// (gpu.MIGMode.RebootRequired): the driver cannot reset the GPU, idle
	// or not, so setting it again changes nothing. While the GPU's mode is
	// still pending that way, passes do not drain, withdraw or set it
	// again. The reboot applies it (and starts a new process); an agent
	// restarted without one sets it once more.
	awaitingReboot map[string]bool
	// emptied are the GPUs turnOffEmptied changed, not yet taken
	// (takeEmptied).
	emptied map[int]bool
	// withheld are the whole-GPU devices this pass leaves out of every
	// publication (withheldWhole): GPUs with MIG mode off whose MIG
	// devices claims hold.
	withheld sets.Set[string]
}

func (r *Repartitioner) driver() string { return r.Driver }

// GPUResult is where one GPU stands after a Sync pass.
type GPUResult struct {
	Phase   v1alpha1.GPUPhase
	Reason  string
	Message string
}

// SyncResult is the outcome of one Sync pass.
type SyncResult struct {
	// GPUs is NVML truth after the pass, as last published.
	GPUs []GPUState
	// Results has an entry per GPU index of the desired specs.
	Results map[int]GPUResult
	// InUse holds, per GPU index, the devices that may not be destroyed now.
	InUse map[int]mig.Layout
	// Retry is true when some GPU is Blocked or failed for a reason that may
	// clear by itself (device in use, NVML error), so the caller should come
	// back after a backoff.
	Retry bool
	// Stopped holds the GPUs whose change stopped before its NVML work
	// because the API server could not be written (the GPU shown
	// Repartitioning) or read (the spec read again): shown Pending, like a
	// GPU whose spec changed, they are retried as failures (outcomes).
	Stopped sets.Set[int]
	// Changed holds the GPUs this pass changed through NVML (devices
	// destroyed or created, MIG mode set) and left on their desired layout:
	// those the agent tells of as Repartitioned.
	Changed sets.Set[int]
	// Xids holds, per GPU index, the Xid critical errors the kubelet
	// plugin holds against the GPU (GPUStatus.Xids); the NodeReconciler
	// fills it before it writes the status (gpuXids).
	Xids map[int][]v1alpha1.GPUXid
}

// changedGPUs is res.Changed, empty for a nil res (a pass that failed
// before changing any GPU).
func (res *SyncResult) changedGPUs() sets.Set[int] {
	if res == nil {
		return nil
	}
	return res.Changed
}

// changedOnly is what a pass that fails after step 3 returns with its
// error: the GPUs it changed, nil where it changed none.
func (res *SyncResult) changedOnly() *SyncResult {
	if res.Changed.Len() == 0 {
		return nil
	}
	return &SyncResult{Changed: res.Changed}
}

// Reporter receives phase changes during a pass (Draining, Repartitioning)
// so that status can show progress before the pass ends. It may be nil. Its
// error for a Draining report is only logged; for a Repartitioning report it
// keeps the GPU as it is this pass (Pending, retried): the Auto planner may
// cancel a change while the GPU does not show Repartitioning, so no NVML
// work starts before it does.
type Reporter func(gpuIndex int, r GPUResult) error

// gpuPlan is the work one pass does on one GPU.
type gpuPlan struct {
	index   int
	state   *GPUState
	model   *mig.Model
	spec    v1alpha1.GPUSpec
	desired mig.Layout
	plan    mig.Plan
	// enableMIG / disableMIG: a MIG mode change is part of the work;
	// cancelPending: a pending mode change the spec no longer asks for is
	// cancelled (the mode set to the current one).
	enableMIG, disableMIG, cancelPending bool
	// drain are the published names of the devices that go away.
	drain []string
	// guard are published names that must be neither allocated nor
	// prepared when apply takes the GPU's lock, not drained: the whole
	// GPU that restoreHeld turns MIG mode on under.
	guard []string
	// obs is the pass's observation of the node's GPUs (the names the
	// agent publishes, for allocations under other names: unknownIn).
	obs []GPUState
	// vetted are those of drain that the cache showed allocated just
	// before the live re-check found them free (a release the cache had
	// not seen yet): apply's check under the lock goes by its live read
	// for those the cache still shows.
	vetted sets.Set[string]
	// modeSet is the MIG mode the agent set that the GPU's earlier
	// journal entry carries (restoreHeld's plans keep it in theirs).
	modeSet *bool
}

// Sync runs one pass over the desired GPU specs. It returns an error only when
// it could not observe or publish the node at all; per-GPU problems are in
// the result. With an error the result is nil, but where the pass failed
// after changing GPUs (the republication, or the reads after it): then it
// holds only Changed, the GPUs changed, whose status must not say their
// change was not made.
func (r *Repartitioner) Sync(ctx context.Context, desired []v1alpha1.GPUSpec, report Reporter) (*SyncResult, error) {
	return r.SyncDeferring(ctx, desired, nil, report)
}

// SyncDeferring is Sync with the GPUs of deferred (by index; GPUs of
// desired) left as they are where they still need a change: each keeps the
// result given (the failure its last change ended with) with no drain and
// no NVML step, and the pass asks for a retry. A deferred GPU found on its
// desired layout, with a device in use, or otherwise judged without a
// change to try gets that result instead. Everything else is as in Sync:
// the other GPUs change, the pool is republished, and a GPU instance
// without a compute instance is rolled back on a deferred GPU too.
func (r *Repartitioner) SyncDeferring(ctx context.Context, desired []v1alpha1.GPUSpec, deferred map[int]GPUResult, report Reporter) (*SyncResult, error) {
	logger := klog.FromContext(ctx)
	if report == nil {
		report = func(int, GPUResult) error { return nil }
	}
	r.withheld = nil
	obs, unreadable, err := r.observe(ctx)
	if err != nil {
		return nil, err
	}
	r.Metrics.setUnreadable(len(unreadable))
	rolled, orphans, err := r.rollbackOrphans(ctx, obs, desired)
	if err != nil {
		return nil, err
	}
	if cancelled, err := r.cancelOrphanModes(ctx, obs, desired, orphans); err != nil {
		return nil, err
	} else if cancelled {
		rolled = true
	}
	underClaims, err := r.cancelModesUnderClaims(ctx, obs, desired, orphans)
	if err != nil {
		return nil, err
	}
	if len(underClaims) > 0 {
		rolled = true
	}
	if rolled {
		if obs, unreadable, err = r.observe(ctx); err != nil {
			return nil, err
		}
	}
	// On NVML as the rollbacks left it: a GPU instance rolled back may
	// have been the GPU's last.
	if off, err := r.turnOffEmptied(ctx, obs, desired, orphans); err != nil {
		return nil, err
	} else if off {
		if obs, unreadable, err = r.observe(ctx); err != nil {
			return nil, err
		}
	}
	// Devices claims hold that the GPU lost (a reboot, a GPU reset) are
	// made again before anything is planned over their placements.
	restored, unrestored, err := r.restoreHeld(ctx, obs, orphans)
	if err != nil {
		return nil, err
	}
	if restored || len(unrestored) > 0 {
		// Also after a restore that failed: it may have turned MIG mode
		// on (and off again) or made some of its devices.
		if obs, unreadable, err = r.observe(ctx); err != nil {
			return nil, err
		}
	}
	res := &SyncResult{Results: map[int]GPUResult{}, Stopped: sets.New[int](), Changed: sets.New[int]()}
	for idx, f := range unrestored {
		// Nothing is planned on the GPU this pass: its layout would be
		// laid over the placements of the devices not made again.
		logger.Info("Not repartitioning the GPU: devices ResourceClaims hold could not be made again", "gpu", idx, "why", f.Message)
		res.Results[idx] = f
		res.Retry = true
	}
	// One cached read of the allocations: what is in use, and the
	// allocations under names the agent does not give (confirmed by a live
	// read only where a GPU would lose devices).
	inUse, unknown, unlisted, err := r.inUseAndUnknown(ctx, obs)
	if err != nil {
		return nil, err
	}
	r.withheld = r.withheldWhole(obs, unknown)
	if r.withheld.Len() > 0 {
		logger.Info("Not publishing GPUs whose MIG mode is off while ResourceClaims hold MIG devices of them", "devices", sets.List(r.withheld))
	}
	for _, idx := range slices.Sorted(maps.Keys(unlisted)) {
		logger.Error(unlisted[idx], "Listing the GPU's compute processes failed; none of its devices is destroyed this pass", "gpu", idx)
	}
	var confirmed unknownAllocations
	for idx, err := range orphans {
		if !slices.ContainsFunc(desired, func(s v1alpha1.GPUSpec) bool { return int(s.Index) == idx }) {
			// A GI the agent left half made on a GPU no spec lists:
			// reported (so that status and the MigLayout show it) and
			// retried, not only logged.
			logger.Error(err, "Rolling back GPU instances without a full-size compute instance", "gpu", idx)
			res.Results[idx] = r.failure(err)
			res.Retry = true
		}
	}

	// 1. Plan, refusing bad input and in-use devices before any change.
	var work []*gpuPlan
	for _, spec := range desired {
		idx := int(spec.Index)
		if _, lost := unreadable[idx]; lost {
			continue // reported with the final observation
		}
		if _, done := unrestored[idx]; done {
			continue
		}
		if err := orphans[idx]; err != nil {
			// A GI without a CI is still there: the GPU does not hold
			// its layout (the GI is never published) and no change is
			// planned on it until it is gone.
			logger.Error(err, "Rolling back GPU instances without a full-size compute instance", "gpu", idx)
			res.Results[idx] = r.failure(err) // Blocked while in use
			res.Retry = true
			continue
		}
		p, result := r.planGPU(obs, spec, inUse)
		if result == nil {
			if refused := r.refusal(unlisted, idx, p.drain); refused != nil {
				res.Results[idx] = *refused
				res.Retry = true
				continue
			}
		}
		if result != nil {
			if result.Reason == v1alpha1.ReasonInvalidLayout {
				result.Message += r.undoEnableForRefused(ctx, obs, idx)
			}
			if result.Reason == v1alpha1.ReasonDeviceInUse {
				result.Message += underClaimsNote(underClaims, idx)
				if p != nil {
					result.Message += r.holdersNote(ctx, inUse.Intersection(sets.New(p.drain...)))
				}
			}
			res.Results[idx] = *result
			res.Retry = res.Retry || result.Phase == v1alpha1.PhaseBlocked
			continue
		}
		if got, ok := deferred[idx]; ok {
			// Work to do, but not yet: no drain, no NVML step.
			res.Results[idx] = got
			res.Retry = true
			continue
		}
		if len(p.drain) > 0 && len(unknown.on(idx)) > 0 {
			if confirmed == nil {
				if confirmed, err = r.confirmLive(ctx, unknown); err != nil {
					return nil, err
				}
			}
			if names := confirmed.on(idx); len(names) > 0 {
				result := r.unknownAllocationResult(idx, names)
				result.Message += underClaimsNote(underClaims, idx)
				res.Results[idx] = result
				res.Retry = true
				continue
			}
		}
		work = append(work, p)
	}

	// 2. Drain every GPU's departing devices at once: one publication, one
	// settle period, one live re-check. A GPU whose journal entry cannot
	// be written is not drained (no NVML step is taken unjournaled): it
	// fails alone (JournalUnwritable), and the pass goes on to publish the
	// pool from NVML truth.
	draining := sets.New[string]()
	journaled := work[:0]
	for _, p := range work {
		if len(p.drain) > 0 {
			if err := r.Journal.Record(p.entry(StepDraining)); err != nil {
				logger.Error(err, "Not draining the GPU: its journal entry cannot be written", "gpu", p.index)
				res.Results[p.index] = journalFailure(fmt.Errorf("recording the drain of GPU %d: %w", p.index, err))
				res.Retry = true
				continue
			}
			draining.Insert(p.drain...)
		}
		journaled = append(journaled, p)
	}
	work = journaled
	if draining.Len() > 0 {
		start := time.Now()
		for _, p := range work {
			if len(p.drain) == 0 {
				continue
			}
			if err := report(p.index, GPUResult{Phase: v1alpha1.PhaseDraining, Reason: v1alpha1.ReasonDraining, Message: "draining " + strings.Join(p.drain, ", ")}); err != nil {
				logger.Error(err, "Showing the GPU Draining; going on (it is shown Repartitioning before its NVML work)", "gpu", p.index)
			}
		}
		logger.Info("Draining devices", "devices", sets.List(draining), "settle", r.SettlePeriod)
		err := r.publish(ctx, obs, draining)
		switch {
		case errors.Is(err, ErrDrainTaintsDropped):
			// Without taints nothing keeps the scheduler off the devices:
			// no GPU is touched; step 4 republishes the pool untainted.
			// GPUs that only gain devices go on.
			logger.Error(err, "Not repartitioning GPUs that must destroy devices: drain taints are not served")
			kept := work[:0]
			for _, p := range work {
				if len(p.drain) == 0 {
					kept = append(kept, p)
					continue
				}
				res.Results[p.index] = GPUResult{Phase: v1alpha1.PhaseFailed, Reason: v1alpha1.ReasonDeviceTaintsUnsupported, Message: err.Error()}
				r.keepMode(ctx, res, p.index)
			}
			res.Retry = true
			work = kept
		case err != nil:
			// The tainted publication may have been written all the
			// same (or be served later).
			return nil, r.undrain(ctx, obs, fmt.Errorf("publishing drain taints: %w", err))
		default:
			if err := r.sleep(ctx, r.SettlePeriod); err != nil {
				return nil, r.undrain(ctx, obs, err)
			}
		}
		// The cache first: an allocation it shows that the live read
		// then does not is stale or refused (vetted), not one made after
		// the live read.
		cached, err := r.guardedAllocations(ctx)
		if err != nil {
			return nil, r.undrain(ctx, obs, err)
		}
		allocatedLive, err := r.Allocations.AllocatedDevices(ctx, true)
		if err != nil {
			return nil, r.undrain(ctx, obs, fmt.Errorf("reading ResourceClaim allocations: %w", err))
		}
		live, unlistedLive, err := r.inUseWith(ctx, obs, allocatedLive)
		if err != nil {
			return nil, r.undrain(ctx, obs, err)
		}
		// Allocations under names the agent does not publish (another
		// publisher of the driver and pool) are outside the drain's
		// taints: one made in the settle period holds a device of its GPU
		// as surely as one the planning saw. A GPU that loses no device
		// (it only gains some, or cancels a pending mode change) goes on
		// beside them, as at planning.
		unknownLive := r.unknownIn(allocatedLive, obs)
		kept := work[:0]
		for _, p := range work {
			p.obs = obs
			if names := unknownLive.on(p.index); len(p.drain) > 0 && len(names) > 0 {
				logger.Info("Allocation under a name the agent does not publish seen after the drain; not repartitioning the GPU", "gpu", p.index, "names", names)
				res.Results[p.index] = r.unknownAllocationResult(p.index, names)
				res.Retry = true
				r.keepMode(ctx, res, p.index)
				continue
			}
			p.vetted = cached.Intersection(sets.New(p.drain...))
			if busy := live.Intersection(sets.New(p.drain...)); busy.Len() > 0 {
				logger.Info("Device got allocated while draining; keeping it", "gpu", p.index, "devices", sets.List(busy))
				res.Results[p.index] = GPUResult{Phase: v1alpha1.PhaseBlocked, Reason: v1alpha1.ReasonDeviceInUse,
					Message: fmt.Sprintf("in use, not destroyed: %s (allocated while draining)%s", strings.Join(sets.List(busy), ", "), r.holdersNote(ctx, busy))}
				res.Retry = true
				r.keepMode(ctx, res, p.index)
				continue
			}
			if refused := r.refusal(unlistedLive, p.index, p.drain); refused != nil {
				logger.Error(unlistedLive[p.index], "Listing the GPU's compute processes failed after the drain; not repartitioning it", "gpu", p.index)
				res.Results[p.index] = *refused
				res.Retry = true
				r.keepMode(ctx, res, p.index)
				continue
			}
			kept = append(kept, p)
		}
		work = kept
		// Withdraw the drained devices of the GPUs about to change
		// before any is destroyed: a claim tolerating the drain taint
		// could otherwise be allocated a device destroyed already for
		// as long as the rest of the pass runs (the later GPUs' NVML
		// work, a failed final observation). The check under each GPU's
		// lock (apply) still catches an allocation made before the
		// withdrawal was served.
		if err := r.withdraw(ctx, obs, work); err != nil {
			r.restore(ctx, obs)
			return nil, err
		}
		work, err = r.allocatedWhileWithdrawn(ctx, work, res)
		if err != nil {
			r.restore(ctx, obs)
			return nil, err
		}
		r.Metrics.observePhase("drain", time.Since(start))
	}

	// 3. Repartition, GPU by GPU, under the lock that prepare takes. Each
	// GPU is shown Repartitioning before the spec is read a last time:
	// a controller that cancels a change while the GPU shows Draining
	// (UnneededChanges) either has its cancel seen here or, its write
	// conditional on the NodeMigLayout it read, not written at all. Where
	// either step fails, or the spec changed, the GPU is left as it is
	// (Pending) and retried.
	applied := sets.New[int]() // GPUs whose NVML work began
	for _, p := range work {
		start := time.Now()
		// An API server that cannot be written or read stops the change
		// (retried as a failure: Stopped); a changed spec only defers it.
		// Either way the GPU shows Pending, so that its retry shows
		// Draining again (the Auto planner cancels changes it sees
		// draining).
		why, stopped := "", true
		if err := report(p.index, GPUResult{Phase: v1alpha1.PhaseRepartitioning, Reason: v1alpha1.ReasonRepartitioning, Message: p.describe()}); err != nil {
			why = fmt.Sprintf("the GPU could not be shown Repartitioning (%v)", err)
		} else if changed, err := r.specChanged(ctx, p); err != nil {
			why = fmt.Sprintf("the desired layout could not be read again before repartitioning (%v)", err)
		} else if changed {
			why, stopped = "the desired layout changed before the GPU was repartitioned", false
		}
		if why != "" {
			logger.Info("Leaving the GPU as it is this pass", "gpu", p.index, "layout", p.desired.String(), "why", why)
			if stopped {
				res.Stopped.Insert(p.index)
			}
			res.Results[p.index] = GPUResult{Phase: v1alpha1.PhasePending, Reason: v1alpha1.ReasonPending,
				Message: fmt.Sprintf("%s; %s not applied", why, p.desired.String())}
			res.Retry = true
			r.keepMode(ctx, res, p.index)
			continue
		}
		r.refreshed = false // devices made again from here on
		applied.Insert(p.index)
		result := r.apply(ctx, p)
		r.Metrics.observePhase("repartition", time.Since(start))
		r.Metrics.countRepartition(result.Phase)
		if result.Phase != v1alpha1.PhaseReady {
			res.Results[p.index] = result
			res.Retry = true
		} else {
			res.Changed.Insert(p.index)
		}
	}

	// 4. Republish the whole pool from NVML truth, no device tainted but
	// those a pending MIG mode change removes. An agent told to stop
	// (SIGTERM) during step 3 republishes all the same, for at most
	// stopRepublishTimeout: the last publication, the withdrawal, left
	// out the devices step 3 destroys, but lacks those it made until the
	// next agent starts; it leaves out the devices a change it cut short
	// has still to destroy (unfinishedDestroys).
	start := time.Now()
	pubCtx := ctx
	if ctx.Err() != nil {
		var cancel context.CancelFunc
		pubCtx, cancel = context.WithTimeout(context.WithoutCancel(ctx), stopRepublishTimeout)
		defer cancel()
	}
	if obs, unreadable, err = r.observe(pubCtx); err != nil {
		return res.changedOnly(), err
	}
	// A GPU NVML cannot read is failed, managed or not (so that status
	// shows it), and its devices are left out of the pool.
	r.Metrics.setUnreadable(len(unreadable))
	for idx, err := range unreadable {
		logger.Error(err, "GPU unreadable; its devices are not published", "gpu", idx)
		res.Results[idx] = GPUResult{Phase: v1alpha1.PhaseFailed, Reason: v1alpha1.ReasonGPUUnreadable, Message: unreadableMessage(err)}
		res.Retry = true
	}
	pub := obs
	if ctx.Err() != nil {
		if gone := r.unfinishedDestroys(obs, applied); gone.Len() > 0 {
			logger.Info("Stopping part way through a change: its devices still to destroy stay withdrawn", "devices", sets.List(gone))
			pub = r.without(obs, gone)
		}
	}
	switch err := r.publish(pubCtx, pub, nil); {
	case errors.Is(err, ErrDrainTaintsDropped):
		// Only devices a pending MIG mode change removes, and devices an
		// Xid hit, carry a taint here (PoolInventory.Publish): they stay
		// published, untainted (until the GPU's reset, or the agent's
		// restart); later passes leave the taints out for
		// PendingTaintsRetry, then try them again.
		logger.Error(err, "Devices a pending MIG mode change removes, or an Xid hit, are published without their taint")
	case err != nil:
		return res.changedOnly(), fmt.Errorf("republishing pool: %w", err)
	}
	r.Metrics.observePhase("republish", time.Since(start))
	res.GPUs = obs
	r.refreshRecreated(ctx)
	var unlistedNow unlistedGPUs
	if res.InUse, unlistedNow, err = r.inUseLayouts(ctx, obs); err != nil {
		return res.changedOnly(), err
	}
	// A GPU whose processes could not be listed now shows every device in
	// use (so that nothing plans to destroy one) until a pass lists them.
	for _, idx := range slices.Sorted(maps.Keys(unlistedNow)) {
		logger.Error(unlistedNow[idx], "Listing the GPU's compute processes failed; every device of it is reported in use until a pass lists them", "gpu", idx)
		res.Retry = true
	}
	r.Metrics.recordDevices(res)
	for _, spec := range desired {
		idx := int(spec.Index)
		if _, done := res.Results[idx]; done {
			continue
		}
		if g := findGPU(obs, idx); g != nil && matches(g, spec) {
			res.Results[idx] = GPUResult{Phase: v1alpha1.PhaseReady, Reason: v1alpha1.ReasonLayoutApplied, Message: "layout applied"}
		} else {
			res.Results[idx] = GPUResult{Phase: v1alpha1.PhasePending, Reason: v1alpha1.ReasonPending, Message: "differs from the desired layout after the pass; retrying"}
			res.Retry = true
		}
	}
	// Work on a GPU ends when it is Ready, Failed on input, or no longer
	// asked for (the spec changed while it was in flight): its journal
	// entry goes. Blocked and retried GPUs keep theirs (one that stopped
	// before its NVML work ended it then: keepMode), and so does a GPU
	// NVML does not count now (GPUMissing: not enumerated after a crash
	// and a reboot), whose half-made work is the agent's to undo once it
	// is back, asked for or not (a MIG mode it set, pending, is cancelled
	// then; the entries are read for the GPU of their UUID only).
	for _, e := range r.Journal.Entries() {
		got, asked := res.Results[e.GPU]
		if asked && got.Phase != v1alpha1.PhaseReady && (!onInput(got) || got.Reason == v1alpha1.ReasonGPUMissing) {
			continue
		}
		if _, unread := unreadable[e.GPU]; !asked && (findGPU(obs, e.GPU) == nil || unread) {
			continue
		}
		if !asked && orphans[e.GPU] != nil {
			// Its GI without a CI could not be rolled back: the entry
			// keeps it the agent's to roll back on the next pass.
			continue
		}
		if asked && got.Phase != v1alpha1.PhaseReady {
			// Failed on input: the MIG mode the agent set for the work
			// (ModeSet) stays recorded, so that a change of it NVML
			// still holds pending is cancelled once no spec asks for
			// the GPU.
			r.keepMode(ctx, res, e.GPU)
			continue
		}
		if err := r.Journal.Clear(e.GPU); err != nil {
			// The entry stays as it was: what it names is done, and a
			// later pass clears it.
			logger.Error(err, "Could not clear the GPU's journal entry; a later pass does", "gpu", e.GPU)
			res.Retry = true
		}
	}
	return res, nil
}

// keepMode ends GPU idx's work in flight this pass (Journal.KeepMode). A
// journal that cannot be written keeps the entry as it was: it names no
// NVML step this pass took (its step is Draining, or an earlier pass's),
// so the pass goes on, with step 4 republishing the pool from NVML truth,
// and a later pass tries again.
func (r *Repartitioner) keepMode(ctx context.Context, res *SyncResult, idx int) {
	if err := r.Journal.KeepMode(idx); err != nil {
		klog.FromContext(ctx).Error(err, "Could not end the GPU's journal entry for this pass; a later pass does", "gpu", idx)
		res.Retry = true
	}
}

// planGPU computes the work for one GPU, or a final result when there is
// none (already Ready) or it must not be touched (Failed, Blocked).
func (r *Repartitioner) planGPU(obs []GPUState, spec v1alpha1.GPUSpec, inUse sets.Set[string]) (*gpuPlan, *GPUResult) {
	idx := int(spec.Index)
	g := findGPU(obs, idx)
	if g == nil {
		return nil, &GPUResult{Phase: v1alpha1.PhaseFailed, Reason: v1alpha1.ReasonGPUMissing, Message: fmt.Sprintf("the node has no GPU with index %d", idx)}
	}
	if !forGPU(spec, g) && !matches(g, spec) {
		// Written for the GPU NVML showed at idx before it numbered the
		// GPUs anew: a layout for another GPU, another model perhaps.
		where := "no GPU of this node has that UUID: it left the node or was not found at boot, or the spec was edited by hand"
		if j := slices.IndexFunc(obs, func(o GPUState) bool { return o.GPU.UUID == spec.UUID }); j >= 0 {
			where = fmt.Sprintf("NVML shows that GPU at index %d: the GPUs were numbered anew (one left the node or was not found at boot), or the spec was edited by hand", obs[j].GPU.Index)
		}
		return nil, &GPUResult{Phase: v1alpha1.PhaseBlocked, Reason: v1alpha1.ReasonSpecForAnotherGPU,
			Message: fmt.Sprintf("the spec of gpu %d was written for %s; NVML shows %s (%s) at index %d now (%s): the GPU is left as it is until the spec is written for it",
				idx, spec.UUID, g.GPU.UUID, g.GPU.ProductName, idx, where)}
	}
	if !spec.MIGEnabled && !g.GPU.MIGMode.Current && !g.GPU.MIGMode.Pending && (!g.GPU.MIGCapable || g.GPU.Model == nil) {
		// MIG off, as asked, on a GPU without MIG or of no catalogued
		// model: nothing to do.
		return nil, &GPUResult{Phase: v1alpha1.PhaseReady, Reason: v1alpha1.ReasonLayoutApplied}
	}
	if !g.GPU.MIGCapable {
		return nil, &GPUResult{Phase: v1alpha1.PhaseFailed, Reason: v1alpha1.ReasonUnknownGPU, Message: fmt.Sprintf("GPU %d (%s) does not support MIG", idx, g.GPU.ProductName)}
	}
	if g.GPU.Model == nil {
		return nil, &GPUResult{Phase: v1alpha1.PhaseFailed, Reason: v1alpha1.ReasonUnknownGPU, Message: fmt.Sprintf("GPU %d: product %q is not in the MIG catalog; layouts cannot be validated", idx, g.GPU.ProductName)}
	}
	p := &gpuPlan{index: idx, state: g, model: g.GPU.Model, spec: spec}
	// A mode change the spec asks for is pending (an Ampere GPU was in use
	// when it was set): it is set again once nothing uses the devices it
	// removes, as nvml.h asks ("idle the device and retry setting the
	// mode"); until then the GPU waits for that or a reset.
	pendingAsked := g.GPU.MIGMode.Current != g.GPU.MIGMode.Pending && g.GPU.MIGMode.Pending == spec.MIGEnabled
	// A mode change is pending that the spec no longer asks for (it was
	// reverted before a reset): cancel it, or the next reset applies it.
	p.cancelPending = g.GPU.MIGMode.Current != g.GPU.MIGMode.Pending && !pendingAsked
	actual := layoutOf(g)
	if spec.MIGEnabled {
		desired, err := mig.ParseLayout(spec.Layout)
		if err == nil {
			// A GPU instance of a profile the catalog lacks may be kept
			// where it stands (an Auto change cancelled while a claim
			// holds it), never created.
			err = p.model.ValidateKeeping(desired, heldOther(g, p.model))
		}
		if err != nil {
			return nil, &GPUResult{Phase: v1alpha1.PhaseFailed, Reason: v1alpha1.ReasonInvalidLayout, Message: err.Error()}
		}
		p.desired = desired
		p.enableMIG = !g.GPU.MIGMode.Current
		p.plan = p.model.Diff(actual, desired)
		if p.enableMIG {
			p.drain = append(p.drain, r.Inventory.DeviceName(g.GPU, nil))
		}
	} else {
		p.disableMIG = g.GPU.MIGMode.Current
		p.plan = p.model.Diff(actual, nil)
	}
	if err := nvmlRefuses(g.GPU, p.plan.Create); err != nil {
		return nil, &GPUResult{Phase: v1alpha1.PhaseFailed, Reason: v1alpha1.ReasonInvalidLayout, Message: err.Error()}
	}
	for _, d := range p.plan.Destroy {
		if md := findDevice(g, d); md != nil {
			p.drain = append(p.drain, r.Inventory.DeviceName(g.GPU, md))
		}
	}
	if p.plan.Empty() && !p.enableMIG && !p.disableMIG && !p.cancelPending {
		return nil, &GPUResult{Phase: v1alpha1.PhaseReady, Reason: v1alpha1.ReasonLayoutApplied, Message: "layout applied"}
	}
	if !pendingAsked {
		delete(r.awaitingReboot, g.GPU.UUID)
	} else if mode, ok := r.awaitingReboot[g.GPU.UUID]; ok && mode == spec.MIGEnabled {
		// Nothing to retry: the change waits for the reboot, not for an
		// idle GPU. Its devices stay published as they are, and the GPU
		// says what the pass that set the mode said.
		res := modePending(spec.MIGEnabled, idx, rebootNeeded)
		return nil, &res
	}
	busy := inUse.Intersection(sets.New(p.drain...))
	if busy.Len() > 0 && pendingAsked {
		return nil, &GPUResult{Phase: v1alpha1.PhaseBlocked, Reason: v1alpha1.ReasonResetRequired,
			Message: fmt.Sprintf("MIG mode change to %v is pending until GPU %d is reset: in use %s; it is set again once nothing uses them, and the driver then resets the GPU (another NVML client on the node, such as a metrics exporter, also keeps it from being reset; an external nvidia-smi -r fails while this agent holds NVML), or reboot the node",
				spec.MIGEnabled, idx, strings.Join(sets.List(busy), ", "))}
	}
	if busy.Len() > 0 {
		// p comes with it: the caller names who holds the devices.
		return p, &GPUResult{Phase: v1alpha1.PhaseBlocked, Reason: v1alpha1.ReasonDeviceInUse,
			Message: fmt.Sprintf("in use, not destroyed: %s (allocated, prepared or running a process); waiting for it to be released", strings.Join(sets.List(busy), ", "))}
	}
	return p, nil
}

func (p *gpuPlan) describe() string {
	var parts []string
	if p.cancelPending {
		parts = append(parts, "cancel the pending MIG mode change")
	}
	if p.enableMIG {
		parts = append(parts, "enable MIG")
	}
	if len(p.plan.Destroy) > 0 {
		parts = append(parts, "destroy "+p.plan.Destroy.String())
	}
	if len(p.plan.Create) > 0 {
		parts = append(parts, "create "+joinDevices(p.plan.Create))
	}
	if p.disableMIG {
		parts = append(parts, "disable MIG")
	}
	return strings.Join(parts, "; ")
}

func (p *gpuPlan) entry(step Step) JournalEntry {
	e := JournalEntry{GPU: p.index, UUID: p.state.GPU.UUID, Step: step, Desired: p.desired.String(), ModeSet: p.modeSet}
	for _, d := range p.plan.Destroy {
		e.Destroy = append(e.Destroy, d.String())
	}
	for _, d := range p.plan.Create {
		e.Create = append(e.Create, d.String())
	}
	return e
}

// unreadableMessage is the status message of a GPU NVML cannot read
// (gpu.Unreadable) with err. ERROR_NO_PERMISSION is the agent's own
// deployment, not the GPU: the message says what to look at.
func unreadableMessage(err error) string {
	msg := fmt.Sprintf("NVML cannot read the GPU, so its devices are not published: %v", err)
	if errors.Is(err, gpu.ErrNoPermission) {
		msg += " (the agent's container lacks the GPU's device node or the privilege NVML asks for to read MIG devices: the chart runs the agent privileged, with every GPU's device node)"
	}
	return msg
}

// journalFailure is the result of a GPU whose journal entry could not be
// written (the state directory full or read-only): Failed, reason
// JournalUnwritable, no NVML call made for the step (and none counted as an
// NVML error).
func journalFailure(err error) GPUResult {
	return journalFailureAfter(err, nil)
}

// journalFailureAfter is journalFailure for a GPU whose change stopped part
// way, done (devices destroyed or created, as "3g.40gb@0") taken already.
func journalFailureAfter(err error, done []string) GPUResult {
	if len(done) == 0 {
		return GPUResult{Phase: v1alpha1.PhaseFailed, Reason: ReasonJournalUnwritable,
			Message: fmt.Sprintf("not repartitioned: the agent's journal cannot be written, and no NVML step is taken unjournaled: %v", err)}
	}
	return GPUResult{Phase: v1alpha1.PhaseFailed, Reason: ReasonJournalUnwritable,
		Message: fmt.Sprintf("repartitioning stopped part way (done: %s): the agent's journal cannot be written, and no further NVML step is taken unjournaled: %v",
			strings.Join(done, ", "), err)}
}

// stopRepublishTimeout bounds the republication of a pass the agent's stop
// cut short (step 4 of Reconcile); the manager gives runnables 30 s to end.
const stopRepublishTimeout = 10 * time.Second

// lockedReadTimeout bounds a live API read made while a GPU's lock is held
// (a variable for tests).
var lockedReadTimeout = 30 * time.Second

// failure is the result of a GPU whose change failed with err: Pending
// where the agent is stopping (context.Canceled), Blocked while a device is
// in use (ErrInUse) or a reset is needed (ErrResetRequired), Failed as an
// NVML error (counted in miglayout_agent_nvml_errors_total) where NVML gave
// it, and Pending, PassFailed, for an error that is not NVML's (the API
// server could not be read: counted in miglayout_agent_failed_passes_total):
// the agent retries, and an outage of the API server is not reported as a
// fault of the GPU.
func (r *Repartitioner) failure(err error) GPUResult {
	if errors.Is(err, context.Canceled) {
		// The agent is stopping (its context cancelled): the step was
		// not taken, not refused; the journal has the work, and the
		// next start takes it up.
		return GPUResult{Phase: v1alpha1.PhasePending, Reason: ReasonPassFailed,
			Message: fmt.Sprintf("stopped before this GPU's change was done (the agent is stopping); taken up again when it starts: %v", err)}
	}
	if !gpu.IsNVMLError(err) {
		r.Metrics.countFailedPass()
		return GPUResult{Phase: v1alpha1.PhasePending, Reason: ReasonPassFailed,
			Message: fmt.Sprintf("this GPU's change stopped on an error that is not NVML's; retrying: %v", err)}
	}
	if errors.Is(err, gpu.ErrInUse) {
		return GPUResult{Phase: v1alpha1.PhaseBlocked, Reason: v1alpha1.ReasonDeviceInUse, Message: err.Error()}
	}
	if errors.Is(err, gpu.ErrResetRequired) {
		return GPUResult{Phase: v1alpha1.PhaseBlocked, Reason: v1alpha1.ReasonResetRequired, Message: err.Error()}
	}
	r.Metrics.countNVMLError(err)
	return GPUResult{Phase: v1alpha1.PhaseFailed, Reason: v1alpha1.ReasonNVMLError, Message: err.Error()}
}

// observe reads every GPU and its MIG devices from NVML. A GPU NVML counts
// but cannot read (gpu.Unreadable: lost, not accessible) is left out and
// returned in unreadable (by index) with its error: one GPU fallen off the
// bus does not stop the node's others. Any other error (one that may pass,
// such as ERROR_UNKNOWN) fails the whole observation, so that a sound GPU's
// devices, allocated ones among them, are never withdrawn for it, unless
// the GPU's reads have failed so for StuckReadAfter: it is then unreadable.
func (r *Repartitioner) observe(ctx context.Context) (obs []GPUState, unreadable map[int]error, err error) {
	now := r.now()
	defer r.beginReads()()
	gpus, err := r.GPUs.GPUs(ctx)
	var failed *gpu.FailedGPUsError
	if errors.As(err, &failed) {
		if stuck := r.stuckReads(failed.Failed, now); stuck != nil {
			all := maps.Clone(failed.Unreadable)
			if all == nil {
				all = map[int]error{}
			}
			maps.Copy(all, stuck)
			err = &gpu.UnreadableGPUsError{Errors: all}
		}
	}
	unreadable, err = gpu.SplitUnreadable(err)
	if err != nil {
		return nil, nil, fmt.Errorf("listing GPUs: %w", err)
	}
	if unreadable == nil {
		unreadable = map[int]error{}
	}
	obs = make([]GPUState, 0, len(gpus))
	for _, g := range gpus {
		st := GPUState{GPU: g}
		if g.MIGCapable && g.MIGMode.Current {
			devs, err := r.GPUs.MIGDevices(ctx, g.Index)
			if gpu.Unreadable(err) {
				unreadable[g.Index] = fmt.Errorf("listing MIG devices: %w", err)
				continue
			}
			if err != nil {
				// Maybe passing: the pass fails and the pool stays
				// as published, unless it has failed so for long.
				if stuck := r.noteFailedRead(readOf{g.Index, readMIGDevices}, fmt.Errorf("listing MIG devices: %w", err), now); stuck != nil {
					unreadable[g.Index] = stuck
					continue
				}
				return nil, nil, fmt.Errorf("listing MIG devices of GPU %d: %w", g.Index, err)
			}
			st.Devices = devs
		}
		obs = append(obs, st)
	}
	r.counted = sets.New(slices.Collect(maps.Keys(unreadable))...)
	for _, g := range obs {
		r.counted.Insert(g.GPU.Index)
	}
	return obs, unreadable, nil
}

func (r *Repartitioner) sleep(ctx context.Context, d time.Duration) error {
	if r.Sleep != nil {
		return r.Sleep(ctx, d)
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

func findGPU(obs []GPUState, idx int) *GPUState {
	for i := range obs {
		if obs[i].GPU.Index == idx {
			return &obs[i]
		}
	}
	return nil
}

func findDevice(g *GPUState, d mig.Device) *gpu.MIGDevice {
	for i := range g.Devices {
		if g.Devices[i].Device() == d {
			return &g.Devices[i]
		}
	}
	return nil
}

// nvmlRefuses returns why NVML would refuse to create one of devices on g,
// where g's NVML differs from the catalog (gpu.GPU.NVMLPlacements,
// NVMLProfileIDs), so that the GPU is not touched for a layout that cannot
// be made; nil otherwise.
func nvmlRefuses(g gpu.GPU, devices mig.Layout) error {
	for _, d := range devices {
		if id, ok := g.NVMLProfileIDs[d.Profile]; ok {
			p, _ := g.Model.Profile(d.Profile)
			return fmt.Errorf("cannot create %s on GPU %d: NVML gives %s GI profile ID %d, the catalog %d (see catalogMismatches); miglayout creates no %s there until its catalog agrees",
				d, g.Index, d.Profile, id, p.ID, d.Profile)
		}
		pls, ok := g.NVMLPlacements[d.Profile]
		if !ok {
			continue
		}
		// A device is created at the catalog's placement, start and
		// width: NVML must offer exactly that one.
		want := mig.Placement{Start: d.Start}
		if p, err := g.Model.Profile(d.Profile); err == nil {
			want.Size = p.MemorySlices
		}
		if slices.Contains(pls, want) {
			continue
		}
		if len(pls) == 0 {
			return fmt.Errorf("cannot create %s on GPU %d: NVML does not offer %s on this GPU (see catalogMismatches)", d, g.Index, d.Profile)
		}
		offered := make([]string, len(pls))
		for i, pl := range pls {
			offered[i] = strconv.Itoa(pl.Start) + "+" + strconv.Itoa(pl.Size)
		}
		return fmt.Errorf("cannot create %s on GPU %d (memory slices %d+%d): NVML offers %s at %s only (start+memory slices; the catalog differs, see catalogMismatches)",
			d, g.Index, want.Start, want.Size, d.Profile, strings.Join(offered, ","))
	}
	return nil
}

// heldOther is the GPU's GPU instances of profiles model lacks as NVML
// reports them (placements, media engines), for
// mig.Model.ValidateKeeping.
func heldOther(g *GPUState, model *mig.Model) map[mig.Device]mig.HeldInstance {
	out := map[mig.Device]mig.HeldInstance{}
	for _, d := range g.Devices {
		if _, err := model.Profile(d.Profile); err != nil {
			out[d.Device()] = mig.HeldInstance{Placement: d.Placement, JPEGEngines: d.JPEGEngines, OFAEngines: d.OFAEngines}
		}
	}
	return out
}

// layoutOf is the GPU's current layout, GIs without CI included.
func layoutOf(g *GPUState) mig.Layout {
	l := make(mig.Layout, 0, len(g.Devices))
	for _, d := range g.Devices {
		l = append(l, d.Device())
	}
	return l.Canonical()
}

// forGPU reports whether spec was written for g: it names g's UUID, or no
// UUID (an entry of an earlier release). One written for another GPU, which
// NVML showed at g's index before it numbered the GPUs anew, is not g's:
// nothing of g is changed on its account (planGPU, rollbackOrphans,
// cancelModesUnderClaims).
func forGPU(spec v1alpha1.GPUSpec, g *GPUState) bool {
	return spec.UUID == "" || spec.UUID == g.GPU.UUID
}

// matches reports whether the GPU holds what spec asks for, every GPU
// instance with its compute instance (a GI without one, e.g. after a CI
// create that NVML reported but did not do, is rolled back and made again on
// the retry).
func matches(g *GPUState, spec v1alpha1.GPUSpec) bool {
	if g.GPU.MIGMode.Current != spec.MIGEnabled || g.GPU.MIGMode.Pending != spec.MIGEnabled {
		return false
	}
	for _, d := range g.Devices {
		if d.CIID < 0 {
			return false
		}
	}
	if !spec.MIGEnabled {
		return true
	}
	want, err := mig.ParseLayout(spec.Layout)
	return err == nil && layoutOf(g).Equal(want)
}

func joinDevices(l mig.Layout) string {
	s := make([]string, len(l))
	for i, d := range l {
		s[i] = d.String()
	}
	return strings.Join(slices.Clip(s), ",")
}

// specChanged reads the desired specs again (Reread) and reports whether
// the spec of p's GPU is no longer the one the pass works from (changed,
// gone, or written for another GPU than the one at its index: forGPU; the
// next pass reports SpecForAnotherGPU). Without Reread it reports false;
// when Reread fails, its error (the GPU is then left as it is: a cancel
// may have been written).
func (r *Repartitioner) specChanged(ctx context.Context, p *gpuPlan) (bool, error) {
	if r.Reread == nil {
		return false, nil
	}
	now, err := r.Reread(ctx)
	if err != nil {
		return false, err
	}
	i := slices.IndexFunc(now, func(s v1alpha1.GPUSpec) bool { return s.Index == p.spec.Index })
	return i < 0 || now[i].MIGEnabled != p.spec.MIGEnabled || now[i].Layout != p.spec.Layout || !forGPU(now[i], p.state), nil
}

// refreshRecreated has the kubelet plugin (Prepared, where it is a
// RecreatedRefresher) bring up to date the preparations of devices made
// again under their names: after the pool's republication, in every pass
// since NVML work began on a GPU (whatever its outcome: a create that
// succeeded before one that failed made a device) until a refresh
// succeeds, and in the first pass of the process. A pass whose
// republication fails, or that the agent's stop cuts short, leaves it to
// the next pass.
func (r *Repartitioner) refreshRecreated(ctx context.Context) {
	refresher, ok := r.Prepared.(RecreatedRefresher)
	if !ok || r.refreshed || ctx.Err() != nil {
		return
	}
	failed := refresher.RefreshRecreated(ctx)
	for _, uid := range slices.Sorted(maps.Keys(failed)) {
		klog.FromContext(ctx).Error(failed[uid], "Could not write the CDI spec of a prepared claim for its devices made again; the next pass tries again", "claimUID", uid)
	}
	r.refreshed = len(failed) == 0
}

// undoEnableForRefused turns MIG mode off again on GPU idx, whose layout
// NVML refuses (InvalidLayout), where the journal records that the agent
// turned it on for that work and the GPU holds no GPU instance: an agent
// stopped between enabling MIG mode and checking the layout against the
// GPU's profile table (refusedOnceEnabled) would otherwise leave it in MIG
// mode without devices, publishing nothing, for as long as the spec
// stands. It returns what to add to the GPU's message ("" where it did
// nothing).
func (r *Repartitioner) undoEnableForRefused(ctx context.Context, obs []GPUState, idx int) string {
	g := findGPU(obs, idx)
	if g == nil || !g.GPU.MIGMode.Current || len(g.Devices) > 0 {
		return ""
	}
	entries := r.Journal.Entries()
	i := slices.IndexFunc(entries, func(e JournalEntry) bool { return e.GPU == idx })
	if i < 0 || entries[i].UUID != g.GPU.UUID || entries[i].ModeSet == nil || !*entries[i].ModeSet {
		return ""
	}
	mode, locked, err := r.setMIGMode(ctx, idx, false)
	switch {
	case !locked:
		return ""
	case err != nil:
		return fmt.Sprintf("; turning MIG mode, turned on for this layout, off again failed, the GPU is left in MIG mode without devices: %v", err)
	case mode.Current:
		return fmt.Sprintf("; MIG mode, turned on for this layout, is turned off again, pending until GPU %d is reset", idx)
	}
	klog.FromContext(ctx).Info("NVML refuses the layout; MIG mode, turned on for it before the agent stopped, is turned off again", "gpu", idx)
	return "; MIG mode, turned on for this layout, is turned off again"
}
