package quality

import (
	"cmp"
	"container/heap"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/miglayout/miglayout/pkg/mig"
)

type cstate int

const (
	cPending  cstate = iota
	cReserved        // given a device that is being created
	cRunning
	cDone
	cDropped
)

// simClaim is a claim's state in one simulation.
type simClaim struct {
	*claim
	st       cstate
	gpu      int
	dev      mig.Device
	start    float64 // when its device became usable
	deadline float64
}

// simGPU is one GPU: its layout (devices that exist or are being created),
// which devices are allocated or reserved (owner), and when each device is
// usable.
type simGPU struct {
	idx, node, local int
	layout           mig.Layout
	owner            map[mig.Device]int
	ready            map[mig.Device]float64
	busyUntil        float64
}

const (
	evDepart = iota
	evStart
	evWake
	evArrive
	evExpire
)

type event struct {
	t    float64
	kind int
	id   int
	seq  int
}

type eventQueue []event

func (q eventQueue) Len() int { return len(q) }
func (q eventQueue) Less(i, j int) bool {
	a, b := q[i], q[j]
	if a.t != b.t {
		return a.t < b.t
	}
	if a.kind != b.kind {
		return a.kind < b.kind
	}
	return a.seq < b.seq
}
func (q eventQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *eventQueue) Push(x any)   { *q = append(*q, x.(event)) }
func (q *eventQueue) Pop() any {
	old := *q
	e := old[len(old)-1]
	*q = old[:len(old)-1]
	return e
}

// strategy decides, at an event, what to do with the pending claims.
type strategy interface {
	// decide acts on s through assign, change and repack.
	decide(s *sim) error
	// lock: the strategy does not change a GPU whose change is in flight.
	lock() bool
	// migrates: the strategy may move allocated devices (repack).
	migrates() bool
	// delay: changes take Config.Repartition (false: instant).
	delay() bool
}

// sim is one simulation of one strategy on one trace.
type sim struct {
	model       *mig.Model
	repartition float64
	queue       bool
	perNode     int
	strat       strategy
	now         float64
	gpus        []*simGPU
	claims      []*simClaim
	pending     []int // claim ids, arrival order
	events      eventQueue
	seq         int
	feasible    *feasibleSet
	// planBindsScheduler: Config.PlanBindsScheduler.
	planBindsScheduler bool
	// reclaimIdleAfter: Config.ReclaimIdleAfter.
	reclaimIdleAfter float64
	// maxPerNode and maxGPUs: Config.MaxGPUsPerNode (perNode where 0) and
	// Config.MaxGPUs.
	maxPerNode, maxGPUs int

	// counters
	destroyed, created, moved, changes, decisions int
	// drops: large and all, and how many of them a migration (within one
	// GPU, or across GPUs) would have served at the moment of loss.
	drops, dropsLocal, dropsGlobal             int
	largeDrops, largeDropsLocal, largeDropsGlb int
	end                                        float64
}

func newSim(m *mig.Model, tr trace, gpus, perNode int, initial []mig.Layout, cfg *Config, queue bool, st strategy, fs *feasibleSet) *sim {
	s := &sim{model: m, repartition: cfg.Repartition, queue: queue, perNode: perNode, strat: st, feasible: fs, planBindsScheduler: cfg.PlanBindsScheduler, reclaimIdleAfter: cfg.ReclaimIdleAfter,
		maxPerNode: cmp.Or(cfg.MaxGPUsPerNode, perNode), maxGPUs: cfg.MaxGPUs}
	if !st.delay() {
		s.repartition = 0
	}
	for i := range gpus {
		g := &simGPU{idx: i, node: i / perNode, local: i % perNode, owner: map[mig.Device]int{}, ready: map[mig.Device]float64{}}
		if initial != nil {
			g.layout = initial[i].Canonical()
			for _, d := range g.layout {
				g.ready[d] = 0
			}
		}
		s.gpus = append(s.gpus, g)
	}
	for i := range tr.claims {
		c := &tr.claims[i]
		dl := math.Inf(1)
		if !queue {
			dl = c.arrive + cfg.Deadline
		}
		s.claims = append(s.claims, &simClaim{claim: c, deadline: dl, gpu: -1})
		s.push(c.arrive, evArrive, c.id)
		if !queue {
			s.push(dl, evExpire, c.id)
		}
	}
	s.end = math.Inf(1)
	if queue && len(tr.claims) > 0 {
		s.end = tr.claims[len(tr.claims)-1].arrive + cfg.QueueDrain*cfg.MeanHold
	}
	return s
}

func (s *sim) push(t float64, kind, id int) {
	s.seq++
	heap.Push(&s.events, event{t: t, kind: kind, id: id, seq: s.seq})
}

// run simulates to the end.
func (s *sim) run() error {
	for s.events.Len() > 0 {
		t := s.events[0].t
		if t > s.end {
			break
		}
		s.now = t
		if err := s.handleAt(t, func(kind int) bool { return kind != evExpire }); err != nil {
			return err
		}
		if len(s.pending) > 0 {
			s.decisions++
			if err := s.strat.decide(s); err != nil {
				return fmt.Errorf("t=%.1f: %w", s.now, err)
			}
		}
		// A claim may still be given a device at its deadline: it expires
		// after the decisions of that instant, as the clairvoyant search
		// keeps it pending there.
		if err := s.handleAt(t, func(kind int) bool { return kind == evExpire }); err != nil {
			return err
		}
	}
	return nil
}

// handleAt handles the events at time t, in queue order, while the next
// one's kind is one of which.
func (s *sim) handleAt(t float64, which func(kind int) bool) error {
	for s.events.Len() > 0 && s.events[0].t == t && which(s.events[0].kind) {
		e := heap.Pop(&s.events).(event)
		if err := s.handle(e); err != nil {
			return err
		}
	}
	return nil
}

func (s *sim) handle(e event) error {
	switch e.kind {
	case evArrive:
		s.pending = append(s.pending, e.id)
	case evExpire:
		c := s.claims[e.id]
		if c.st != cPending {
			return nil
		}
		c.st = cDropped
		s.removePending(e.id)
		s.auditDrop(c)
	case evStart:
		c := s.claims[e.id]
		if c.st != cReserved {
			return nil
		}
		g := s.gpus[c.gpu]
		if r, ok := g.ready[c.dev]; !ok || r > s.now || g.owner[c.dev] != c.id {
			return fmt.Errorf("claim %d: reserved device %s on GPU %d is gone", c.id, c.dev, c.gpu)
		}
		c.st = cRunning
		s.push(s.now+c.hold, evDepart, c.id)
	case evDepart:
		c := s.claims[e.id]
		g := s.gpus[c.gpu]
		// Audit: the claim kept its device to the end.
		if id, ok := g.owner[c.dev]; !ok || id != c.id || !g.layout.Contains(c.dev) {
			return fmt.Errorf("claim %d lost its device %s on GPU %d while running", c.id, c.dev, c.gpu)
		}
		delete(g.owner, c.dev)
		c.st = cDone
	case evWake:
	}
	return nil
}

func (s *sim) removePending(id int) {
	if i := slices.Index(s.pending, id); i >= 0 {
		s.pending = slices.Delete(s.pending, i, i+1)
	}
}

// auditDrop records whether moving running instances would have served c.
func (s *sim) auditDrop(c *simClaim) {
	s.drops++
	if c.large {
		s.largeDrops++
	}
	local, global := s.migrationWouldServe(c.profile)
	if local {
		s.dropsLocal++
		if c.large {
			s.largeDropsLocal++
		}
	}
	if global {
		s.dropsGlobal++
		if c.large {
			s.largeDropsGlb++
		}
	}
}

// migrationWouldServe reports whether one more device of profile p fits the
// allocated devices of one GPU repacked in place (local), or of all GPUs
// repacked across GPUs (global).
func (s *sim) migrationWouldServe(p string) (local, global bool) {
	var items []string
	for _, g := range s.gpus {
		cnt := ownedCounts(g)
		items = append(items, ownedProfiles(g)...)
		cnt[p]++
		if s.feasible.ok(cnt) {
			local = true
		}
	}
	if local {
		return true, true
	}
	_, global = s.feasible.pack(append(items, p), len(s.gpus), nil)
	return local, global
}

func ownedCounts(g *simGPU) map[string]int {
	out := map[string]int{}
	for d := range g.owner {
		out[d.Profile]++
	}
	return out
}

func ownedProfiles(g *simGPU) []string {
	var out []string
	for _, d := range g.layout {
		if _, ok := g.owner[d]; ok {
			out = append(out, d.Profile)
		}
	}
	return out
}

// --- what strategies see and do ---

// mayChange reports whether the strategy may change g now.
func (s *sim) mayChange(g *simGPU) bool { return !s.strat.lock() || g.busyUntil <= s.now }

// changing reports whether a change on g is in flight.
func (s *sim) changing(g *simGPU) bool { return g.busyUntil > s.now }

// free returns g's devices that are not allocated or reserved (some may be
// still being created).
func (s *sim) free(g *simGPU) mig.Layout {
	var out mig.Layout
	for _, d := range g.layout {
		if _, ok := g.owner[d]; !ok {
			out = append(out, d)
		}
	}
	return out
}

// owned returns g's allocated and reserved devices.
func (s *sim) owned(g *simGPU) mig.Layout {
	var out mig.Layout
	for _, d := range g.layout {
		if _, ok := g.owner[d]; ok {
			out = append(out, d)
		}
	}
	return out
}

// assign gives claim id device d of GPU g, which must exist and be free.
func (s *sim) assign(id, gi int, d mig.Device) error {
	c := s.claims[id]
	if c.st != cPending {
		return fmt.Errorf("claim %d is not pending", id)
	}
	g := s.gpus[gi]
	if d.Profile != c.profile {
		return fmt.Errorf("claim %d asks for %s, given %s on GPU %d", id, c.profile, d, gi)
	}
	if !g.layout.Contains(d) {
		return fmt.Errorf("claim %d given %s on GPU %d, which has no such device (%s)", id, d, gi, g.layout)
	}
	if o, ok := g.owner[d]; ok {
		return fmt.Errorf("claim %d given %s on GPU %d, which claim %d holds", id, d, gi, o)
	}
	g.owner[d] = id
	c.gpu, c.dev = gi, d
	s.removePending(id)
	if r := g.ready[d]; r > s.now {
		c.st, c.start = cReserved, r
		s.push(r, evStart, id)
	} else {
		c.st, c.start = cRunning, s.now
		s.push(s.now+c.hold, evDepart, id)
	}
	return nil
}

// errDestroysAllocated is change's refusal of a layout without a device a
// claim holds: no strategy may destroy an allocated device.
var errDestroysAllocated = errors.New("destroys an allocated device")

// change sets GPU g's layout to to. It refuses a change that destroys an
// allocated or reserved device (unless the strategy migrates, see repack),
// an invalid layout, and a change of a GPU in flight for a locking strategy.
// recreateFree counts the free devices both layouts share as destroyed and
// created again (nos's method).
func (s *sim) change(gi int, to mig.Layout, recreateFree bool) error {
	g := s.gpus[gi]
	if !s.mayChange(g) {
		return fmt.Errorf("GPU %d changed while its change is in flight", gi)
	}
	to = to.Canonical()
	if err := s.model.Validate(to); err != nil {
		return fmt.Errorf("GPU %d: %w", gi, err)
	}
	for d, id := range g.owner {
		if !to.Contains(d) {
			return fmt.Errorf("GPU %d: change %s -> %s destroys %s of claim %d: %w", gi, g.layout, to, d, id, errDestroysAllocated)
		}
	}
	plan := s.model.Diff(g.layout, to)
	var recreated mig.Layout
	if recreateFree {
		for _, d := range plan.Keep {
			if _, ok := g.owner[d]; !ok {
				recreated = append(recreated, d)
			}
		}
	}
	if plan.Empty() && len(recreated) == 0 {
		return nil
	}
	s.changes++
	s.destroyed += len(plan.Destroy) + len(recreated)
	s.created += len(plan.Create) + len(recreated)
	for _, d := range plan.Destroy {
		delete(g.ready, d)
	}
	readyAt := s.now + s.repartition
	for _, d := range append(slices.Clone(plan.Create), recreated...) {
		g.ready[d] = readyAt
	}
	g.layout = to
	if readyAt > g.busyUntil {
		g.busyUntil = readyAt
	}
	if readyAt > s.now {
		s.push(readyAt, evWake, -1)
	}
	return nil
}

// repack replaces every GPU's layout and moves allocated devices (migrate
// only): layouts[g] is the new layout and where[id] the new (GPU, device) of
// every allocated claim that moves. Changes are instant.
func (s *sim) repack(layouts map[int]mig.Layout, where map[int]gpuDev) error {
	if !s.strat.migrates() {
		return fmt.Errorf("strategy may not move allocated devices")
	}
	for gi, to := range layouts {
		g := s.gpus[gi]
		to = to.Canonical()
		if err := s.model.Validate(to); err != nil {
			return fmt.Errorf("GPU %d: %w", gi, err)
		}
		plan := s.model.Diff(g.layout, to)
		if plan.Empty() {
			continue
		}
		s.changes++
		s.destroyed += len(plan.Destroy)
		s.created += len(plan.Create)
		g.layout = to
		g.ready = map[mig.Device]float64{}
		for _, d := range to {
			g.ready[d] = s.now
		}
	}
	// Re-own: clear moved claims' old devices, then set new ones.
	for id := range where {
		c := s.claims[id]
		if c.gpu >= 0 {
			if o, ok := s.gpus[c.gpu].owner[c.dev]; ok && o == id {
				delete(s.gpus[c.gpu].owner, c.dev)
			}
		}
	}
	for id, w := range where {
		c := s.claims[id]
		if c.st != cRunning && c.st != cReserved {
			return fmt.Errorf("claim %d moved but not allocated", id)
		}
		g := s.gpus[w.gpu]
		if !g.layout.Contains(w.dev) || w.dev.Profile != c.profile {
			return fmt.Errorf("claim %d moved to %s on GPU %d: no such device", id, w.dev, w.gpu)
		}
		if o, ok := g.owner[w.dev]; ok && o != id {
			return fmt.Errorf("claim %d moved to %s on GPU %d, held by claim %d", id, w.dev, w.gpu, o)
		}
		g.owner[w.dev] = id
		c.gpu, c.dev = w.gpu, w.dev
		s.moved++
	}
	// Every owner must still be on its GPU's layout.
	for _, g := range s.gpus {
		for d, id := range g.owner {
			if !g.layout.Contains(d) {
				return fmt.Errorf("repack lost %s of claim %d on GPU %d", d, id, g.idx)
			}
		}
	}
	return nil
}

type gpuDev struct {
	gpu int
	dev mig.Device
}

// result is what one simulation measured.
type result struct {
	n, served, nLarge, servedLarge int
	// waits per profile (seconds); +Inf for claims never served (queue).
	waits                              map[string][]float64
	perProfileN, perProfileServed      map[string]int
	destroyed, created, moved, changes int
	decisions                          int
	drops, dropsLocal, dropsGlobal     int
	largeDrops, largeDropsLocal        int
	largeDropsGlobal                   int
}

func (s *sim) result() result {
	r := result{waits: map[string][]float64{}, perProfileN: map[string]int{}, perProfileServed: map[string]int{},
		destroyed: s.destroyed, created: s.created, moved: s.moved, changes: s.changes, decisions: s.decisions,
		drops: s.drops, dropsLocal: s.dropsLocal, dropsGlobal: s.dropsGlobal,
		largeDrops: s.largeDrops, largeDropsLocal: s.largeDropsLocal, largeDropsGlobal: s.largeDropsGlb}
	for _, c := range s.claims {
		r.n++
		r.perProfileN[c.profile]++
		if c.large {
			r.nLarge++
		}
		served := c.st == cRunning || c.st == cDone || c.st == cReserved && c.start <= s.end
		if served {
			r.served++
			r.perProfileServed[c.profile]++
			if c.large {
				r.servedLarge++
			}
			r.waits[c.profile] = append(r.waits[c.profile], c.start-c.arrive)
		} else if s.queue {
			r.waits[c.profile] = append(r.waits[c.profile], math.Inf(1))
		}
	}
	return r
}
