package agent

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// devicePluginResources returns the extended resources of NVIDIA's device
// plugin that node's kubelet advertises, with their allocatable counts
// ("nvidia.com/mig-1g.10gb: 7"), sorted: nvidia.com/gpu and its shared
// variants (nvidia.com/gpu.shared, time-slicing or MPS), and
// nvidia.com/mig-<profile> (the plugin's mixed MIG strategy). A resource
// whose allocatable is zero is left out: the kubelet keeps the capacity of
// a device plugin that stopped for a while, but no allocatable.
func devicePluginResources(node *corev1.Node) []string {
	var out []string
	for name, q := range node.Status.Allocatable {
		n := string(name)
		if q.IsZero() || !(n == "nvidia.com/gpu" || strings.HasPrefix(n, "nvidia.com/gpu.") || strings.HasPrefix(n, "nvidia.com/mig-")) {
			continue
		}
		out = append(out, n+": "+q.String())
	}
	slices.Sort(out)
	return out
}

// devicePluginMessage is the status message of a GPU withheld because the
// node's kubelet advertises resources (devicePluginResources).
func devicePluginMessage(resources []string) string {
	return fmt.Sprintf("not published, not changed: the node's kubelet advertises %s (NVIDIA's device plugin), which hands the node's GPUs "+
		"to pods outside DRA, so a device published here could be given to a claim and a device-plugin pod at once; turn the device plugin "+
		"off on this node (GPU Operator: label the node nvidia.com/gpu.deploy.device-plugin=false; its resources then drop to zero), "+
		"or start the agent with --allow-nvidia-device-plugin where it serves no GPU the agent sees", strings.Join(resources, ", "))
}

// Withhold is the pass of a node whose GPUs another device manager hands
// out (why says which): it reads the GPUs from NVML and publishes the pool
// without a device, so the scheduler allocates none of them, and changes
// nothing on them (no repartition, no rollback, no device made again).
// Every GPU gets the result Failed, reason DevicePluginActive, message why.
// Claims prepared before are left prepared (their containers run on).
func (r *Repartitioner) Withhold(ctx context.Context, why string) (*SyncResult, error) {
	obs, unreadable, err := r.observe(ctx)
	if err != nil {
		return nil, err
	}
	if err := r.Inventory.Publish(ctx, nil, nil); err != nil {
		return nil, fmt.Errorf("publishing the pool without devices: %w", err)
	}
	klog.FromContext(ctx).Info("Withholding the node's GPUs: another device manager hands them out", "why", why)
	res := &SyncResult{Results: map[int]GPUResult{}, Stopped: sets.New[int](), Changed: sets.New[int](), GPUs: obs}
	withheld := GPUResult{Phase: v1alpha1.PhaseFailed, Reason: v1alpha1.ReasonDevicePluginActive, Message: why}
	for _, g := range obs {
		res.Results[g.GPU.Index] = withheld
	}
	for idx := range unreadable {
		res.Results[idx] = withheld
	}
	r.Metrics.setUnreadable(len(unreadable))
	// The node publishes none of its devices: counted free, they would
	// show capacity no claim can be given while another manager hands the
	// GPUs out.
	r.Metrics.recordDevices(&SyncResult{})
	return res, nil
}

// checkNode reads the node's Node (from the cache: one Node, CacheOptions)
// and returns why the pass must withhold the node's GPUs
// (devicePluginMessage; "" where it need not, AllowDevicePlugin, or the
// Node is gone), after applying the Node's request to clear the Xid marks
// (applyClearXids). A Node whose UID is not the one first read was deleted
// and made again under the name: OnNodeReplaced is told, and the error
// returned.
func (r *NodeReconciler) checkNode(ctx context.Context) (string, error) {
	var node corev1.Node
	err := r.Client.Get(ctx, types.NamespacedName{Name: r.NodeName}, &node)
	if apierrors.IsNotFound(err) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("reading Node %s: %w", r.NodeName, err)
	}
	r.mu.Lock()
	first := r.nodeUID
	if first == "" {
		r.nodeUID = node.UID
	}
	r.mu.Unlock()
	if first != "" && first != node.UID {
		err := fmt.Errorf("the Node %s was deleted and made again while the agent ran (UID %s, now %s): restarting, so that the node's ResourceSlices name the new Node as their owner",
			r.NodeName, first, node.UID)
		if r.OnNodeReplaced != nil {
			r.OnNodeReplaced(err)
		}
		return "", err
	}
	r.applyClearXids(ctx, &node)
	if r.AllowDevicePlugin {
		return "", nil
	}
	if res := devicePluginResources(&node); len(res) > 0 {
		return devicePluginMessage(res), nil
	}
	return "", nil
}

// nodeToNode maps an event of the node's Node to a pass of its
// NodeMigLayout.
func (r *NodeReconciler) nodeToNode(context.Context, client.Object) []reconcile.Request {
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: r.NodeName}}}
}

// nodeChanged passes the Node events checkNode reads: a Node created (made
// again), and one whose UID, device plugin resources or request to clear
// the Xid marks (v1alpha1.AnnotationClearXids) changed; not the kubelet's
// status updates of other fields.
var nodeChanged = predicate.Funcs{
	UpdateFunc: func(e event.UpdateEvent) bool {
		o, okOld := e.ObjectOld.(*corev1.Node)
		n, okNew := e.ObjectNew.(*corev1.Node)
		if !okOld || !okNew {
			return true
		}
		return o.UID != n.UID || !slices.Equal(devicePluginResources(o), devicePluginResources(n)) ||
			o.Annotations[v1alpha1.AnnotationClearXids] != n.Annotations[v1alpha1.AnnotationClearXids]
	},
	DeleteFunc:  func(event.DeleteEvent) bool { return false },
	GenericFunc: func(event.GenericEvent) bool { return false },
}
