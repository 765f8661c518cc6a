package planner

import "testing"

// TestFreeDeviceInFlightStaysOfferedPastAPodThatMayNotUseIt: a free device
// a change in flight brings, passed over by pods that may not run on its
// node, is still offered to a later pod that may, after the devices of
// another change in flight are taken.
func TestFreeDeviceInFlightStaysOfferedPastAPodThatMayNotUseIt(t *testing.T) {
	nodes := []Node{
		node("n1").gpu("A100-SXM4-80GB", "1g.10gb@0", "").changing().build(),
		node("n2").gpu("A100-SXM4-80GB", "1g.10gb@0", "").changing().build(),
	}
	pods := []Pod{
		pod("a", 3).nodeSelector("kubernetes.io/hostname", "n2").claim(profileIs("1g.10gb"), 1).build(),
		pod("b", 2).nodeSelector("kubernetes.io/hostname", "n2").claim(profileIs("1g.10gb"), 1).build(),
		pod("c", 1).claim(profileIs("1g.10gb"), 1).build(),
	}
	want := trace{
		Served: []string{
			"default/a -> n2 gpu-0-mig-1g10gb-19-0",
			"default/c -> n1 gpu-0-mig-1g10gb-19-0",
		},
		Unservable: map[string]string{"default/b": NoRoom},
	}
	checkTrace(t, want, planTrace(t, nodes, pods))
}
