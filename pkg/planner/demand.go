package planner

import (
	"context"
	"strings"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/miglayout/miglayout/pkg/mig"
	"github.com/miglayout/miglayout/pkg/slices"
)

// Demand returns the pods of pods that ask for a MIG device of driver: at
// least one request of one of their unallocated claims (or one of its
// firstAvailable subrequests) names a DeviceClass that admits a device
// driver publishes for some profile of models, or whose selectors name
// driver and fail to evaluate on such a device or read an attribute that
// tells GPUs apart (perGPUAttributes). The others (pods waiting
// for a NIC or another vendor's GPU only, for the driver's whole GPUs
// only, or naming a DeviceClass that does not exist) are not Auto mode's
// demand: the planner leaves them alone, so
// they get no event and no count. Only the DeviceClass decides, not the
// request's own selectors: a pod whose class admits MIG devices but whose
// selectors no profile satisfies is demand, and the planner says why it
// cannot serve it. models should be every model the catalog knows, so that
// a class for GPUs no Auto node has is still recognised.
//
// The classes are evaluated with the scheduler's allocator on one probe
// device per profile, whether or not ctx ends meanwhile (a few devices
// per model and class); a class selector that does not compile makes the
// class admit nothing.
func Demand(ctx context.Context, driver string, classes []*resourceapi.DeviceClass, models []*mig.Model, pods []Pod) []Pod {
	m := newMatcher(driver, classes)
	probeCtx := context.WithoutCancel(ctx)
	admits := map[string]bool{}
	classAdmits := func(name string) bool {
		if ok, seen := admits[name]; seen {
			return ok
		}
		class, err := m.classes.Get(name)
		if err != nil {
			admits[name] = false
			return false
		}
		// The class is tried on a stand-in device of each profile of each
		// model. One that names the driver (device.driver, or its
		// attribute domain) is for the driver's devices where its
		// selectors fail to evaluate there (one reading the driver
		// version, which the catalog does not know) or read an attribute
		// that tells GPUs apart (a team's GPUs by parentIndex or
		// parentUUID, a placement, a NUMA node: the stand-in is one GPU
		// of each model), and is judged on the real GPUs by the planner;
		// one that evaluates, admits no stand-in and reads no such
		// attribute (the driver's class of whole GPUs) is not MIG demand.
		// The probe is a few stand-in devices per model: it runs to its end
		// (probeCtx), so that an ending context is not taken for a
		// selector that fails.
		ok, failed := false, false
		for _, model := range models {
			ps, err := m.singleProfiles(probeCtx, classProbe(name), kindOf(slices.PlannedGPU(model, 0)))
			if err != nil {
				failed = true // the class's CEL fails: the scheduler reports it
				break
			}
			if len(ps) > 0 {
				ok = true
				break
			}
		}
		ok = ok || (failed || mentionsPerGPU(selectorsText(class))) && namesDriver(class, driver)
		admits[name] = ok
		return ok
	}
	var out []Pod
	for _, pod := range pods {
		mine := false
		for _, c := range pod.Claims {
			for _, name := range classNames(c) {
				mine = classAdmits(name) || mine
			}
		}
		if mine {
			out = append(out, pod)
		}
	}
	return out
}

// classProbe is a claim for one device of class, with no selector of its
// own.
func classProbe(class string) *resourceapi.ResourceClaim {
	return &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "class-probe", Namespace: "probe"},
		Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{
			Name: "probe",
			Exactly: &resourceapi.ExactDeviceRequest{
				DeviceClassName: class, AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 1,
			},
		}}}},
	}
}

// namesDriver reports whether one of class's CEL selectors asks for the
// driver's devices by name (device.driver == "driver") or reads its
// attributes (device.attributes["driver"]).
func namesDriver(class *resourceapi.DeviceClass, driver string) bool {
	for _, sel := range class.Spec.Selectors {
		if sel.CEL == nil {
			continue
		}
		e := strings.Join(strings.Fields(sel.CEL.Expression), "")
		for _, q := range []string{"'", `"`} {
			if strings.Contains(e, "=="+q+driver+q) || strings.Contains(e, "["+q+driver+q+"]") {
				return true
			}
		}
	}
	return false
}

// selectorsText is the CEL expressions of class's selectors, one per line.
func selectorsText(class *resourceapi.DeviceClass) string {
	var b strings.Builder
	for _, sel := range class.Spec.Selectors {
		if sel.CEL != nil {
			b.WriteString(sel.CEL.Expression)
			b.WriteByte('\n')
		}
	}
	return b.String()
}
