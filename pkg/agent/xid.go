package agent

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/miglayout/miglayout/api/v1alpha1"
	"github.com/miglayout/miglayout/pkg/mig/gpu"
	"github.com/miglayout/miglayout/pkg/slices"
)

// XidError is the kubelet plugin's OnXid: an Xid critical error x marked
// the devices hit (their UUIDs, or what stands for them) Unhealthy. It
// wakes the repartitioner, whose pass publishes them with slices.XidTaint,
// and records EventXidError on the node's NodeMigLayout (none where it
// cannot be read). It does not block.
func (r *NodeReconciler) XidError(ctx context.Context, x gpu.Xid, hit []string) {
	r.Wake()
	if r.Recorder == nil {
		return
	}
	var nml v1alpha1.NodeMigLayout
	if r.Client.Get(ctx, types.NamespacedName{Name: r.NodeName}, &nml) != nil {
		return
	}
	where := fmt.Sprintf("GPU %d", x.GPUIndex)
	if x.GPUUUID != "" {
		where += " (" + x.GPUUUID + ")"
	}
	if x.GIID >= 0 {
		where += fmt.Sprintf(", GPU instance %d", x.GIID)
	}
	r.Recorder.Eventf(&nml, nil, corev1.EventTypeWarning, EventXidError, "MarkUnhealthy", "%s", truncate(fmt.Sprintf(
		"Xid %d on %s: %s reported Unhealthy to the kubelet and published with the NoSchedule taint %s=%d until the agent restarts; NVIDIA's XID Errors guide says what the Xid means and whether the GPU needs a reset",
		x.Code, where, strings.Join(hit, ", "), slices.XidTaintKey, x.Code), maxEventNote))
}
