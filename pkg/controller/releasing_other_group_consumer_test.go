package controller

import (
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
)

// TestClaimReservedForOtherGroupsPodsIsNotReleasing: a claim reserved for
// a consumer of another API group whose resource is also named "pods" is
// no pod's: its device is not releasing, however unknown that consumer
// is. The same claim reserved for a core pod that is gone lets go of it.
func TestClaimReservedForOtherGroupsPodsIsNotReleasing(t *testing.T) {
	for name, tc := range map[string]struct {
		group string
		want  bool
	}{
		"core pod, gone":          {group: "", want: true},
		"example.com pods, alive": {group: "example.com", want: false},
	} {
		t.Run(name, func(t *testing.T) {
			c := allocatedClaim("c", false, [3]string{migClassName, "n1", "gpu-0-mig-7g80gb-0-0"})
			c.Status.ReservedFor = []resourceapi.ResourceClaimConsumerReference{{APIGroup: tc.group, Resource: "pods", Name: "w", UID: "uid-w"}}
			got := releasingDevices(map[types.NamespacedName]*resourceapi.ResourceClaim{{Namespace: "ns", Name: "c"}: c}, nil, migClassName)
			if has := got["n1"].Has("gpu-0-mig-7g80gb-0-0"); has != tc.want {
				t.Errorf("n1's gpu-0-mig-7g80gb-0-0 releasing %t, want %t", has, tc.want)
			}
		})
	}
}
