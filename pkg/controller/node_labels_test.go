package controller

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/event"
)

// TestSelectorLabelChanged: a node's label change wakes the MigLayouts only
// where some MigLayout's node selector names the label (matchLabels or a
// matchExpressions key, an Exists key added with an empty value
// included); a label nothing selects by (a feature-discovery timestamp)
// wakes none. A node starting to be deleted wakes them (it is selected no
// more).
func TestSelectorLabelChanged(t *testing.T) {
	byLabel := migLayout("by-label").selects("pool", "a").build()
	byExpr := migLayout("by-expression").selector(metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
		{Key: "gpu.example.com/mig", Operator: metav1.LabelSelectorOpExists}}}).build()
	r := &Reconciler{Client: fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(&byLabel, &byExpr).Build()}
	node := func(labels map[string]string) *metav1.PartialObjectMetadata {
		return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: labels}}
	}
	base := map[string]string{"pool": "a", "nvidia.com/gfd.timestamp": "1"}
	with := func(k, v string) map[string]string {
		out := map[string]string{}
		for key, val := range base {
			out[key] = val
		}
		out[k] = v
		return out
	}
	tests := map[string]struct {
		labels   map[string]string
		deleting bool
		want     bool
	}{
		"unchanged": {labels: base, want: false},
		// A finalizer holds it: the node is selected no more.
		"being deleted, labels unchanged":     {labels: base, deleting: true, want: true},
		"a label no selector names":           {labels: with("nvidia.com/gfd.timestamp", "2"), want: false},
		"a matchLabels key changes":           {labels: with("pool", "b"), want: true},
		"a matchLabels key goes":              {labels: map[string]string{"nvidia.com/gfd.timestamp": "1"}, want: true},
		"an Exists key comes, value empty":    {labels: with("gpu.example.com/mig", ""), want: true},
		"a label no selector names comes too": {labels: with("team", "x"), want: false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			updated := node(tc.labels)
			if tc.deleting {
				updated.DeletionTimestamp, updated.Finalizers = ptr.To(metav1.Now()), []string{"example.com/hold"}
			}
			got := r.selectorLabelChanged(event.UpdateEvent{ObjectOld: node(base), ObjectNew: updated})
			if got != tc.want {
				t.Errorf("selectorLabelChanged = %t, want %t", got, tc.want)
			}
		})
	}
}
