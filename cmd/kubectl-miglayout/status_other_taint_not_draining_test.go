package main

import (
	"strings"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	migslices "github.com/miglayout/miglayout/pkg/slices"
)

// TestStatusMarksOnlyTheDrainTaintDraining: a device is marked draining
// (~, about to be destroyed) for miglayout's drain taint only, not for
// another taint it is published with (a health taint of the driver).
func TestStatusMarksOnlyTheDrainTaintDraining(t *testing.T) {
	nml := reportedA100("gpu-a", "3g.40gb@0,3g.40gb@4")
	drained := resourceapi.Device{Name: deviceName(t, "A100-SXM4-80GB", 0, "3g.40gb@0"), Taints: []resourceapi.DeviceTaint{migslices.DrainTaint()}}
	unhealthy := resourceapi.Device{Name: deviceName(t, "A100-SXM4-80GB", 0, "3g.40gb@4"),
		Taints: []resourceapi.DeviceTaint{{Key: "example.com/unhealthy", Effect: resourceapi.DeviceTaintEffectNoSchedule}}}
	out, _, err := runWith(t, []client.Object{nml, slice("gpu-a", migslices.DefaultDriverName, drained, unhealthy)}, "status")
	if err != nil {
		t.Fatal(err)
	}
	if want := "[3g.40gb~"; !strings.Contains(out, want) || strings.Count(out, "3g.40gb~") != 1 {
		t.Errorf("want only the drain-tainted 3g.40gb marked ~:\n%s", out)
	}
}
