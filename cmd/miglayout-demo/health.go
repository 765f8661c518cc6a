package main

import (
	"context"
	"fmt"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/miglayout/miglayout/api/v1alpha1"
	"github.com/miglayout/miglayout/pkg/agent"
	migslices "github.com/miglayout/miglayout/pkg/slices"
)

// demoXid is the Xid the health step injects: 94, a contained ECC error,
// which the driver attributes to the GPU instance whose memory it hit.
const demoXid = 94

// xidHealth injects an Xid on the GPU instance of trainer's device, shows
// the device Unhealthy in trainer's container status and tainted in the
// pool, then clears the mark with kubectl miglayout clear-xids (a request in
// the Node's annotation) and shows it Healthy and untainted again.
func (d *demo) xidHealth(ctx context.Context) error {
	sim, err := d.c.Sim(nodeA100)
	if err != nil {
		return err
	}
	gpuIdx, giID := -1, -1
	for _, g := range sim.Snapshot().GPUs {
		for _, gi := range g.GPUInstances {
			for _, ci := range gi.ComputeInstances {
				if ci.UUID == d.claimUUID {
					gpuIdx, giID = g.Index, gi.ID
				}
			}
		}
	}
	if gpuIdx < 0 {
		return fmt.Errorf("trainer's device %s is not in NVML", d.claimUUID)
	}
	d.printf("  The NVML simulator of %s reports Xid %d (a contained ECC error) on GPU %d's GPU instance %d,\n", nodeA100, demoXid, gpuIdx, giID)
	d.printf("  where trainer's device %s lies; the agent watches Xid events.\n", d.claimDevice)
	t := time.Now()
	if err := sim.InjectXid(gpuIdx, demoXid, giID, -1); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, stepTimeout)
	defer cancel()
	err = wait.PollUntilContextCancel(ctx, 50*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		return d.trainerHealth(ctx) == corev1.ResourceHealthStatusUnhealthy, nil
	})
	if err != nil {
		return fmt.Errorf("trainer's container status does not show its device Unhealthy: %w", err)
	}
	// The agent marked the device by now.
	marked := time.Now()
	d.printf("  %s later, trainer's container status shows the device Unhealthy (health is otherwise reported every 10s):\n", since(t))
	if err := d.kubectl(ctx, "get", "pod", "trainer", "-n", namespace, "-o", "jsonpath={range .status.containerStatuses[0].allocatedResourcesStatus[*].resources[*]}{.resourceID}{\"\\n  \"}{.health}: {.message}{end}"); err != nil {
		return err
	}
	var taint string
	err = wait.PollUntilContextCancel(ctx, 50*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		list, err := d.c.Client().ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + nodeA100})
		if err != nil {
			return false, nil
		}
		for _, s := range list.Items {
			for _, dev := range s.Spec.Devices {
				for _, tt := range dev.Taints {
					if dev.Name == d.claimDevice && tt.Key == migslices.XidTaintKey {
						taint = fmt.Sprintf("%s=%s:%s", tt.Key, tt.Value, tt.Effect)
						return true, nil
					}
				}
			}
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("the pool of %s does not publish %s with the Xid taint: %w", nodeA100, d.claimDevice, err)
	}
	d.printf("\n  The pool of %s publishes %s with the taint %s: no new claim is allocated it,\n", nodeA100, d.claimDevice, taint)
	d.printf("  and trainer keeps it. Both outlive a restart of the agent and hold until the node reboots\n")
	d.printf("  or an operator clears the mark.\n")

	// Once the GPU was reset, an operator clears the mark.
	d.printf("\n  Once the GPU was reset, an operator clears the mark; the plugin writes a request to the\n")
	d.printf("  Node's annotation %s, which the agent applies once:\n", v1alpha1.AnnotationClearXids)
	// The request's time is written to the second, and a mark of an Xid
	// in that second is kept (it may have come after the request): the
	// request goes out in a later second than the Xid's, as an operator's
	// after a GPU reset would.
	if wait := time.Until(marked.Truncate(time.Second).Add(time.Second)); wait > 0 {
		time.Sleep(wait)
	}
	t = time.Now()
	if err := d.kubectl(ctx, "miglayout", "clear-xids", nodeA100, "--gpu", strconv.Itoa(gpuIdx)); err != nil {
		return err
	}
	err = wait.PollUntilContextCancel(ctx, 50*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		tainted, err := d.xidTainted(ctx)
		if err != nil || tainted {
			return false, nil
		}
		return d.trainerHealth(ctx) == corev1.ResourceHealthStatusHealthy, nil
	})
	if err != nil {
		return fmt.Errorf("the mark of %s was not cleared: %w", d.claimDevice, err)
	}
	d.printf("\n  %s later, the pool publishes %s untainted and trainer's container status shows it Healthy;\n", since(t), d.claimDevice)
	d.printf("  the agent says what it cleared in an event on the Node:\n")
	selector := "reason=" + agent.EventXidsCleared + ",involvedObject.name=" + nodeA100
	err = wait.PollUntilContextCancel(ctx, 50*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		list, err := d.c.Client().CoreV1().Events(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{FieldSelector: selector})
		return err == nil && len(list.Items) > 0, nil
	})
	if err != nil {
		return fmt.Errorf("no %s event on Node %s: %w", agent.EventXidsCleared, nodeA100, err)
	}
	return d.kubectl(ctx, "get", "events", "-n", metav1.NamespaceDefault, "--field-selector", selector, "-o", "custom-columns=REASON:.reason,MESSAGE:.message")
}

// trainerHealth is the health trainer's container status shows for its
// device ("" where it shows none).
func (d *demo) trainerHealth(ctx context.Context) corev1.ResourceHealthStatus {
	p, err := d.c.Client().CoreV1().Pods(namespace).Get(ctx, "trainer", metav1.GetOptions{})
	if err != nil || len(p.Status.ContainerStatuses) == 0 {
		return ""
	}
	for _, rs := range p.Status.ContainerStatuses[0].AllocatedResourcesStatus {
		for _, r := range rs.Resources {
			return r.Health
		}
	}
	return ""
}

// xidTainted reports whether the pool of nodeA100 publishes trainer's
// device with the Xid taint.
func (d *demo) xidTainted(ctx context.Context) (bool, error) {
	list, err := d.c.Client().ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + nodeA100})
	if err != nil {
		return false, err
	}
	for _, s := range list.Items {
		for _, dev := range s.Spec.Devices {
			if _, xid := migslices.TaintsOf(dev); dev.Name == d.claimDevice && xid != "" {
				return true, nil
			}
		}
	}
	return false, nil
}
