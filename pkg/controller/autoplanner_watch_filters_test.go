package controller

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/sets"
	"sigs.k8s.io/controller-runtime/pkg/event"
)

// TestPodMattersForExtendedResources: a pending pod that asks for an
// extended resource a DeviceClass may back, without any claim, is demand
// (its events wake the planner); once running it no longer is.
func TestPodMattersForExtendedResources(t *testing.T) {
	pending := runningPod("pending", corev1.PodPending, false)
	pending.Spec.NodeName = ""
	pending.Spec.Containers = []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{"nvidia.com/mig-1g.10gb": resource.MustParse("1")}}}}
	running := pending.DeepCopy()
	running.Spec.NodeName, running.Status.Phase = "n1", corev1.PodRunning
	for name, tc := range map[string]struct {
		pod  *corev1.Pod
		want bool
	}{
		"pending": {&pending, true},
		"running": {running, false},
	} {
		t.Run(name, func(t *testing.T) {
			if got := podMatters(tc.pod); got != tc.want {
				t.Errorf("podMatters = %t, want %t", got, tc.want)
			}
		})
	}
}

// TestBoundPodEventsThatWakeThePlanner: of the bound pods' events, a pod
// on an Auto node that ended (failed or succeeded) wakes the planner, and
// so does any bound pod deleted that has claims or asks for an extended
// resource, wherever it ran; a pod deleted from another node that asks for
// neither does not. A bound pod whose status still names a nomination to
// an Auto node is no nominated pod.
func TestBoundPodEventsThatWakeThePlanner(t *testing.T) {
	a := &AutoPlanner{autoNodes: sets.New("n1")}
	p := a.boundPodEvents()
	on := func(node string, phase corev1.PodPhase) *corev1.Pod {
		pod := runningPod("p", phase, false)
		pod.Spec.NodeName = node
		return &pod
	}
	withClaim := on("cpu-1", corev1.PodRunning)
	withClaim.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimName: new("c")}}
	extended := on("cpu-1", corev1.PodRunning)
	extended.Spec.Containers = []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{"example.com/fpga": resource.MustParse("1")}}}}
	for name, tc := range map[string]struct {
		got, want bool
	}{
		"failed on an Auto node":                      {p.Update(event.TypedUpdateEvent[*corev1.Pod]{ObjectOld: on("n1", corev1.PodRunning), ObjectNew: on("n1", corev1.PodFailed)}), true},
		"succeeded on an Auto node":                   {p.Update(event.TypedUpdateEvent[*corev1.Pod]{ObjectOld: on("n1", corev1.PodRunning), ObjectNew: on("n1", corev1.PodSucceeded)}), true},
		"failed elsewhere, no claim":                  {p.Update(event.TypedUpdateEvent[*corev1.Pod]{ObjectOld: on("cpu-1", corev1.PodRunning), ObjectNew: on("cpu-1", corev1.PodFailed)}), false},
		"deleted elsewhere with a claim":              {p.Delete(event.TypedDeleteEvent[*corev1.Pod]{Object: withClaim}), true},
		"deleted elsewhere with an extended resource": {p.Delete(event.TypedDeleteEvent[*corev1.Pod]{Object: extended}), true},
		"deleted elsewhere with neither":              {p.Delete(event.TypedDeleteEvent[*corev1.Pod]{Object: on("cpu-1", corev1.PodRunning)}), false},
	} {
		if tc.got != tc.want {
			t.Errorf("%s: wakes the planner = %t, want %t", name, tc.got, tc.want)
		}
	}
	bound := on("n1", corev1.PodRunning)
	bound.Status.NominatedNodeName = "n1"
	if a.nominatedToAutoNode(bound) {
		t.Error("a pod bound to n1, its status still naming its nomination there, counts as nominated to an Auto node")
	}
}
