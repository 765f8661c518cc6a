package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/hashicorp/go-multierror"
	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
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
run it again to clear a mark kept). The agent records an XidsCleared event
on the Node naming what it cleared and kept, and publishes the devices it
cleared again without the taint.`,
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
// line per node. A node that does not exist or cannot be patched does not
// stop the others; the errors, each naming its node, are returned
// together.
func requestClearXids(ctx context.Context, c client.Client, out io.Writer, nodes []string, req v1alpha1.ClearXidsRequest) error {
	value, err := json.Marshal(req)
	if err != nil {
		return fmt.Errorf("encoding the request: %w", err)
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{v1alpha1.AnnotationClearXids: string(value)}}})
	if err != nil {
		return fmt.Errorf("encoding the request: %w", err)
	}
	which := "every GPU"
	if len(req.GPUs) > 0 {
		which = fmt.Sprintf("GPUs %v", req.GPUs)
	}
	var errs *multierror.Error
	for _, name := range slices.Compact(slices.Clone(nodes)) {
		var node corev1.Node
		if err := c.Get(ctx, types.NamespacedName{Name: name}, &node); err != nil {
			errs = multierror.Append(errs, fmt.Errorf("reading Node %s: %w", name, err))
			continue
		}
		if err := c.Patch(ctx, &node, client.RawPatch(types.MergePatchType, patch)); err != nil {
			errs = multierror.Append(errs, fmt.Errorf("annotating Node %s: %w", name, err))
			continue
		}
		fmt.Fprintf(out, "node %s: clearing the Xid marks of %s requested (id %s); its agent records an XidsCleared event on the Node once done\n", name, which, req.ID)
	}
	return errs.ErrorOrNil()
}
