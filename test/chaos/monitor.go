package chaos

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"

	"github.com/miglayout/miglayout/pkg/mig/nvmlsim"
	migslices "github.com/miglayout/miglayout/pkg/slices"
	"github.com/miglayout/miglayout/test/cluster"
	"github.com/miglayout/miglayout/test/cluster/clustertest"
)

// FindingKind classifies what the monitor saw.
type FindingKind string

const (
	// AllocatedDestroyed: a ResourceClaim allocation references a device that NVML no
	// longer has, or that NVML has with another UUID than when the claim got it (destroyed
	// and created again), or a simulated process runs on a device NVML lacks; NVML is
	// read under the simulator lock together with a live list of the claims, so nothing
	// can change in between. Also (replayed in etcd order) a device the pool publishes
	// again under its name with another UUID while an allocation references it: a device
	// destroyed and created again before the first poll that saw the allocation.
	// Invariant 1: must be 0.
	AllocatedDestroyed FindingKind = "allocated device destroyed"
	// TaintedAllocation: an allocation landed (in etcd order) while the device was
	// published with the drain taint. The scheduler took the decision before it saw the
	// taint (an in-flight decision) or ignored the taint; the agent's settle period and
	// live re-check exist to catch the first kind.
	TaintedAllocation FindingKind = "allocated tainted device"
	// UnpublishedAllocation: an allocation landed (in etcd order) on a device the pool no
	// longer published: the scheduler decided on a pool view the agent had replaced.
	UnpublishedAllocation FindingKind = "allocated unpublished device"
	// WithdrawnAllocated: the pool stopped publishing a device while an allocation
	// referenced it (the agent republishes from NVML truth, so this follows a destroy, or
	// a pool publication that lost a device). A pool whose slices were all deleted is
	// absent instead (PoolAbsence): its devices count as withdrawn only where the pool
	// is published again without them.
	WithdrawnAllocated FindingKind = "allocated device withdrawn"
	// RefusedAllocation: what would be one of the above, on a device published with
	// binding conditions whose allocation the agent has not confirmed (DeviceReady):
	// the scheduler binds no pod to it, so it is no violation; the agent answers it
	// DeviceRemoved and the scheduler allocates again.
	RefusedAllocation FindingKind = "allocation awaiting binding refused"
	// UndrainedDestroyed: NVML destroyed a MIG device (a poll lacked the UUID a
	// poll or a publication had) whose UUID left the pool's complete view (in etcd
	// order) from a publication without the drain taint: the agent destroys a
	// device only once it published it tainted, let the settle period pass and
	// withdrew it, so that no allocation in flight lands on it. Judged from the
	// UUID's publication history once the replay has caught up (judgeDestroyed),
	// which names what is exempt. Must be 0.
	UndrainedDestroyed FindingKind = "device destroyed without drain"
)

// awaitingBinding reports whether the claim's allocation result r waits for the agent's
// confirmation (binding conditions published, DeviceReady not True): no pod is bound to it.
func awaitingBinding(c *resourceapi.ResourceClaim, r resourceapi.DeviceRequestAllocationResult) bool {
	if !migslices.RequiresBinding(r) {
		return false
	}
	for _, d := range c.Status.Devices {
		if d.Driver == r.Driver && d.Pool == r.Pool && d.Device == r.Device {
			return !apimeta.IsStatusConditionTrue(d.Conditions, migslices.BindingConditionReady)
		}
	}
	return true
}

// refusedIfWaiting turns a finding on an allocation that waits for binding into a
// RefusedAllocation, keeping what it would have been in its detail.
func refusedIfWaiting(f Finding, waiting bool) Finding {
	if waiting {
		f.Detail = strings.TrimSuffix(string(f.Kind)+"; "+f.Detail, "; ")
		f.Kind = RefusedAllocation
	}
	return f
}

// Finding is one violation seen by the monitor.
type Finding struct {
	Kind   FindingKind
	Pool   string // node
	Device string
	Claim  string // namespace/name
	At     time.Time
	// Lag is, for TaintedAllocation, the time from the taint's publication to the
	// allocation (both as the watch delivered them).
	Lag    time.Duration
	Detail string
}

func (f Finding) String() string {
	s := fmt.Sprintf("%s: claim %s → %s/%s", f.Kind, f.Claim, f.Pool, f.Device)
	if f.Claim == "" {
		s = fmt.Sprintf("%s: %s/%s", f.Kind, f.Pool, f.Device)
	}
	if f.Kind == TaintedAllocation {
		s += fmt.Sprintf(" %dms after the taint", f.Lag.Milliseconds())
	}
	if f.Detail != "" {
		s += " (" + f.Detail + ")"
	}
	return s
}

// DrainEpisode is a period during which a pool published some device with the drain taint.
type DrainEpisode struct {
	Pool       string
	Start, End time.Time // End zero while open
	Devices    []string
}

// Monitor watches ResourceSlices and ResourceClaims (every event, replayed in etcd
// revision order, so that an allocation is compared with the pool exactly as it was
// published when the allocation was written) and polls the simulators under their locks
// together with a live list of the claims (so that NVML cannot change between the two).
type Monitor struct {
	env    *Env
	pools  map[string]bool
	cancel context.CancelFunc
	done   sync.WaitGroup

	mu  sync.Mutex
	buf []event
	// Replay state.
	lastRV     uint64
	outOfOrder int
	// polledAt are the times of the successful polls, in order: a verdict
	// over a period without one would find no destroyed allocation for
	// want of looking (PollsSince).
	polledAt  []time.Time
	slices    map[string]*resourceapi.ResourceSlice
	views     map[string]map[string]published // pool → device → state
	allocs    map[types.UID]claimAlloc
	taintedAt map[string]time.Time // pool/device → when the taint was published
	episodes  []DrainEpisode
	open      map[string]int // pool → index of its open episode
	// absent: pool → its view before it was hidden, while the scheduler sees
	// nothing of it: it has no slice (see PoolAbsence) or is incomplete;
	// hiddenAt: since when.
	absent   map[string]map[string]published
	hiddenAt map[string]time.Time
	absences []PoolAbsence
	// NVML poller state: claimUID|pool/device → UUID when first seen allocated.
	tracked map[string]string
	polls   int
	// Findings, deduplicated by kind, claim and device.
	findings []Finding
	seen     map[string]bool
	// refused: claimUID|pool/device → the finding an allocation waiting for a binding
	// confirmation would have been, recorded if the agent confirms it after all.
	refused map[string]Finding
	// lives: device UUID → what the polls and the replay know of it, until
	// judgeDestroyed judges its destroy; judged: the UUIDs it judged.
	lives  map[string]*deviceLife
	judged map[string]bool
	errs   []string
}

type event struct {
	rv      uint64
	at      time.Time
	typ     watch.EventType
	slice   *resourceapi.ResourceSlice
	claim   *resourceapi.ResourceClaim
	initial bool
	// resync: the names of the slices (or UIDs of the claims) a fresh list holds.
	resync       map[string]bool
	resyncSlices bool
}

type published struct {
	uuid    string
	tainted bool
}

type claimAlloc struct {
	key     string // namespace/name
	devices map[string]bool
	// waiting: the devices whose allocation awaits the agent's binding confirmation.
	waiting map[string]bool
}

// NewMonitor starts a monitor of the given nodes' pools. Stop it with Stop.
func NewMonitor(ctx context.Context, env *Env, nodes []string, pollEvery time.Duration) (*Monitor, error) {
	m := &Monitor{
		env: env, pools: map[string]bool{},
		slices: map[string]*resourceapi.ResourceSlice{}, views: map[string]map[string]published{},
		allocs: map[types.UID]claimAlloc{}, taintedAt: map[string]time.Time{}, open: map[string]int{},
		tracked: map[string]string{}, seen: map[string]bool{}, refused: map[string]Finding{},
		absent: map[string]map[string]published{}, hiddenAt: map[string]time.Time{},
	}
	for _, n := range nodes {
		m.pools[n] = true
	}
	ctx, m.cancel = context.WithCancel(ctx)
	slices0, err := m.list(ctx, true)
	if err != nil {
		m.cancel()
		return nil, err
	}
	claims0, err := m.list(ctx, false)
	if err != nil {
		m.cancel()
		return nil, err
	}
	m.Checkpoint()
	for i, rv0 := range []string{slices0, claims0} {
		isSlices := i == 0
		m.done.Add(1)
		go func() {
			defer m.done.Done()
			m.watch(ctx, isSlices, rv0)
		}()
	}
	m.done.Add(1)
	go func() {
		defer m.done.Done()
		t := time.NewTicker(pollEvery)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				m.poll(ctx)
			}
		}
	}()
	return m, nil
}

// Stop stops the watches and the poller.
func (m *Monitor) Stop() {
	m.cancel()
	m.done.Wait()
}

func rv(s string) uint64 {
	n, _ := strconv.ParseUint(s, 10, 64)
	return n
}

// list lists the slices (or claims) into the buffer as a resync: objects absent from the
// list are forgotten when it is replayed (their deletion may have been missed). It
// returns the list's resourceVersion.
func (m *Monitor) list(ctx context.Context, slices bool) (string, error) {
	now := time.Now()
	var evs []event
	var listRV string
	if slices {
		l, err := m.env.Client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{})
		if err != nil {
			return "", err
		}
		listRV = l.ResourceVersion
		for i := range l.Items {
			evs = append(evs, event{rv: rv(l.Items[i].ResourceVersion), at: now, typ: watch.Added, slice: &l.Items[i], initial: true})
		}
	} else {
		l, err := m.env.Client.ResourceV1().ResourceClaims("").List(ctx, metav1.ListOptions{})
		if err != nil {
			return "", err
		}
		listRV = l.ResourceVersion
		for i := range l.Items {
			evs = append(evs, event{rv: rv(l.Items[i].ResourceVersion), at: now, typ: watch.Added, claim: &l.Items[i], initial: true})
		}
	}
	resync := event{rv: rv(listRV), at: now, resync: map[string]bool{}, resyncSlices: slices}
	for _, e := range evs {
		if e.slice != nil {
			resync.resync[e.slice.Name] = true
		} else {
			resync.resync[string(e.claim.UID)] = true
		}
	}
	m.mu.Lock()
	m.buf = append(m.buf, evs...)
	m.buf = append(m.buf, resync)
	m.mu.Unlock()
	return listRV, nil
}

// watch follows slices (or claims) from resourceVersion from; when the watch ends (its
// resourceVersion expired, say), it lists again and resumes.
func (m *Monitor) watch(ctx context.Context, slices bool, from string) {
	what := "ResourceClaims"
	if slices {
		what = "ResourceSlices"
	}
	for ctx.Err() == nil {
		w, err := watchtools.NewRetryWatcherWithContext(ctx, from, &cache.ListWatch{
			WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
				if slices {
					return m.env.Client.ResourceV1().ResourceSlices().Watch(ctx, o)
				}
				return m.env.Client.ResourceV1().ResourceClaims("").Watch(ctx, o)
			}})
		if err == nil {
			m.consume(ctx, w)
			w.Stop()
		}
		if ctx.Err() != nil {
			return
		}
		m.note("watch of %s ended (%v); listing again", what, err)
		time.Sleep(time.Second)
		if from, err = m.list(ctx, slices); err != nil {
			m.note("listing %s: %v", what, err)
			from = "1"
		}
	}
}

func (m *Monitor) note(format string, args ...any) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.errs = append(m.errs, fmt.Sprintf(format, args...))
}

func (m *Monitor) consume(ctx context.Context, w *watchtools.RetryWatcher) {
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-w.ResultChan():
			if !ok {
				return
			}
			e := event{at: time.Now(), typ: ev.Type}
			switch o := ev.Object.(type) {
			case *resourceapi.ResourceSlice:
				e.slice, e.rv = o, rv(o.ResourceVersion)
			case *resourceapi.ResourceClaim:
				e.claim, e.rv = o, rv(o.ResourceVersion)
			default:
				if ev.Type == watch.Error {
					m.note("watch error: %v", ev.Object)
				}
				continue
			}
			m.mu.Lock()
			m.buf = append(m.buf, e)
			m.mu.Unlock()
		}
	}
}

// Checkpoint replays the events received so far in revision order. Call it when the
// cluster is quiet (after convergence): events of both watches up to then have arrived.
func (m *Monitor) Checkpoint() {
	m.mu.Lock()
	defer m.mu.Unlock()
	sort.SliceStable(m.buf, func(i, j int) bool { return m.buf[i].rv < m.buf[j].rv })
	for _, e := range m.buf {
		if e.rv < m.lastRV && !e.initial {
			m.outOfOrder++
		}
		m.lastRV = max(m.lastRV, e.rv)
		switch {
		case e.slice != nil:
			m.replaySlice(e)
		case e.claim != nil:
			m.replayClaim(e)
		case e.resync != nil && e.resyncSlices:
			for name, sl := range m.slices {
				if !e.resync[name] {
					m.replaySlice(event{rv: e.rv, at: e.at, typ: watch.Deleted, slice: sl})
				}
			}
		case e.resync != nil:
			for uid := range m.allocs {
				if !e.resync[string(uid)] {
					delete(m.allocs, uid)
				}
			}
		}
	}
	m.buf = m.buf[:0]
	m.judgeDestroyed()
}

func (m *Monitor) replaySlice(e event) {
	s := e.slice
	if s.Spec.Driver != cluster.Driver || !m.pools[s.Spec.Pool.Name] {
		return
	}
	pool := s.Spec.Pool.Name
	if e.typ == watch.Deleted {
		delete(m.slices, s.Name)
	} else {
		m.slices[s.Name] = s
	}
	old := m.views[pool]
	view, complete := m.poolView(pool)
	m.views[pool] = view
	if !complete {
		m.poolHidden(pool, old, e.at, !m.hasSlice(pool))
		return
	}
	if before, ok := m.poolBack(pool, e.at); ok {
		old = before
	}
	m.trackPublished(pool, old, view, e)
	for name, was := range old {
		f := Finding{Kind: WithdrawnAllocated, Pool: pool, Device: name, At: e.at}
		if now, ok := view[name]; ok {
			if was.uuid == "" || now.uuid == "" || was.uuid == now.uuid {
				continue
			}
			// Published again under its name with another UUID: the device the
			// allocations got was destroyed and created again, though the poll
			// may only ever have seen the new one.
			f.Kind, f.Detail = AllocatedDestroyed, fmt.Sprintf("published again with another uuid: %s, now %s", was.uuid, now.uuid)
		}
		for uid, a := range m.allocs {
			if a.devices[pool+"/"+name] {
				f.Claim = a.key
				m.addUnlessWaiting(f, a.waiting[pool+"/"+name], string(uid))
			}
		}
	}
	tainted := []string{}
	for name, d := range view {
		key := pool + "/" + name
		if d.tainted {
			tainted = append(tainted, name)
			if _, ok := m.taintedAt[key]; !ok {
				m.taintedAt[key] = e.at
			}
		} else {
			delete(m.taintedAt, key)
		}
	}
	for key := range m.taintedAt {
		if strings.HasPrefix(key, pool+"/") {
			if _, ok := view[strings.TrimPrefix(key, pool+"/")]; !ok {
				delete(m.taintedAt, key)
			}
		}
	}
	i, isOpen := m.open[pool]
	switch {
	case len(tainted) > 0 && !isOpen:
		sort.Strings(tainted)
		m.open[pool] = len(m.episodes)
		m.episodes = append(m.episodes, DrainEpisode{Pool: pool, Start: e.at, Devices: tainted})
	case len(tainted) > 0:
		for _, t := range tainted {
			if !slices.Contains(m.episodes[i].Devices, t) {
				m.episodes[i].Devices = append(m.episodes[i].Devices, t)
			}
		}
	case isOpen:
		m.episodes[i].End = e.at
		delete(m.open, pool)
	}
}

// poolView is what the scheduler sees of a pool: the devices of its slices of the
// highest generation. complete is false where the pool has no slice, or fewer slices
// of that generation than their ResourceSliceCount: the scheduler then takes the pool
// for incomplete and allocates nothing from it (the slices of a new generation are
// being written one by one, or the pool's slices deleted one by one). As the
// structured allocator, it wants exactly ResourceSliceCount slices.
func (m *Monitor) poolView(pool string) (view map[string]published, complete bool) {
	gen := int64(-1)
	for _, s := range m.slices {
		if s.Spec.Pool.Name == pool {
			gen = max(gen, s.Spec.Pool.Generation)
		}
	}
	view = map[string]published{}
	n, want := int64(0), int64(0)
	for _, s := range m.slices {
		if s.Spec.Pool.Name != pool || s.Spec.Pool.Generation != gen {
			continue
		}
		n++
		want = max(want, s.Spec.Pool.ResourceSliceCount)
		for _, d := range s.Spec.Devices {
			view[d.Name] = describeDevice(d)
		}
	}
	return view, n > 0 && n == want
}

func describeDevice(d resourceapi.Device) published {
	p := published{}
	if a, ok := d.Attributes[migslices.AttrUUID]; ok && a.StringValue != nil {
		p.uuid = *a.StringValue
	}
	for _, t := range d.Taints {
		if t.Key == migslices.DrainTaintKey {
			p.tainted = true
		}
	}
	return p
}

func (m *Monitor) replayClaim(e event) {
	c := e.claim
	key := c.Namespace + "/" + c.Name
	if e.typ == watch.Deleted {
		delete(m.allocs, c.UID)
		m.forgetRefused(string(c.UID), nil)
		return
	}
	now, waiting := map[string]bool{}, map[string]bool{}
	if c.Status.Allocation != nil {
		for _, r := range c.Status.Allocation.Devices.Results {
			if r.Driver == cluster.Driver && m.pools[r.Pool] {
				now[r.Pool+"/"+r.Device] = true
				waiting[r.Pool+"/"+r.Device] = awaitingBinding(c, r)
			}
		}
	}
	old := m.allocs[c.UID]
	for dev := range now {
		if old.devices[dev] || e.initial {
			continue
		}
		pool, name, _ := strings.Cut(dev, "/")
		d, ok := m.seenView(pool)[name]
		switch {
		case !ok:
			m.addUnlessWaiting(Finding{Kind: UnpublishedAllocation, Pool: pool, Device: name, Claim: key, At: e.at}, waiting[dev], string(c.UID))
		case d.tainted:
			m.add(Finding{Kind: TaintedAllocation, Pool: pool, Device: name, Claim: key, At: e.at,
				Lag: e.at.Sub(m.taintedAt[dev])}, string(c.UID))
		}
	}
	// An allocation counted as refused that the agent confirms after all is the
	// violation it would have been.
	for dev := range now {
		if f, ok := m.refused[string(c.UID)+"|"+dev]; ok && !waiting[dev] {
			f.Detail = strings.TrimSuffix("confirmed after it was counted as refused; "+f.Detail, "; ")
			f.At = e.at
			m.add(f, string(c.UID))
		}
	}
	m.forgetRefused(string(c.UID), now)
	if len(now) == 0 {
		delete(m.allocs, c.UID)
		return
	}
	m.allocs[c.UID] = claimAlloc{key: key, devices: now, waiting: waiting}
}

// addUnlessWaiting records f, or, where the allocation waits for the agent's binding
// confirmation, a RefusedAllocation, keeping f in case the agent confirms it later.
// Called with mu held.
func (m *Monitor) addUnlessWaiting(f Finding, waiting bool, claimUID string) {
	if waiting {
		m.refused[claimUID+"|"+f.Pool+"/"+f.Device] = f
	}
	m.add(refusedIfWaiting(f, waiting), claimUID)
}

// forgetRefused drops the refused allocations of a claim whose devices are not in
// keep (nil: all). Called with mu held.
func (m *Monitor) forgetRefused(claimUID string, keep map[string]bool) {
	for k := range m.refused {
		uid, dev, _ := strings.Cut(k, "|")
		if uid == claimUID && !keep[dev] {
			delete(m.refused, k)
		}
	}
}

// add records a finding once per kind, claim and device. Called with mu held.
func (m *Monitor) add(f Finding, claimUID string) {
	k := string(f.Kind) + "|" + claimUID + "|" + f.Pool + "/" + f.Device
	if m.seen[k] {
		return
	}
	m.seen[k] = true
	m.findings = append(m.findings, f)
}

// poll compares, with every simulator locked, NVML with a live list of the claims.
func (m *Monitor) poll(ctx context.Context) {
	nodes := slices.Sorted(maps.Keys(m.pools))
	err := m.env.withSimLocks(nodes, func(states map[string]nvmlsim.State) error {
		lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		claims, err := m.env.Client.ResourceV1().ResourceClaims("").List(lctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		m.compare(states, claims.Items, time.Now())
		return nil
	})
	if err != nil && ctx.Err() == nil {
		m.mu.Lock()
		m.errs = append(m.errs, "poll: "+err.Error())
		m.mu.Unlock()
	}
}

// compare is poll's verdict: the simulators' states (read under their locks) against
// the claims listed meanwhile, at now. It takes mu.
func (m *Monitor) compare(states map[string]nvmlsim.State, claims []resourceapi.ResourceClaim, now time.Time) {
	var found []Finding
	var uids []string
	devices := map[string]map[string]string{}
	for n, st := range states {
		devices[n] = clustertest.NVMLDevices(st)
		for _, p := range st.Processes {
			if !uuidExists(st, p.DeviceUUID) {
				found = append(found, Finding{Kind: AllocatedDestroyed, Pool: n, Device: p.DeviceUUID, At: now,
					Claim: fmt.Sprintf("(process %d)", p.PID), Detail: "a process runs on a device NVML lacks"})
				uids = append(uids, fmt.Sprint(p.PID))
			}
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.polls++
	m.polledAt = append(m.polledAt, now)
	m.trackNVML(states, now)
	keep := map[string]bool{}
	for _, c := range claims {
		if c.Status.Allocation == nil {
			continue
		}
		for _, r := range c.Status.Allocation.Devices.Results {
			if r.Driver != cluster.Driver || !m.pools[r.Pool] {
				continue
			}
			k := string(c.UID) + "|" + r.Pool + "/" + r.Device
			keep[k] = true
			uuid := devices[r.Pool][r.Device]
			waiting := awaitingBinding(&c, r)
			switch {
			case uuid == "":
				found = append(found, refusedIfWaiting(Finding{Kind: AllocatedDestroyed, Pool: r.Pool, Device: r.Device, At: now,
					Claim: c.Namespace + "/" + c.Name, Detail: "NVML lacks the allocated device"}, waiting))
				uids = append(uids, string(c.UID))
				if m.tracked[k] == "" {
					m.tracked[k] = "(missing)" // a device of that name created later is another one
				}
			case m.tracked[k] != "" && m.tracked[k] != uuid:
				found = append(found, refusedIfWaiting(Finding{Kind: AllocatedDestroyed, Pool: r.Pool, Device: r.Device, At: now,
					Claim: c.Namespace + "/" + c.Name, Detail: fmt.Sprintf("destroyed and created again: uuid %s, now %s", m.tracked[k], uuid)}, waiting))
				uids = append(uids, string(c.UID))
			default:
				m.tracked[k] = uuid
			}
		}
	}
	for k := range m.tracked {
		if !keep[k] {
			delete(m.tracked, k)
		}
	}
	for i, f := range found {
		m.add(f, uids[i])
	}
}

func uuidExists(st nvmlsim.State, uuid string) bool {
	for _, g := range st.GPUs {
		if g.UUID == uuid {
			return true
		}
		for _, gi := range g.GPUInstances {
			for _, ci := range gi.ComputeInstances {
				if ci.UUID == uuid {
					return true
				}
			}
		}
	}
	return false
}

// Findings returns the findings about the given pools (nil: all) seen at or after since.
func (m *Monitor) Findings(since time.Time, pools ...string) []Finding {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []Finding
	for _, f := range m.findings {
		if f.At.Before(since) || (len(pools) > 0 && !slices.Contains(pools, f.Pool)) {
			continue
		}
		out = append(out, f)
	}
	return out
}

// Episodes returns the drain episodes of the given pools that started at or after since.
func (m *Monitor) Episodes(since time.Time, pools ...string) []DrainEpisode {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []DrainEpisode
	for _, e := range m.episodes {
		if !e.Start.Before(since) && (len(pools) == 0 || slices.Contains(pools, e.Pool)) {
			out = append(out, e)
		}
	}
	return out
}

// Stats says how much the monitor saw: simulator polls, watch errors, events replayed out
// of order.
// PollsSince is the number of successful polls of the simulators made at
// or after t, and the last poll error (empty without one).
func (m *Monitor) PollsSince(t time.Time) (int, string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	i, _ := slices.BinarySearchFunc(m.polledAt, t, func(a, b time.Time) int { return a.Compare(b) })
	last := ""
	for j := len(m.errs) - 1; j >= 0; j-- {
		if strings.HasPrefix(m.errs[j], "poll: ") {
			last = m.errs[j]
			break
		}
	}
	return len(m.polledAt) - i, last
}

func (m *Monitor) Stats() (polls int, errs []string, outOfOrder int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.polls, slices.Clone(m.errs), m.outOfOrder
}
