package agent

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

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
		"Xid %d on %s: %s reported Unhealthy to the kubelet and published with the NoSchedule taint %s=%d until the node reboots or kubectl miglayout clear-xids clears it; NVIDIA's XID Errors guide says what the Xid means and whether the GPU needs a reset",
		x.Code, where, strings.Join(hit, ", "), slices.XidTaintKey, x.Code), maxEventNote))
}

// XidMarks are the kubelet plugin's Xid marks (*plugin.Plugin).
type XidMarks interface {
	// ClearXids clears the marks of the GPUs each part names (all where
	// a part names none), once per request ID; applied is false for an
	// ID applied before. cleared names what was cleared. Marks whose Xid
	// came last after the requestedAt (when set) of every part naming
	// their GPU are kept and returned as kept.
	ClearXids(ctx context.Context, request string, parts []v1alpha1.ClearXidsPart) (cleared, kept []string, applied bool, err error)
	// XidOf returns the Xid that hit the device with UUID uuid on GPU
	// gpuIndex (UUID gpuUUID, "" where not known), or (uuid "") the GPU
	// as a whole, if one did (DeviceFaults.XidOf).
	XidOf(gpuIndex int, gpuUUID, uuid string) (uint64, bool)
	// PruneXids forgets the marks of the MIG devices of the GPUs in present
	// (GPU index to its MIG devices' UUIDs) that are not listed there.
	PruneXids(ctx context.Context, present map[int][]string)
}

// pruneXids has XidMarks forget the marks of MIG devices gone from gpus
// (NVML truth after a pass).
func (r *NodeReconciler) pruneXids(ctx context.Context, gpus []GPUState) {
	if r.XidMarks == nil {
		return
	}
	present := map[int][]string{}
	for _, g := range gpus {
		uuids := []string{}
		for _, d := range g.Devices {
			if d.UUID != "" {
				uuids = append(uuids, d.UUID)
			}
		}
		present[g.GPU.Index] = uuids
	}
	r.XidMarks.PruneXids(ctx, present)
}

// gpuXids returns, per GPU index of res, the Xids XidMarks holds against
// the GPU (SyncResult.Xids): the GPU's own alone where one hit it as a
// whole, else those of its MIG devices, by published name; for a GPU NVML
// could not read (in res.Results only: an Xid 79 takes a GPU off the bus),
// its own. Nil without XidMarks.
func (r *NodeReconciler) gpuXids(res *SyncResult) map[int][]v1alpha1.GPUXid {
	if r.XidMarks == nil {
		return nil
	}
	out := map[int][]v1alpha1.GPUXid{}
	read := map[int]bool{}
	for _, g := range res.GPUs {
		read[g.GPU.Index] = true
	}
	for idx := range res.Results {
		// GPUs not read, whose UUID is not known: by index. A GPU read
		// is judged by its UUID below (a mark at its index may be
		// another board's, one NVML numbered anew).
		if read[idx] {
			continue
		}
		if code, ok := r.XidMarks.XidOf(idx, "", ""); ok {
			out[idx] = []v1alpha1.GPUXid{{Xid: int64(code)}}
		}
	}
	for _, g := range res.GPUs {
		if xids := gpuXidsOf(r.XidMarks, r.Repartitioner.Inventory, g); len(xids) > 0 {
			out[g.GPU.Index] = xids
		}
	}
	return out
}

// gpuXidsOf returns the Xids faults holds against GPU g: its own alone
// where one hit it as a whole (every device on it, made before or after),
// else those of its MIG devices, by the name inv publishes them under.
// The pool's Xid taints (PoolInventory.faultTaints) and the status rows
// (gpuXids) both read them here.
func gpuXidsOf(faults DeviceFaults, inv interface {
	DeviceName(gpu.GPU, *gpu.MIGDevice) string
}, g GPUState) []v1alpha1.GPUXid {
	if code, ok := faults.XidOf(g.GPU.Index, g.GPU.UUID, ""); ok {
		return []v1alpha1.GPUXid{{Xid: int64(code)}}
	}
	var out []v1alpha1.GPUXid
	for i := range g.Devices {
		d := &g.Devices[i]
		if d.UUID == "" {
			continue
		}
		if code, ok := faults.XidOf(g.GPU.Index, g.GPU.UUID, d.UUID); ok {
			out = append(out, v1alpha1.GPUXid{Xid: int64(code), Device: inv.DeviceName(g.GPU, d)})
		}
	}
	return out
}

// applyClearXids applies the request of node's annotation
// v1alpha1.AnnotationClearXids to XidMarks, and records EventXidsCleared
// on the Node once it did: the pass that follows publishes the devices
// without the Xid taint. A value that does not parse clears nothing and
// is told once (EventClearXidsRefused, Warning).
func (r *NodeReconciler) applyClearXids(ctx context.Context, node *corev1.Node) {
	value, ok := node.Annotations[v1alpha1.AnnotationClearXids]
	if !ok || r.XidMarks == nil {
		return
	}
	logger := klog.FromContext(ctx)
	req, err := v1alpha1.ParseClearXidsRequest(value)
	if err != nil {
		r.mu.Lock()
		told := r.clearXidsTold == value
		r.clearXidsTold = value
		r.mu.Unlock()
		if !told {
			logger.Error(err, "Request to clear the Xid marks refused: nothing cleared")
			r.recordOn(node, corev1.EventTypeWarning, EventClearXidsRefused, "ClearXids", err.Error()+"; nothing cleared")
		}
		return
	}
	cleared, kept, applied, err := r.XidMarks.ClearXids(ctx, req.ID, req.Parts())
	if !applied {
		return
	}
	if err != nil {
		logger.Error(err, "Clearing the Xid marks was not kept for the agent's next run; the next run clears them again")
	}
	which := v1alpha1.ClearXidsPart{GPUs: req.GPUs}.String()
	if len(req.Earlier) > 0 {
		var earlier []string
		for _, p := range req.Earlier {
			earlier = append(earlier, p.String())
		}
		which += " (and, for the requests it replaced, of " + strings.Join(earlier, ", ") + ")"
	}
	after := "the request"
	switch {
	case len(req.Earlier) > 0:
		after = "the requests naming their GPU"
	case req.RequestedAt != nil:
		after += " (" + req.RequestedAt.UTC().Format(time.RFC3339) + ")"
	}
	var parts []string
	if len(cleared) > 0 {
		parts = append(parts, "cleared "+strings.Join(cleared, ", ")+"; the devices no other mark holds are reported Healthy and published without the taint "+slices.XidTaintKey)
	}
	if len(kept) > 0 {
		parts = append(parts, fmt.Sprintf("kept %s, whose Xid came after %s: their devices stay Unhealthy and tainted; clear again once they were looked at",
			strings.Join(kept, ", "), after))
	}
	what := "no mark was set"
	if len(parts) > 0 {
		what = strings.Join(parts, "; ")
	}
	r.recordOn(node, corev1.EventTypeNormal, EventXidsCleared, "ClearXids", fmt.Sprintf("Request %q to clear the Xid marks of %s: %s", req.ID, which, what))
}

// recordOn records an event on obj, where the reconciler has a Recorder.
func (r *NodeReconciler) recordOn(obj runtime.Object, eventType, reason, action, note string) {
	if r.Recorder != nil {
		r.Recorder.Eventf(obj, nil, eventType, reason, action, "%s", truncate(note, maxEventNote))
	}
}
