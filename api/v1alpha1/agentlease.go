package v1alpha1

import (
	"crypto/sha256"
	"encoding/hex"
)

// AgentLeasePrefix starts the name of every agent's heartbeat Lease.
const AgentLeasePrefix = "miglayout-agent-"

// maxLeaseName is the limit on a Lease's name (a DNS subdomain).
const maxLeaseName = 253

// AgentLeaseName is the name of the coordination.k8s.io/v1 Lease that the
// agent of node renews as its heartbeat (holderIdentity: the node name), in
// the namespace both the agent (--lease-namespace) and the controller
// (--agent-lease-namespace) are given: "miglayout-agent-<node>", or, for
// node names longer than 237 characters, "miglayout-agent-" followed by the
// first 16 hexadecimal digits of the name's SHA-256.
func AgentLeaseName(node string) string {
	if len(AgentLeasePrefix)+len(node) <= maxLeaseName {
		return AgentLeasePrefix + node
	}
	sum := sha256.Sum256([]byte(node))
	return AgentLeasePrefix + hex.EncodeToString(sum[:8])
}
