package agent

import (
	"strings"
	"testing"
)

// TestUnlistedUnreadableGPUIsToldOnce: a GPU the spec does not list that
// falls off the bus gets one GPUUnreadable warning; the passes after, while
// its status row already says so, record no other.
func TestUnlistedUnreadableGPUIsToldOnce(t *testing.T) {
	r, c, rec, req := unlistedGPULost(t)
	for range 3 {
		reconcileThenRead(t, r, c, req)
	}
	var told []string
	for len(rec.Events) > 0 {
		if e := <-rec.Events; strings.Contains(e, EventGPUUnreadable) {
			told = append(told, e)
		}
	}
	if len(told) != 1 {
		t.Errorf("GPUUnreadable events over three passes with GPU 1 off the bus: %q, want one", told)
	}
}
