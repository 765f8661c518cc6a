package main

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	migslices "github.com/miglayout/miglayout/pkg/slices"
)

// demoXid is the Xid the health step injects: 94, a contained ECC error,
// which the driver attributes to the GPU instance whose memory it hit.
const demoXid = 94

// xidHealth injects an Xid on the GPU instance of trainer's device and
// shows the device Unhealthy in trainer's container status and tainted in
// the pool.
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
		p, err := d.c.Client().CoreV1().Pods(namespace).Get(ctx, "trainer", metav1.GetOptions{})
		if err != nil || len(p.Status.ContainerStatuses) == 0 {
			return false, nil
		}
		for _, rs := range p.Status.ContainerStatuses[0].AllocatedResourcesStatus {
			for _, r := range rs.Resources {
				if r.Health == corev1.ResourceHealthStatusUnhealthy {
					return true, nil
				}
			}
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("trainer's container status does not show its device Unhealthy: %w", err)
	}
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
	d.printf("  and trainer keeps it. Both hold until the node reboots or kubectl miglayout clear-xids.\n")
	return nil
}
