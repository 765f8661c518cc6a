// Package controller is the miglayout controller: it turns each MigLayout into
// one NodeMigLayout per selected node and aggregates the node agents' reports
// back into the MigLayout's status.
//
// The pure part, which has no client and no clock, is in desired.go (Static
// rules × a node's GPU inventory → desired GPU specs and problems),
// selection.go (which nodes a MigLayout selects, and which of them another
// MigLayout selects too) and aggregate.go / conditions.go (node reports →
// MigLayout status). The Reconciler wires them to the API server.
//
// Division of labour with the node agent: the controller writes only
// NodeMigLayout.spec; the agent writes only NodeMigLayout.status, which is
// where the controller reads the node's GPU inventory (models, actual layouts,
// devices in use) from. Each agent also renews a heartbeat Lease
// (v1alpha1.AgentLeaseName); AgentLeases times its renewals by the
// controller's own clock, and a node whose agent has reported but stopped
// renewing is AgentLost: not Ready, Degraded, and left out of Auto plans.
// A process that starts knows no renewal yet: an agent whose Lease it
// first sees then is Unconfirmed until one is seen (no new change on its
// node; the AutoPlanner holds its plans), and lost if none comes within
// the lease duration.
//
// Both writers of NodeMigLayout specs remember what they wrote until the
// informer cache shows it, since the limits on GPUs or nodes changing at
// once count across nodes and an optimistic lock guards only the object
// written: the Reconciler counts a Static node whose write the cache does
// not show as changing (rolloutExpectations), and the AutoPlanner does not
// plan until the cache shows its writes (cacheShowsWrites); a write
// answered with an error that may have come after it was applied is
// settled by a live read (rolloutExpectations.resolveLive). Both memories
// are the leader's own: a new leader starts without them, on caches it
// starts once elected (a standby runs none), whose first list is a
// consistent read of everything the old leader wrote.
package controller
