package controller

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// behindAt is a cached NodeMigLayout at generation 3 holding the whole
// layout, behind a write of halves at a later generation.
func behindAt() *v1alpha1.NodeMigLayout {
	return &v1alpha1.NodeMigLayout{ObjectMeta: metav1.ObjectMeta{Generation: 3},
		Spec: v1alpha1.NodeMigLayoutSpec{GPUs: []v1alpha1.GPUSpec{specGPU(0, wholeLayout, "")}}}
}

// TestRolloutExpectationsLastTheirTTL: a write the cache does not show
// counts as unseen for the whole of rolloutExpectTTL, up to and including
// its last instant, whether the MigLayout's own pass or another's write
// looks at it then; the TTL outlasts an informer lag of half a minute.
func TestRolloutExpectationsLastTheirTTL(t *testing.T) {
	t0 := h0()
	written := []v1alpha1.GPUSpec{specGPU(0, halvesLayout, "")}
	cached := map[string]*v1alpha1.NodeMigLayout{"n1": behindAt()}
	for name, after := range map[string]time.Duration{
		"half a minute later": 30 * time.Second,
		"at the TTL":          rolloutExpectTTL,
	} {
		t.Run(name, func(t *testing.T) {
			var e rolloutExpectations
			e.expect("uid-b", "n1", written, "", 5, t0)
			e.expect("uid-a", "n2", written, "", 5, t0.Add(after)) // another MigLayout's write
			unseen, expires := e.unseen("uid-b", cached, t0.Add(after))
			if diff := cmp.Diff(map[string]bool{"n1": true}, unseen); diff != "" {
				t.Errorf("unseen (-want +got):\n%s", diff)
			}
			if want := t0.Add(rolloutExpectTTL); !expires.Equal(want) {
				t.Errorf("expires %v, want %v", expires, want)
			}
		})
	}
}

// TestRolloutExpectationsExpireWithTheFirst: of several unseen writes, the
// earliest forgotten gives when the pass looks again.
func TestRolloutExpectationsExpireWithTheFirst(t *testing.T) {
	t0 := h0()
	written := []v1alpha1.GPUSpec{specGPU(0, halvesLayout, "")}
	var e rolloutExpectations
	e.expect("uid-a", "n1", written, "", 5, t0)
	e.expect("uid-a", "n2", written, "", 5, t0.Add(10*time.Second))
	e.expect("uid-a", "n3", written, "", 5, t0.Add(5*time.Second))
	cached := map[string]*v1alpha1.NodeMigLayout{"n1": behindAt(), "n2": behindAt(), "n3": behindAt()}
	for range 5 { // whatever order the map gives
		unseen, expires := e.unseen("uid-a", cached, t0.Add(20*time.Second))
		if diff := cmp.Diff(map[string]bool{"n1": true, "n2": true, "n3": true}, unseen); diff != "" {
			t.Errorf("unseen (-want +got):\n%s", diff)
		}
		if want := t0.Add(rolloutExpectTTL); !expires.Equal(want) {
			t.Errorf("expires %v, want the first write's %v", expires, want)
		}
	}
}
