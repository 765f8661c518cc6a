package plugin

import "testing"

// TestReleaseOrphanOfAClaimUnpreparedMeanwhile: the kubelet unprepares a
// claim while ReleaseOrphan looks for processes on its devices: the release
// reports nothing released, and the agent hears of the devices released
// once (the kubelet's unprepare), not twice.
func TestReleaseOrphanOfAClaimUnpreparedMeanwhile(t *testing.T) {
	e, p, h, c := preparedBesideTheKubelet(t)
	calls := 0
	p.cfg.OnUnprepared = func() { calls++ }
	h.meanwhile = func() {
		if err := e.unprepare(p, c); err != nil {
			t.Fatal(err)
		}
	}
	if _, released, err := p.ReleaseOrphan(t.Context(), uid1, nil); released || err != nil {
		t.Errorf("ReleaseOrphan of a claim unprepared meanwhile: released %v, %v; want not released, no error", released, err)
	}
	if h.meanwhile != nil {
		t.Fatal("ReleaseOrphan did not read NVML")
	}
	if calls != 1 {
		t.Errorf("OnUnprepared called %d times, want once (the kubelet's unprepare)", calls)
	}
}
