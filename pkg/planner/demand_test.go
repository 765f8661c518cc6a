package planner

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/miglayout/miglayout/pkg/mig"
)

// requests builds a pod whose one claim has a request per class name; a
// name "a|b" is one request with the subrequests a and b (firstAvailable).
func requests(name string, classes ...string) Pod {
	p := pod(name, 1).build()
	c := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name + "-claim"}}
	for i, cl := range classes {
		r := resourceapi.DeviceRequest{Name: "r" + itoa(i)}
		if subs := strings.Split(cl, "|"); len(subs) > 1 {
			for j, s := range subs {
				r.FirstAvailable = append(r.FirstAvailable, resourceapi.DeviceSubRequest{Name: "s" + itoa(j), DeviceClassName: s,
					AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 1})
			}
		} else {
			r.Exactly = &resourceapi.ExactDeviceRequest{DeviceClassName: cl, AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 1}
		}
		c.Spec.Devices.Requests = append(c.Spec.Devices.Requests, r)
	}
	p.Claims = []*resourceapi.ResourceClaim{c}
	return p
}

func TestDemand(t *testing.T) {
	pods := []Pod{
		pod("mig", 1).claim(profileIs("1g.10gb"), 1).build(),
		pod("too-big", 1).claim("device.attributes['mig.miglayout.io'].memory > 10000000", 1).build(),
		requests("nic-only", "nic.example.com"),
		requests("missing-class", "no-such-class"),
		requests("nic-and-mig", "nic.example.com", "mig.miglayout.io"),
		requests("nic-or-mig", "nic.example.com|mig.miglayout.io"),
		requests("recent-driver", "mig-recent-driver"),
		requests("other-vendor", "not-mig"),
	}
	// A class that names the driver only to exclude it is not for its devices.
	notMig := nicClass()
	notMig.Name = "not-mig"
	notMig.Spec.Selectors[0].CEL.Expression = "device.driver != 'mig.miglayout.io' && device.driver == 'gpu.example.com'"
	// A class reading the driver version fails to evaluate on a stand-in device (the
	// catalog does not know versions): it names the driver, so its pods are demand.
	recent := migClass()
	recent.Name = "mig-recent-driver"
	recent.Spec.Selectors = append(recent.Spec.Selectors, resourceapi.DeviceSelector{CEL: &resourceapi.CELDeviceSelector{
		Expression: "device.attributes['mig.miglayout.io'].driverVersion.isGreaterThan(semver('500.0.0'))"}})
	got := Demand(context.Background(), driver, []*resourceapi.DeviceClass{migClass(), nicClass(), recent, notMig}, mig.DefaultCatalog().Models(), pods)
	var names []string
	for _, p := range got {
		names = append(names, p.Pod.Name)
	}
	// A pod whose class admits MIG devices is demand even when its own
	// selector asks for what no profile has (the planner says why); one
	// that asks only for another driver's devices, or names no existing
	// class, is not.
	if diff := cmp.Diff([]string{"mig", "too-big", "nic-and-mig", "nic-or-mig", "recent-driver"}, names); diff != "" {
		t.Errorf("demand (-want +got):\n%s", diff)
	}
}

// TestPodFailed: a pod whose selector fails to evaluate on miglayout's
// devices is reported with the allocator's error; the other pods are
// still planned.
func TestPodFailed(t *testing.T) {
	snap := Snapshot{
		Driver:  driver,
		Classes: []*resourceapi.DeviceClass{migClass()},
		Nodes:   []Node{node("n1").gpu("A100-SXM4-80GB", "", "").build()},
		Pending: []Pod{
			pod("broken", 5).claim("device.attributes['nic.example.com'].speed > 10", 1).build(),
			pod("fine", 1).claim(profileIs("3g.40gb"), 1).build(),
		},
	}
	res, err := Plan(context.Background(), snap)
	if err != nil {
		t.Fatalf("one pod's broken selector stopped the plan: %v", err)
	}
	if why := res.Unservable["default/broken"]; !strings.HasPrefix(why, "evaluating the pod's claims: ") {
		t.Errorf("broken pod: %q, want the allocator's error", why)
	}
	if len(res.Served) != 1 || res.Served[0].Pod != "default/fine" {
		t.Errorf("served %+v, want default/fine", res.Served)
	}
}
