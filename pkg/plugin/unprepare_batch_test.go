package plugin

import (
	"testing"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"

	"github.com/miglayout/miglayout/pkg/slices"
)

// TestOnUnpreparedCalledOnceForABatch: an UnprepareResourceClaims call of
// several claims tells the agent once that devices were released where any
// of its claims held devices, whatever its place in the batch (here the
// first, followed by a claim never prepared), and not where none did.
func TestOnUnpreparedCalledOnceForABatch(t *testing.T) {
	tests := map[string]struct {
		prepared bool
		want     int
	}{
		"a prepared claim first":   {true, 1},
		"no claim prepared at all": {false, 0},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			calls := 0
			p := e.countingPlugin(&calls)
			first := claim(uid1, "train", alloc{"mig", slices.DefaultDriverName, node, "gpu-0-mig-3g40gb-9-4"})
			if tc.prepared {
				if r := e.prepare(p, first); r.Err != nil {
					t.Fatal(r.Err)
				}
			}
			batch := []kubeletplugin.NamespacedObject{
				{UID: first.UID, NamespacedName: types.NamespacedName{Namespace: first.Namespace, Name: first.Name}},
				{UID: uid2, NamespacedName: types.NamespacedName{Namespace: "team-a", Name: "never-prepared"}},
			}
			res, err := p.UnprepareResourceClaims(e.ctx, batch)
			if err != nil {
				t.Fatal(err)
			}
			for uid, err := range res {
				if err != nil {
					t.Errorf("unprepare of %s: %v", uid, err)
				}
			}
			if calls != tc.want {
				t.Errorf("OnUnprepared called %d times, want %d", calls, tc.want)
			}
			if got := p.PreparedDevices(); len(got) != 0 {
				t.Errorf("PreparedDevices = %v after the batch, want none", got)
			}
		})
	}
}
