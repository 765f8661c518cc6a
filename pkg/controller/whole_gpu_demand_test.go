package controller

import (
	"strings"
	"testing"
)

// TestWholeGPUPodIsNoAutoDemand: a pod whose only claim asks for a whole
// GPU (the chart's class of whole GPUs, which names the driver) waits for
// one held by another claim. Auto mode makes MIG devices, not whole GPUs:
// the pod is not its demand, so it is neither told it cannot be served
// nor counted pending in status.auto (nor, with it, in the metrics and the
// pods-waiting alert).
func TestWholeGPUPodIsNoAutoDemand(t *testing.T) {
	ml, _, objs, wholeClaim := wholeGPUFixture()
	objs = objs[:len(objs)-3] // c1, c2 and p1
	objs = append(objs, wholeClaim("c2"), autoPod("p1", h0(), "c2"), heldWholeGPU(wholeClaim))
	h := newAutoCluster(t, ml, objs...)
	h.settle()
	for _, e := range h.events() {
		if strings.Contains(e, "p1") || strings.Contains(e, "c2") || strings.Contains(e, EventNotServable) {
			t.Errorf("event %q about a pod waiting for a whole GPU", e)
		}
	}
	st := h.autoStatus()
	if st == nil {
		t.Fatal("no status.auto written")
	}
	if st.PendingPods != 0 || st.NotServablePods != 0 {
		t.Errorf("status.auto counts %d pending and %d not servable pods, want none (p1 waits for a whole GPU)", st.PendingPods, st.NotServablePods)
	}
}
