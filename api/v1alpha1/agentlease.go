package v1alpha1

import (
	"strings"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/types"
)

// AgentLeasePrefix starts the name of every agent's heartbeat Lease.
const AgentLeasePrefix = "miglayout-agent-"

// maxLeaseName is the limit on a Lease's name (a DNS subdomain).
const maxLeaseName = 253

// AgentLeaseNameNeedsUID reports whether node's name is too long to follow
// AgentLeasePrefix in a Lease name (over 237 characters), so that its
// agent's Lease is named after the Node's UID.
func AgentLeaseNameNeedsUID(node string) bool { return len(AgentLeasePrefix)+len(node) > maxLeaseName }

// AgentLeaseName is the name of the coordination.k8s.io/v1 Lease that the
// agent of node renews as its heartbeat (holderIdentity: the node name), in
// the namespace both the agent (--lease-namespace) and the controller
// (--agent-lease-namespace) are given: "miglayout-agent-<node>", or, for a
// node name over 237 characters (AgentLeaseNameNeedsUID),
// "miglayout-agent-<node UID>": both forms can be checked at admission
// from the node name and UID that pod-bound service-account tokens carry
// (authentication.kubernetes.io/node-name and node-uid), so that no agent
// can take another node's name. nodeUID is read only for such names.
func AgentLeaseName(node string, nodeUID types.UID) string {
	if AgentLeaseNameNeedsUID(node) {
		return AgentLeasePrefix + string(nodeUID)
	}
	return AgentLeasePrefix + node
}

// AgentLeaseNode is the node whose agent's heartbeat lease is (the inverse
// of AgentLeaseName): the name after AgentLeasePrefix, or, for a Lease held
// by a node whose name needs its UID, the holder. Empty for a Lease not
// named with AgentLeasePrefix.
func AgentLeaseNode(lease *coordinationv1.Lease) string {
	rest, ok := strings.CutPrefix(lease.Name, AgentLeasePrefix)
	if !ok {
		return ""
	}
	if holder := lease.Spec.HolderIdentity; holder != nil && AgentLeaseNameNeedsUID(*holder) {
		return *holder
	}
	return rest
}
