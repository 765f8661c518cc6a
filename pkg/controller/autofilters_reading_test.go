package controller

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

// TestEventsDuringAReadPassTheFilters: an event that arrives while a pass
// reads its inputs (which may not show it) is let through the filters that
// judge by the last snapshot's nodes and labels: a pod ending on a node
// that snapshot did not have (the first pass of a new leader has none), a
// label the pods it reads may select on. Once the pass has updated the sets,
// the filters judge by them again.
func TestEventsDuringAReadPassTheFilters(t *testing.T) {
	ml := autoMigLayout("auto", nil)
	ended := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "done", Namespace: "default"},
		Spec: corev1.PodSpec{NodeName: "elsewhere"}, Status: corev1.PodStatus{Phase: corev1.PodSucceeded}}
	relabelled := func() (*corev1.Node, *corev1.Node) {
		o := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n9", Labels: map[string]string{"zone": "a"}}}
		n := o.DeepCopy()
		n.Labels["zone"] = "b"
		return o, n
	}
	var duringRead []bool
	var h *autoCluster
	funcs := interceptor.Funcs{List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
		if _, ok := list.(*corev1.PodList); ok && h != nil && h.a != nil {
			o, n := relabelled()
			duringRead = append(duringRead, h.a.endsOnAutoNode(ended), h.a.nodeChangeMatters(o, n))
		}
		return c.List(ctx, list, opts...)
	}}
	h = newAutoClusterIntercepted(t, ml, funcs,
		node("n1", map[string]string{"pool": "auto"}), autoNML("n1", ml, a100(0).layout("7g.80gb@0")))
	if _, err := h.a.Reconcile(context.Background(), autoKey); err != nil {
		t.Fatal(err)
	}
	if len(duringRead) == 0 {
		t.Fatal("the pass listed no pods: the test shows nothing")
	}
	for i, passed := range duringRead {
		if !passed {
			t.Errorf("filter %d dropped an event during the pass's read", i%2)
		}
	}
	o, n := relabelled()
	if h.a.endsOnAutoNode(ended) || h.a.nodeChangeMatters(o, n) {
		t.Error("after the pass the filters let through a pod ending on a node of no snapshot, or a label no pod selects on")
	}
}
