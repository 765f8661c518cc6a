package agent

import (
	"context"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// allocatedAtWithdrawal is an inventory at whose withdrawal (the first
// publication without drain taints after one with them) the API server
// shows dev allocated, while the agent's cache never does: kube-scheduler
// gave it to a claim that tolerates the drain taint, from the tainted
// publication, before the withdrawal reached it.
type allocatedAtWithdrawal struct {
	*fakeInventory
	alloc *fakeAllocations
	dev   string
}

func (s *allocatedAtWithdrawal) Publish(ctx context.Context, gpus []GPUState, draining sets.Set[string]) error {
	if draining.Len() == 0 && len(s.pubs) > 0 && len(s.last().draining) > 0 {
		s.alloc.live = sets.New(s.dev)
	}
	return s.fakeInventory.Publish(ctx, gpus, draining)
}

// TestAllocatedWhileWithdrawn: a device allocated after the live re-check
// that follows the drain, and before the withdrawal was served, is not
// destroyed though the agent's cache does not show it: the API server is
// read again once the withdrawal is served. The device is published again
// and the GPU waits for it.
func TestAllocatedWhileWithdrawn(t *testing.T) {
	const dev = "gpu-0-mig-3g40gb-9-4"
	g := newRig(t, "1xA100-SXM4-80GB")
	g.setup(t, 0, "3g.40gb@0,3g.40gb@4")
	g.r.Inventory = &allocatedAtWithdrawal{fakeInventory: g.inv, alloc: g.alloc, dev: dev}
	res, err := g.r.Sync(t.Context(), []v1alpha1.GPUSpec{spec(0, "7g.80gb@0")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	g.wantLayouts(t, "3g.40gb@0,3g.40gb@4")
	got := res.Results[0]
	if got.Reason != v1alpha1.ReasonDeviceInUse || !strings.Contains(got.Message, dev+" (allocated while being withdrawn)") || !res.Retry {
		t.Errorf("GPU 0: %+v (retry %v), want Blocked/DeviceInUse naming %s, retried", got, res.Retry, dev)
	}
	if last := g.inv.last(); !sets.New(last.devices...).Has(dev) || len(last.draining) != 0 {
		t.Errorf("last publication %v (draining %v), want %s published again untainted", last.devices, last.draining, dev)
	}
	if entries := g.r.Journal.Entries(); len(entries) != 0 {
		t.Errorf("journal entries %+v, want none left", entries)
	}
}
