package agent

import (
	"testing"

	"k8s.io/apimachinery/pkg/util/sets"
)

// TestBindingGateRemembersWithdrawnDevices: a device withdrawn from the
// pool stays refused and refusable through every later publication that
// leaves it out, not only the first one, until it is published again.
func TestBindingGateRemembersWithdrawnDevices(t *testing.T) {
	var g BindingGate
	g.Publishing(sets.New(devA, devB), nil)
	g.Publishing(sets.New(devB), nil) // devA withdrawn
	for i := range 3 {
		g.Publishing(sets.New(devB), nil)
		if !g.Refusable().Has(devA) {
			t.Errorf("publication %d after %s was withdrawn: refusable %v, want %s in it", i+1, devA, sets.List(g.Refusable()), devA)
		}
		if d := g.Decide(devA); d != BindingRefuse {
			t.Errorf("publication %d after %s was withdrawn: Decide(%s) = %v, want BindingRefuse", i+1, devA, devA, d)
		}
	}
	g.Publishing(sets.New(devA, devB), nil)
	if g.Refusable().Has(devA) {
		t.Errorf("%s published again: still refusable", devA)
	}
}
