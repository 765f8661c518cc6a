package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/hashicorp/go-multierror"
	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// newClearXidsCommand is `clear-xids`: it asks the agents of the named
// nodes to forget the Xid marks of their GPUs (all, or --gpu's), by
// writing a new request to each Node's annotation
// v1alpha1.AnnotationClearXids.
func newClearXidsCommand(e *env) *cobra.Command {
	var gpus []int
	cmd := &cobra.Command{
		Use:   "clear-xids NODE... [--gpu INDEX]...",
		Short: "Make devices an Xid hit schedulable again once their GPUs were reset",
		Long: `After an Xid critical error, the devices it hit are reported Unhealthy and
published with the NoSchedule taint miglayout.io/xid until the node reboots
(kubectl miglayout status marks them !). Once the GPUs were reset
(nvidia-smi --gpu-reset) or found sound, clear-xids asks each named node's
agent to forget the marks of its GPUs (--gpu: of those GPUs only, by NVML
index), through the Node's annotation miglayout.io/clear-xids. Marks of an
Xid the node saw again after the request are kept: an Xid you have not
seen yet (this machine's clock against the node's: keep them in sync, and
run it again to clear a mark kept). A request still on the Node, which
its agent may not have read, is carried in the new one. The agent records
an XidsCleared event on the Node naming what it cleared and kept, and
publishes the devices it cleared again without the taint.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return errors.New("name at least one node")
			}
			for _, idx := range gpus {
				if idx < 0 {
					return fmt.Errorf("--gpu %d: a GPU index is not negative", idx)
				}
			}
			c, err := e.client()
			if err != nil {
				return err
			}
			now := time.Now().UTC()
			req := v1alpha1.ClearXidsRequest{ID: now.Format(time.RFC3339) + "-" + uuid.NewString()[:8],
				GPUs: slices.Compact(slices.Sorted(slices.Values(gpus))), RequestedAt: &metav1.Time{Time: now}}
			return requestClearXids(cmd.Context(), c, cmd.OutOrStdout(), args, req)
		},
	}
	cmd.Flags().IntSliceVar(&gpus, "gpu", nil, "clear the marks of this GPU only (NVML index; repeat or comma-separate for several); default every GPU of the node")
	return cmd
}

// requestClearXids writes req to the annotation of each node, printing a
// line per node. A request already there, which the agent may not have
// read, is carried in the new one (v1alpha1.ClearXidsRequest.Merge); the
// write is conditional on the Node's resourceVersion, read again and
// retried on a conflict, so that two requests written at once do not drop
// one. A node that does not exist or cannot be patched does not stop the
// others; the errors, each naming its node, are returned together.
func requestClearXids(ctx context.Context, c client.Client, out io.Writer, nodes []string, req v1alpha1.ClearXidsRequest) error {
	if err := req.Validate(); err != nil {
		return fmt.Errorf("making the request: %w", err)
	}
	which := v1alpha1.ClearXidsPart{GPUs: req.GPUs}.String()
	var errs *multierror.Error
	for _, name := range slices.Compact(slices.Clone(nodes)) {
		var written v1alpha1.ClearXidsRequest
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			var node corev1.Node
			if err := c.Get(ctx, types.NamespacedName{Name: name}, &node); err != nil {
				return fmt.Errorf("reading Node %s: %w", name, err)
			}
			written = req
			if old, ok := node.Annotations[v1alpha1.AnnotationClearXids]; ok {
				// One that does not parse was refused: nothing to carry.
				if replaced, err := v1alpha1.ParseClearXidsRequest(old); err == nil {
					written = req.Merge(replaced)
				}
			}
			value, err := json.Marshal(written)
			if err != nil {
				return fmt.Errorf("encoding the request: %w", err)
			}
			before := node.DeepCopy()
			if node.Annotations == nil {
				node.Annotations = map[string]string{}
			}
			node.Annotations[v1alpha1.AnnotationClearXids] = string(value)
			if err := c.Patch(ctx, &node, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
				return fmt.Errorf("annotating Node %s: %w", name, err)
			}
			return nil
		})
		if err != nil {
			errs = multierror.Append(errs, err)
			continue
		}
		carried := ""
		if len(written.Earlier) > 0 {
			var earlier []string
			for _, p := range written.Earlier {
				earlier = append(earlier, p.String())
			}
			carried = ", carrying the earlier requests the agent may not have read (" + strings.Join(earlier, ", ") + ")"
		}
		fmt.Fprintf(out, "node %s: clearing the Xid marks of %s requested (id %s)%s; its agent records an XidsCleared event on the Node once done\n", name, which, req.ID, carried)
		if unknown := gpusNotReported(ctx, c, name, req.GPUs); len(unknown) > 0 {
			fmt.Fprintf(out, "node %s: warning: its agent reports no GPU of index %v (NodeMigLayout status): check --gpu\n", name, unknown)
		}
	}
	return errs.ErrorOrNil()
}

// gpusNotReported are those of gpus that the NodeMigLayout status of node
// lists no GPU of (an index mistyped, or of another node); none where the
// status cannot be read or lists no GPU, which tells nothing.
func gpusNotReported(ctx context.Context, c client.Client, node string, gpus []int) []int {
	var nml v1alpha1.NodeMigLayout
	if len(gpus) == 0 || c.Get(ctx, types.NamespacedName{Name: node}, &nml) != nil || len(nml.Status.GPUs) == 0 {
		return nil
	}
	var out []int
	for _, idx := range gpus {
		if !slices.ContainsFunc(nml.Status.GPUs, func(g v1alpha1.GPUStatus) bool { return int(g.Index) == idx }) {
			out = append(out, idx)
		}
	}
	return out
}
