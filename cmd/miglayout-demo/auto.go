package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

func (d *demo) autoMode(ctx context.Context) error {
	d.printf("  Switch the MigLayout to Auto mode: pending claims decide the layouts from now on\n")
	d.printf("  (the devices in use stay; a GPU changes for pending claims, or, idle for 5 minutes,\n")
	d.printf("  to be given back whole).\n")
	if err := d.kubectl(ctx, "patch", "miglayout", layoutName, "--type=merge", "-p", `{"spec":{"mode":"Auto","rules":null}}`); err != nil {
		return err
	}
	if err := d.waitLayoutReady(ctx); err != nil {
		return err
	}
	before, err := d.snapshots()
	if err != nil {
		return err
	}
	d.printf("\n  No GPU holds a 4g.40gb device now. Pod finetune asks for one, pod oversized for\n")
	d.printf("  more memory than any GPU has:\n")
	claim, err := d.runFromTemplate(ctx, workloadDocs("four-g", "finetune", "too-big", "oversized"), "finetune")
	if err != nil {
		return err
	}
	if _, _, err := d.printAllocation(ctx, claim); err != nil {
		return err
	}
	after, err := d.snapshots()
	if err != nil {
		return err
	}
	d.printf("\n  GPUs the planner repartitioned (NVML, via the simulator):\n")
	changed := d.printLayouts(before, after, true, nil)
	if changed == 0 {
		return fmt.Errorf("finetune runs but no GPU was repartitioned")
	}
	if was, ok := findDevice(before[nodeA100], d.claimUUID); !ok {
		return fmt.Errorf("trainer's device %s (%s) is not in NVML", d.claimDevice, d.claimUUID)
	} else if now, ok := findDevice(after[nodeA100], d.claimUUID); !ok || now != was {
		return fmt.Errorf("trainer's device %s (%s) moved or went away: now %v", d.claimDevice, d.claimUUID, layoutsOf(after[nodeA100]))
	}
	d.printf("\n  What the planner told the pods (events):\n")
	for _, e := range []struct{ pod, reason string }{{"finetune", "WaitingForRepartition"}, {"oversized", "NotServableByAutoMode"}} {
		note, err := d.waitEvent(ctx, e.pod, e.reason)
		if err != nil {
			return err
		}
		d.printf("    pod %s: %s: %s\n", e.pod, e.reason, note)
	}
	ml, err := d.waitAutoStatus(ctx, func(a *v1alpha1.AutoStatus) bool { return a.PendingPods == 1 && a.NotServablePods == 1 })
	if err != nil {
		return err
	}
	out, err := yaml.Marshal(ml.Status.Auto)
	if err != nil {
		return err
	}
	d.printf("\n  The MigLayout's status.auto once finetune runs (kubectl describe miglayout %s shows it\n", layoutName)
	d.printf("  under Auto): only oversized is still pending.\n")
	d.printYAML(string(out))
	return nil
}

// waitEvent waits for an event with the reason about a pod of the demo's namespace and
// returns its note.
func (d *demo) waitEvent(ctx context.Context, pod, reason string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	note, seen := "", ""
	err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		list, err := d.c.Client().EventsV1().Events(namespace).List(ctx, metav1.ListOptions{FieldSelector: "regarding.name=" + pod})
		if err != nil {
			seen = err.Error()
			return false, nil
		}
		var reasons []string
		for _, e := range list.Items {
			if e.Regarding.Kind == "Pod" && e.Reason == reason {
				note = e.Note
				return true, nil
			}
			reasons = append(reasons, e.Reason+": "+e.Note)
		}
		seen = strings.Join(reasons, " | ")
		return false, nil
	})
	if err != nil {
		return "", fmt.Errorf("no %s event on pod %s: %w (seen: %s)", reason, pod, err, seen)
	}
	return note, nil
}

// waitAutoStatus waits until the MigLayout's status.auto satisfies ok.
func (d *demo) waitAutoStatus(ctx context.Context, ok func(*v1alpha1.AutoStatus) bool) (*v1alpha1.MigLayout, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var ml v1alpha1.MigLayout
	err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		if err := d.crc.Get(ctx, crclient.ObjectKey{Name: layoutName}, &ml); err != nil {
			return false, nil
		}
		return ml.Status.Auto != nil && ok(ml.Status.Auto), nil
	})
	if err != nil {
		return nil, fmt.Errorf("MigLayout %s: status.auto %+v: %w", layoutName, ml.Status.Auto, err)
	}
	return &ml, nil
}
