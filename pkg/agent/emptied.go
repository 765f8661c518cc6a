package agent

import (
	"context"
	"fmt"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
)

// tellEmptied records an event on the Node for each GPU of emptied
// (Repartitioner.takeEmptied): the GPU is in no spec, so it has no status
// row to say what the pass did to it. A Node that cannot be read is only
// logged.
func (r *NodeReconciler) tellEmptied(ctx context.Context, emptied map[int]bool) {
	if len(emptied) == 0 || r.Recorder == nil {
		return
	}
	var node corev1.Node
	if err := r.Client.Get(ctx, types.NamespacedName{Name: r.NodeName}, &node); err != nil {
		klog.FromContext(ctx).Error(err, "Reading the Node to tell of GPUs the agent's interrupted work had left in MIG mode without devices", "gpus", slices.Sorted(maps.Keys(emptied)))
		return
	}
	for _, idx := range slices.Sorted(maps.Keys(emptied)) {
		if emptied[idx] {
			r.recordOn(&node, corev1.EventTypeNormal, EventMIGModeTurnedOff, gpuAction("TurnOffMIGMode", idx), fmt.Sprintf(
				"GPU %d: an interrupted change of the agent had left it in MIG mode without GPU instances, and no NodeMigLayout asks for it: MIG mode turned off, the GPU is published whole", idx))
			continue
		}
		r.recordOn(&node, corev1.EventTypeWarning, EventEmptiedGPUInMIGMode, gpuAction("TurnOffMIGMode", idx), fmt.Sprintf(
			"GPU %d: an interrupted change of the agent had left it in MIG mode without GPU instances, and no NodeMigLayout asks for it; turning MIG mode off waits for a GPU reset (a process holds the GPU, or the board cannot reset it), so it was not left pending: the GPU stays in MIG mode without devices, published as nothing, until a layout asks for it", idx))
	}
}
