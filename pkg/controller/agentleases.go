package controller

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// AgentLeases judges whether each node's agent is alive from the heartbeat
// Lease it renews (v1alpha1.AgentLeaseName, in Namespace; a Lease is
// known by its node, v1alpha1.AgentLeaseNode). As
// kube-controller-manager judges kubelets by their node Leases, a Lease is
// timed by this process's clock, from when it was seen renewed, not by the
// renewTime the agent writes: nodes' clocks may be skewed. An agent is lost
// once its Lease has not been seen renewed for its leaseDurationSeconds, or
// has been gone for defaultAgentLeaseDuration since this process saw it
// deleted. A node whose agent has reported but holds no Lease this process
// saw (it died, or was uninstalled, while no controller ran; one run with
// another --lease-namespace) is Unconfirmed for defaultAgentLeaseDuration
// from this process's start, or from when Health first found it so if
// later, then lost: "never seen" cannot keep a dead node's
// maxNodesChanging turn for good.
//
// After this process starts it knows no renewal yet: a Lease first seen
// counts as renewed then (one lease duration of grace), except for an agent
// already reported lost (the caller's wasLost, from the status this or an
// earlier process wrote), which stays lost until a renewal is seen, so a
// restart of the controller never brings a dead agent back for a while.
// The grace is not trust for the Leases first seen while the process
// starts (within a lease duration of its first look): such an agent is
// Unconfirmed (it may have died while no controller ran, or be lost beyond
// the status rows that say who was), given no new change, until a renewal
// is seen (a live agent renews every quarter of its lease duration) or the
// grace ends and it is lost. A Lease first seen later was made while the
// process watched (a node joining), by a live agent. A standby replica
// times the Leases too, so a new leader that waited as one knows them.
//
// The zero value is not usable; a nil *AgentLeases checks nothing (every
// agent counts as alive).
type AgentLeases struct {
	// Namespace holds the agents' Leases.
	Namespace string
	// Now is the clock; nil means time.Now.
	Now func() time.Time

	mu   sync.Mutex
	seen map[string]leaseSeen // by node
	gone map[string]time.Time // node -> when its Lease was seen deleted
	// unleased: node -> when Health first found it reported without a
	// Lease ever seen (its agent's first report may come before its
	// Lease's event).
	unleased map[string]time.Time
	// started is when this process started timing Leases (Start), or
	// first looked at one (startedLocked).
	started time.Time
}

// leaseSeen is the last renewal seen of one Lease and when it was seen.
type leaseSeen struct {
	name     string // the Lease's
	renew    time.Time
	holder   string
	at       time.Time
	duration time.Duration
	// renewed: a renewal has been seen since the Lease was first seen.
	renewed bool
	// untrusted: first seen within its duration of this process's start
	// (the Lease may be of an agent that died before): the agent is
	// Unconfirmed until a renewal is seen. A Lease first seen later was
	// made (or renamed) while this process watched, by a live agent.
	untrusted bool
	// older are the renewTimes seen before renew, of the same Lease and
	// holder, the latest last (at most staleCopies).
	older []time.Time
}

// staleCopies is how many renewTimes before the last one an agent Lease's
// record keeps: a copy of the Lease carrying one of them is stale.
const staleCopies = 8

// defaultAgentLeaseDuration is assumed for a Lease without
// leaseDurationSeconds (the agent always sets it).
const defaultAgentLeaseDuration = 40 * time.Second

// leaseExpirySlack is added to a lease expiry before looking again, so the
// look falls after it.
const leaseExpirySlack = time.Second

// AgentHealth is what a node's heartbeat Lease says of its agent.
type AgentHealth struct {
	// Lost: the agent has not been seen renewing its Lease for the Lease's
	// duration, or its Lease has been gone for defaultAgentLeaseDuration.
	Lost bool
	// Message says why, for people (empty when neither Lost nor
	// Unconfirmed).
	Message string
	// Unconfirmed (never with Lost): this process first saw the agent's
	// Lease within the Lease's duration of its start, less than that
	// duration ago, and has seen no renewal of it since: the agent may
	// have died before the process started. It is not reported lost, but
	// no new change is started on its node (no maxNodesChanging turn;
	// Auto mode holds its plans) until a renewal is seen. Message says so.
	Unconfirmed bool
	// Recheck is when to look again though no Lease event comes (zero when
	// not checked): a live agent's Lease runs out then unless renewed; a
	// lost or unconfirmed agent's renewal is looked for every quarter of
	// its Lease's duration (its first renewals may carry no event, see
	// agentLeaseChange).
	Recheck time.Time
}

// Start registers the event handler that times Lease renewals on the
// manager's Lease informer (its cache is limited to Namespace by the
// caller).
func (l *AgentLeases) Start(ctx context.Context, c cache.Cache) error {
	l.mu.Lock()
	l.startedLocked(l.now())
	l.mu.Unlock()
	inf, err := c.GetInformer(ctx, &coordinationv1.Lease{})
	if err != nil {
		return fmt.Errorf("getting the Lease informer: %w", err)
	}
	_, err = inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { l.observe(obj) },
		UpdateFunc: func(_, obj any) { l.observe(obj) },
		DeleteFunc: func(obj any) {
			if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if lease, ok := obj.(*coordinationv1.Lease); ok && lease.Namespace == l.Namespace {
				if node := v1alpha1.AgentLeaseNode(lease); node != "" {
					l.deleted(node, lease.Name)
				}
			}
		},
	})
	if err != nil {
		return fmt.Errorf("watching agent Leases: %w", err)
	}
	return nil
}

// deleted records that node's Lease name is gone (unless known so
// already): the one known for the node, or any ("") when the cache has
// none. Another Lease of the node going (a stale one) changes nothing.
func (l *AgentLeases) deleted(node, name string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.deletedLocked(node, name)
}

// deletedLocked is deleted with l.mu held.
func (l *AgentLeases) deletedLocked(node, name string) {
	if s, ok := l.seen[node]; ok && name != "" && s.name != name {
		return
	}
	delete(l.seen, node)
	if l.gone == nil {
		l.gone = map[string]time.Time{}
	}
	if _, ok := l.gone[node]; !ok {
		l.gone[node] = l.now()
	}
}

// Forget drops what is known of node's Lease: the node no longer has a
// NodeMigLayout (it left its MigLayout's selection, or was deleted), and a
// node made again under its name starts afresh.
func (l *AgentLeases) Forget(node string) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.seen, node)
	delete(l.gone, node)
	delete(l.unleased, node)
}

// Retain drops what is known of deleted Leases of nodes other than nodes
// (those with a NodeMigLayout): a NodeMigLayout garbage-collected with its
// MigLayout, or a Node deleted, leaves nothing behind.
func (l *AgentLeases) Retain(nodes []string) {
	if l == nil {
		return
	}
	keep := sets.New(nodes...)
	l.mu.Lock()
	defer l.mu.Unlock()
	for node := range l.unleased {
		if !keep.Has(node) {
			delete(l.unleased, node)
		}
	}
	for node := range l.gone {
		if !keep.Has(node) {
			delete(l.gone, node)
		}
	}
}

func (l *AgentLeases) observe(obj any) {
	if lease, ok := obj.(*coordinationv1.Lease); ok {
		l.Observe(lease)
	}
}

// Observe records lease as seen now when it is an agent's Lease whose
// renewTime or holder changed since last seen.
func (l *AgentLeases) Observe(lease *coordinationv1.Lease) {
	if l == nil || lease.Namespace != l.Namespace {
		return
	}
	node := v1alpha1.AgentLeaseNode(lease)
	if node == "" {
		return
	}
	s := leaseSeen{name: lease.Name, holder: ptr.Deref(lease.Spec.HolderIdentity, ""), duration: leaseDuration(lease)}
	if lease.Spec.RenewTime != nil {
		s.renew = lease.Spec.RenewTime.Time
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.seen == nil {
		l.seen = map[string]leaseSeen{}
	}
	prev, ok := l.seen[node]
	if ok && prev.name != s.name && !s.renew.After(prev.renew) {
		// Another Lease of the node, renewed no later than the one known
		// (a stale one beside it, left by an agent that named its Lease
		// otherwise): no renewal.
		return
	}
	if ok && prev.name == s.name && prev.holder == s.holder && slices.ContainsFunc(prev.older, s.renew.Equal) {
		// A copy of the Lease seen before one of its last renewals (a
		// pass's list taken before the informer's handler saw them): no
		// renewal. Only those: the agent's clock may step back, so an
		// earlier renewTime is not always an older copy.
		return
	}
	delete(l.gone, node)
	delete(l.unleased, node)
	if ok && prev.name == s.name && prev.renew.Equal(s.renew) && prev.holder == s.holder {
		if prev.duration != s.duration {
			prev.duration = s.duration
			l.seen[node] = prev
		}
		return
	}
	// A Lease first seen (or one taking over from another Lease of the
	// node) is no renewal yet.
	s.at, s.renewed = l.now(), ok && prev.name == s.name
	s.untrusted = !s.renewed && s.at.Before(l.startedLocked(s.at).Add(s.duration))
	if ok && prev.name == s.name && prev.holder == s.holder {
		s.older = append(prev.older, prev.renew)
		if len(s.older) > staleCopies {
			s.older = s.older[len(s.older)-staleCopies:]
		}
	}
	l.seen[node] = s
}

// Health judges the agent of node. reported says whether the agent has
// ever reported the node's GPUs (NodeMigLayout status): an agent that
// never did is not lost but not started yet, which the node's row says
// already, unless it was lost before (its NodeMigLayout deleted and made
// again meanwhile: only a renewed Lease brings it back). lease is the
// node's Lease as the cache holds it, nil when it has none. wasLost says
// whether the node was reported lost before (its row in a MigLayout's
// status is Unknown).
func (l *AgentLeases) Health(node string, lease *coordinationv1.Lease, reported, wasLost bool) AgentHealth {
	if l == nil || (!reported && !wasLost) {
		return AgentHealth{}
	}
	name := agentLeaseNameText(node, lease)
	now := l.now()
	if lease == nil {
		l.mu.Lock()
		if _, known := l.seen[node]; known { // the cache has it gone before the handler ran
			l.deletedLocked(node, "")
		}
		since, gone := l.gone[node]
		l.mu.Unlock()
		lost := AgentHealth{Lost: true, Recheck: now.Add(defaultAgentLeaseDuration / 4), Message: fmt.Sprintf(
			"the node's agent holds no heartbeat Lease %s/%s (is it running, with --lease-namespace=%s?); its GPUs are as last reported",
			l.Namespace, name, l.Namespace)}
		switch {
		case wasLost:
			return lost
		case !gone:
			// Never seen since this process started timing Leases (an
			// agent that died, or was uninstalled, while no controller
			// ran; one run with another --lease-namespace): Unconfirmed
			// for a lease duration from that start, or from when it was
			// first found reported without one (a node's first report
			// may come before its Lease's event), whichever is later,
			// and lost after it, as a Lease seen deleted.
			l.mu.Lock()
			from := l.startedLocked(now)
			if l.unleased == nil {
				l.unleased = map[string]time.Time{}
			}
			first, ok := l.unleased[node]
			if !ok {
				first, l.unleased[node] = now, now
			}
			l.mu.Unlock()
			if first.After(from) {
				from = first
			}
			if until := from.Add(defaultAgentLeaseDuration); now.Before(until) {
				return AgentHealth{Unconfirmed: true, Recheck: until, Message: fmt.Sprintf(
					"this controller has seen no heartbeat Lease %s/%s of the node's agent since %s: its agent may be lost",
					l.Namespace, name, from.UTC().Format(time.RFC3339))}
			}
		case now.Before(since.Add(defaultAgentLeaseDuration)):
			return AgentHealth{Recheck: since.Add(defaultAgentLeaseDuration)}
		}
		return lost
	}
	l.Observe(lease) // the informer's handler may not have run yet
	l.mu.Lock()
	s := l.seen[node]
	l.mu.Unlock()
	expires := s.at.Add(s.duration)
	if now.Before(expires) && !s.renewed && !wasLost && s.untrusted {
		return AgentHealth{Unconfirmed: true, Recheck: earliest(expires, now.Add(s.duration/4)), Message: fmt.Sprintf(
			"this controller has seen no renewal of the node's heartbeat Lease %s/%s since it first saw it at %s (lease duration %s): its agent may be lost",
			l.Namespace, name, s.at.UTC().Format(time.RFC3339), s.duration)}
	}
	if now.Before(expires) && (s.renewed || !wasLost) {
		return AgentHealth{Recheck: expires}
	}
	h := AgentHealth{Lost: true, Recheck: now.Add(s.duration / 4)}
	if s.renewed || !wasLost {
		h.Message = fmt.Sprintf("the node's agent has not renewed its heartbeat Lease %s/%s since %s (lease duration %s); its GPUs are as last reported",
			l.Namespace, name, s.at.UTC().Format(time.RFC3339), s.duration)
	} else {
		// Reported lost before this process saw the Lease: the time of its
		// last renewal is not known by this clock.
		h.Message = fmt.Sprintf("the node's agent was reported lost and has not renewed its heartbeat Lease %s/%s since (lease duration %s); its GPUs are as last reported",
			l.Namespace, name, s.duration)
	}
	return h
}

// List reads the agents' Leases from c (the cache), by node
// (v1alpha1.AgentLeaseNode). Of two Leases of one node (a long-named node
// made again under a new UID, before its old Lease is collected with the
// old Node) the one renewed last is kept.
func (l *AgentLeases) List(ctx context.Context, c client.Reader) (map[string]*coordinationv1.Lease, error) {
	if l == nil {
		return nil, nil
	}
	var leases coordinationv1.LeaseList
	if err := c.List(ctx, &leases, client.InNamespace(l.Namespace)); err != nil {
		return nil, fmt.Errorf("listing agent Leases in namespace %s: %w", l.Namespace, err)
	}
	out := make(map[string]*coordinationv1.Lease, len(leases.Items))
	for i := range leases.Items {
		lease := &leases.Items[i]
		node := v1alpha1.AgentLeaseNode(lease)
		if node == "" {
			continue
		}
		if other, ok := out[node]; ok && renewTime(other).After(renewTime(lease)) {
			continue
		}
		out[node] = lease
	}
	return out, nil
}

func renewTime(l *coordinationv1.Lease) time.Time {
	if l.Spec.RenewTime == nil {
		return time.Time{}
	}
	return l.Spec.RenewTime.Time
}

// agentLeaseNameText names node's Lease in messages: lease's name, or the
// name the node's agent should hold ("miglayout-agent-<node UID>" for a
// name that needs the Node's UID).
func agentLeaseNameText(node string, lease *coordinationv1.Lease) string {
	switch {
	case lease != nil:
		return lease.Name
	case v1alpha1.AgentLeaseNameNeedsUID(node):
		return v1alpha1.AgentLeasePrefix + "<node UID>"
	}
	return v1alpha1.AgentLeaseName(node, "")
}

// NodeHealth judges every node with a NodeMigLayout against leases (from
// List); wasLost are the nodes reported lost before (LostInStatus). It
// returns the health by node name and the soonest Recheck (zero when none).
func (l *AgentLeases) NodeHealth(nmls map[string]*v1alpha1.NodeMigLayout, leases map[string]*coordinationv1.Lease, wasLost sets.Set[string]) (map[string]AgentHealth, time.Time) {
	if l == nil {
		return nil, time.Time{}
	}
	out := make(map[string]AgentHealth, len(nmls))
	var soonest time.Time
	for node, nml := range nmls {
		h := l.Health(node, leases[node], AgentReported(nml), wasLost.Has(node))
		out[node] = h
		soonest = earliest(soonest, h.Recheck)
	}
	return out, soonest
}

// LostInStatus returns the nodes whose rows in the MigLayouts' status say
// their agent is lost (phase Unknown).
func LostInStatus(mls ...*v1alpha1.MigLayout) sets.Set[string] {
	out := sets.New[string]()
	for _, ml := range mls {
		for _, r := range ml.Status.Nodes {
			if r.Phase == v1alpha1.PhaseUnknown {
				out.Insert(r.Node)
			}
		}
	}
	return out
}

// requeueAt is how long to wait for at (plus slack), or 0 for none.
func (l *AgentLeases) requeueAt(at time.Time) time.Duration {
	if l == nil || at.IsZero() {
		return 0
	}
	return max(at.Sub(l.now()), 0) + leaseExpirySlack
}

// startedLocked returns when this process started timing Leases (Start, or
// its first look at one), now where it has not before. The caller holds
// l.mu.
func (l *AgentLeases) startedLocked(now time.Time) time.Time {
	if l.started.IsZero() {
		l.started = now
	}
	return l.started
}

func (l *AgentLeases) now() time.Time {
	if l.Now != nil {
		return l.Now()
	}
	return time.Now()
}

func leaseDuration(lease *coordinationv1.Lease) time.Duration {
	if d := lease.Spec.LeaseDurationSeconds; d != nil && *d > 0 {
		return time.Duration(*d) * time.Second
	}
	return defaultAgentLeaseDuration
}

// agentLeaseChange passes the Lease events that can change an agent's
// health before its Lease would expire: a Lease created or deleted, a new
// holder, or a renewal after a gap longer than the Lease's duration (an
// agent back from being lost), judged on the agent's own renewTimes. Plain
// renewals pass no event, nor does a renewal of an agent judged lost whose
// gap was shorter (a renewal seen late); a Lease's expiry has no event at
// all: readers look again when due (AgentHealth.Recheck).
func agentLeaseChange(namespace string) predicate.Funcs {
	ours := func(o client.Object) bool {
		return o.GetNamespace() == namespace && strings.HasPrefix(o.GetName(), v1alpha1.AgentLeasePrefix)
	}
	return predicate.Funcs{
		CreateFunc:  func(e event.CreateEvent) bool { return ours(e.Object) },
		DeleteFunc:  func(e event.DeleteEvent) bool { return ours(e.Object) },
		GenericFunc: func(event.GenericEvent) bool { return false },
		UpdateFunc: func(e event.UpdateEvent) bool {
			o, ok1 := e.ObjectOld.(*coordinationv1.Lease)
			n, ok2 := e.ObjectNew.(*coordinationv1.Lease)
			if !ok1 || !ok2 || !ours(n) {
				return false
			}
			if ptr.Deref(o.Spec.HolderIdentity, "") != ptr.Deref(n.Spec.HolderIdentity, "") {
				return true
			}
			if o.Spec.RenewTime == nil || n.Spec.RenewTime == nil {
				return o.Spec.RenewTime != n.Spec.RenewTime
			}
			return n.Spec.RenewTime.Sub(o.Spec.RenewTime.Time) > leaseDuration(o)
		},
	}
}
