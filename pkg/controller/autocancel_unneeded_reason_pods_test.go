package controller

import (
	"fmt"
	"strings"
	"testing"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// TestUnneededCancelReasonListsUpToFivePods: the cancel of a change no pod
// waits for any more names the pods it was for, all of them up to five,
// the first five and how many more beyond that.
func TestUnneededCancelReasonListsUpToFivePods(t *testing.T) {
	for n, want := range map[int]string{
		4: "(ns/p0, ns/p1, ns/p2, ns/p3)",
		5: "(ns/p0, ns/p1, ns/p2, ns/p3, ns/p4)",
		7: "(ns/p0, ns/p1, ns/p2, ns/p3, ns/p4, and 2 more)",
	} {
		t.Run(fmt.Sprint(n, " pods"), func(t *testing.T) {
			spec := specGPU(0, "3g.40gb@4", "serves")
			for i := range n {
				spec.ServedPods = append(spec.ServedPods, fmt.Sprintf("ns/p%d", i))
			}
			nml := nodeMigLayout("n1").spec(spec).status(a100(0).layout("7g.80gb@0").phase(v1alpha1.PhaseDraining, "", "")).build()
			c, ok := undestroyed(nml, 0)
			if !ok {
				t.Fatal("n1/gpu-0's change is no candidate, want one")
			}
			if !strings.Contains(c.Reason, want+" waits") {
				t.Errorf("cancel reason %q, want it to name the pods as %q", c.Reason, want)
			}
		})
	}
}
