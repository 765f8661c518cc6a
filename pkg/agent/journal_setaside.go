package agent

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
)

// tellJournalSetAside records, once per start, a Warning event on the Node
// where OpenJournal set the journal file aside (Journal.SetAside: another
// version's format, or unreadable): the work it recorded is not resumed, so
// a GPU instance left without its compute instance, or a MIG mode change
// left pending, on a GPU no spec names stays until someone looks. A Node
// that cannot be read is tried again by the next pass.
func (r *NodeReconciler) tellJournalSetAside(ctx context.Context) {
	if r.Recorder == nil || r.Repartitioner == nil || r.Repartitioner.Journal == nil || r.setAsideTold.Load() {
		return
	}
	why := r.Repartitioner.Journal.SetAside()
	if why == nil {
		return
	}
	var node corev1.Node
	if err := r.Client.Get(ctx, types.NamespacedName{Name: r.NodeName}, &node); err != nil {
		klog.FromContext(ctx).Error(err, "Reading the Node to tell of the journal set aside")
		return
	}
	r.recordOn(&node, corev1.EventTypeWarning, EventJournalSetAside, "OpenJournal",
		why.Error()+"; check this node's GPUs for a pending MIG mode change (nvidia-smi -q: MIG Mode Pending) or GPU instances without compute instances (nvidia-smi mig -lgi, -lci) on GPUs no NodeMigLayout names")
	r.setAsideTold.Store(true)
}
