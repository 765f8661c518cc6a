package controller

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// TestExtendedResourceClaimEdges: a pod whose only extended resource
// request is an init container's is demand; a request of zero devices is
// none; the claim standing for the requests is named apart from any real
// claim ("<extended-resources>" and the pod's name) and carries the pod's
// UID.
func TestExtendedResourceClaimEdges(t *testing.T) {
	classes := newExtendedResources([]*resourceapi.DeviceClass{
		{ObjectMeta: metav1.ObjectMeta{Name: "mig-1g.10gb"}, Spec: resourceapi.DeviceClassSpec{ExtendedResourceName: ptr.To("nvidia.com/mig-1g.10gb")}},
	}, nil)
	type claim struct {
		Name, UID string
		Counts    []int64
	}
	tests := map[string]struct {
		init, container map[string]int64
		want            *claim
	}{
		"only an init container asks": {
			init: map[string]int64{"nvidia.com/mig-1g.10gb": 2}, container: map[string]int64{},
			want: &claim{Name: "<extended-resources>p", UID: "p-uid", Counts: []int64{2}},
		},
		"a request of zero devices": {
			container: map[string]int64{"nvidia.com/mig-1g.10gb": 0},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			pod := extPod("p", tc.init, tc.container)
			c, _ := extendedResourceClaim(&pod, classes, nil)
			var got *claim
			if c != nil {
				got = &claim{Name: c.Name, UID: string(c.UID)}
				for _, r := range c.Spec.Devices.Requests {
					got.Counts = append(got.Counts, r.Exactly.Count)
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("claim (-want +got):\n%s", diff)
			}
		})
	}
}
