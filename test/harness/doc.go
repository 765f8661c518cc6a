// Package harness runs a real Kubernetes control plane (etcd, kube-apiserver, kube-scheduler,
// kube-controller-manager) on loopback for miglayout's integration and e2e tests.
//
// The binaries are built from the Go module proxy by test/testbin/build.sh (`make testbin`)
// into ~/.cache/miglayout/testbin/v<k8s>-etcd<etcd> (or $MIGLAYOUT_TESTBIN); BinDir finds
// them. Start picks free ports at run time, so several control planes can run side by side,
// and every child process is started in its own process group with a parent-death signal:
// Stop kills them, and so does the death of the test binary.
//
// Cluster shape (chosen so that tests can fake nodes without kubelets):
//   - DRA at the Kubernetes 1.37 defaults (resource.k8s.io/v1, all GA/beta DRA features on);
//   - authorization Node,RBAC, admission NodeRestriction on, TaintNodesByCondition off;
//   - kube-controller-manager without node-lifecycle-controller, so hand-made Nodes (see
//     CreateNode) stay Ready and untainted; controllers use per-controller ServiceAccounts;
//   - kube-scheduler with its own identity (system:kube-scheduler, bootstrap RBAC);
//   - admin access by bearer token (group system:masters); any other identity through
//     ConfigForUser (client certificate signed by the cluster CA) or ConfigForServiceAccount.
//
// There is no kubelet: pods are scheduled (bound) but never run. A pod bound to a node
// cannot finish a graceful delete; use ForceDeletePod.
package harness
