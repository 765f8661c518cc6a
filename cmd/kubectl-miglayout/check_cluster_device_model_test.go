package main

import (
	"strings"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	migslices "github.com/miglayout/miglayout/pkg/slices"
)

// TestCheckAgainstClusterTakesTheDeviceModelOfItsDriver: against a
// cluster, a claim for a MIG profile is judged on the devices a layout can
// create wherever miglayout's driver is in use: it publishes devices (here
// whole GPUs only, its DeviceClasses selecting no driver by name), or no
// device yet but a DeviceClass selects it by name, in single or double
// quotes. Until a MIG device of the driver is published, check says its
// attributes are taken from the device model; once one is, it does not.
func TestCheckAgainstClusterTakesTheDeviceModelOfItsDriver(t *testing.T) {
	var whole, migs []resourceapi.Device
	for _, d := range migDevices() {
		if _, isMIG, ok := migslices.DeviceGPUIndex(d.Name); ok && isMIG {
			migs = append(migs, d)
		} else if ok {
			whole = append(whole, d)
		}
	}
	if len(whole) == 0 || len(migs) == 0 {
		t.Fatal("the device model lacks a whole GPU or a MIG device")
	}
	selecting := func(name, expr string) *resourceapi.DeviceClass {
		c := &resourceapi.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if expr != "" {
			c.Spec.Selectors = []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: expr}}}
		}
		return c
	}
	const note = "no MIG device of driver mig.miglayout.io is published yet"
	for name, tc := range map[string]struct {
		objs     []client.Object
		wantNote bool
	}{
		"whole GPUs published, classes selecting no driver": {
			[]client.Object{selecting("mig.miglayout.io", ""), slice("node-1", migslices.DefaultDriverName, whole...)}, true},
		"nothing published, a class naming the driver in single quotes": {
			[]client.Object{selecting("mig.miglayout.io", "device.driver == 'mig.miglayout.io'")}, true},
		"nothing published, a class naming the driver in double quotes": {
			[]client.Object{selecting("mig.miglayout.io", `device.driver == "mig.miglayout.io"`)}, true},
		"MIG devices published": {
			[]client.Object{selecting("mig.miglayout.io", ""), slice("node-1", migslices.DefaultDriverName, migs...)}, false},
	} {
		t.Run(name, func(t *testing.T) {
			out, _, err := runWith(t, tc.objs, "check", "-f", "testdata/check-clean.yaml")
			if err != nil || !strings.Contains(out, "No problems found") {
				t.Errorf("check of a 3g.40gb claim: %v, want no problem found:\n%s", err, out)
			}
			if got := strings.Contains(out, note); got != tc.wantNote {
				t.Errorf("check notes %q: %v, want %v:\n%s", note, got, tc.wantNote, out)
			}
		})
	}
}
