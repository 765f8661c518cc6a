package planner

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// TestNoExecuteTaintKeepsPodsOff: a node tainted NoExecute takes no pod
// that does not tolerate the taint, as one tainted NoSchedule; a pod that
// tolerates it is planned there.
func TestNoExecuteTaintKeepsPodsOff(t *testing.T) {
	n := node("n1").gpu("A100-SXM4-80GB", "", "").build()
	n.Node.Spec.Taints = []corev1.Taint{{Key: "maintenance", Effect: corev1.TaintEffectNoExecute}}
	tolerating := pod("tolerating", 1).claim(profileIs("1g.10gb"), 1).build()
	tolerating.Pod.Spec.Tolerations = []corev1.Toleration{{Key: "maintenance", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute}}
	tests := map[string]struct {
		pod  Pod
		want trace
	}{
		"a pod that does not tolerate it": {
			pod:  pod("p", 1).claim(profileIs("1g.10gb"), 1).build(),
			want: trace{Unservable: map[string]string{"default/p": "no Auto-mode node matches the pod's node selector, affinity and tolerations and has the resources it requests allocatable at all (and matches the node selectors of its claims allocated already)"}},
		},
		"a pod that tolerates it": {
			pod: tolerating,
			want: trace{
				Changes: []string{"n1/0: (empty) -> 1g.10gb@6 serves default/tolerating"},
				Served:  []string{"default/tolerating -> n1 gpu-0-mig-1g10gb-19-6 after change"},
			},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			checkTrace(t, tc.want, planTrace(t, []Node{n}, []Pod{tc.pod}))
		})
	}
}
